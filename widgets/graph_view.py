"""GraphView: an interactive graph (cytoscape.js + dagre, bundled in static/graph_view.js) with module groups that
open and close, search, a legend and an inspector; the clicked node's id comes back as `selected`.

Python owns what is shown (`graph_view_data` computes it) and bumps `revision` once per redraw; the browser draws on
it and keeps its layout: new colours or kinds restyle in place, new nodes go between their neighbours, an opened
group is laid out on its own (widgets/js/layout.js). `busy` tells the browser Python is computing (docs/explorer.md).

`nodes` and `elements` reach the browser whole only with the widget's state (when it opens, or when the page asks for
it again); every change after that goes as a patch message (`graph_patch`: what was added, changed (a node: only
its changed fields) or removed, from revision `base` to `revision`) sent just before the revision bump, so a change
of a few nodes of a big model sends those nodes, not the whole list. A browser that missed one asks for `resync` and
gets everything at once.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

from devcopy_lib.names import DIRECTIONS

from . import graph_view_data as data

STATIC = Path(__file__).parent / "static"
UPDATABLE = ("device", "kind", "reason", "bytes", "bytes_text", "predicted_s", "predicted_text", "label", "rows")
SHOW_ALL_UP_TO = 100  # nodes: a bigger graph opens with its module groups collapsed to the top modules
OPEN_ITEMS = 120  # items on screen when a big graph opens
COLLAPSED_ITEMS = 60  # items on screen after "collapse groups"
# Items in the longest chain on screen when a big graph opens: dagre stacks a chain top to bottom, and about this
# many ranks fit the canvas (grown to its most, 840 px) with text of 10 px; a level deeper would open unreadable.
OPEN_RANKS = 10


def list_patch(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], key: Any, fields: bool = False
) -> dict[str, Any]:
    """How to turn the list `before` into `after` (items identified by `key(item)`): the items new or changed
    (`set`), the ids gone (`remove`), and the ids in their new order when the ids or their order changed (`order`).
    With `fields`, a changed item with the same keys as before goes as `[id, {the fields that changed}]` in
    `update` instead of whole in `set`: a new delegate set of a 96-layer GPT-2 changes the neighbours or the reason
    of 2,000 nodes, and their other fields (inspector rows, labels, shapes) are half the bytes."""
    old = {key(item): item for item in before}
    ids = [key(item) for item in after]
    changed, update = [], []
    for item in after:
        was = old.get(key(item))
        if was == item:
            continue
        if fields and was is not None and was.keys() == item.keys():
            update.append([key(item), {k: v for k, v in item.items() if was[k] != v}])
        else:
            changed.append(item)
    return {
        "set": changed,
        "update": update,
        "remove": sorted(set(old) - set(ids)),
        "order": ids if ids != [key(item) for item in before] else None,
    }


def graph_patch(
    before: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]],
    after: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]],
    base: int,
    revision: int,
) -> dict[str, Any]:
    """The message that takes the browser's (nodes, elements) from revision `base` to `revision`."""
    return {
        "kind": "graph_patch",
        "base": base,
        "revision": revision,
        "nodes": list_patch(before[0], after[0], lambda n: n["id"], fields=True),
        "elements": list_patch(before[1], after[1], lambda e: e["data"]["id"]),
    }


def chain_length(nodes: Sequence[Mapping[str, Any]], edges: Sequence[Sequence[str]], collapsed: set[str]) -> int:
    """Items in the longest chain shown with `collapsed` closed (a box counts once however much it holds): about the
    ranks dagre stacks. `nodes` are in graph (topological) order."""
    shown = {n["id"]: data.representative(n["module"], collapsed) or n["id"] for n in nodes}
    rank = dict.fromkeys(shown.values(), 1)
    users: dict[str, list[str]] = {}
    for src, dst in edges:
        users.setdefault(src, []).append(dst)
    for node in nodes:
        src = shown[node["id"]]
        for dst in users.get(node["id"], ()):
            if shown[dst] != src:
                rank[shown[dst]] = max(rank[shown[dst]], rank[src] + 1)
    return max(rank.values(), default=0)


def top_modules(
    nodes: Sequence[Mapping[str, Any]],
    groups: Mapping[str, data.Group],
    budget: int,
    edges: Sequence[Sequence[str]] | None = None,
    ranks: int = 0,
) -> list[str]:
    """The collapsed groups when whole levels of the module tree open, outermost first, while at most `budget`
    items (nodes and collapsed groups) are on screen and, given `edges` and `ranks`, the longest chain shown has at
    most `ranks` items: GPT-2 shows its layers as boxes, not half of one layer."""
    collapsed = set(groups)
    depth = 0
    while collapsed:
        level = {g for g in collapsed if g.count(".") == depth}
        depth += 1
        opened = collapsed - level
        if level and len({data.representative(n["module"], opened) or n["id"] for n in nodes}) > budget:
            break
        if level and edges is not None and ranks and chain_length(nodes, edges, opened) > ranks:
            break
        collapsed = opened
    return sorted(collapsed)


def initial_collapsed(
    nodes: Sequence[Mapping[str, Any]], groups: Mapping[str, data.Group], edges: Sequence[Sequence[str]] | None = None
) -> list[str]:
    """Every group open up to SHOW_ALL_UP_TO nodes; past that, the top modules within OPEN_ITEMS items and, given
    the edges, OPEN_RANKS ranks: the whole opening view fits the canvas with readable text."""
    return [] if len(nodes) <= SHOW_ALL_UP_TO else top_modules(nodes, groups, OPEN_ITEMS, edges, OPEN_RANKS)


def kept_collapsed(before: Mapping[str, Any], after: Mapping[str, Any], collapsed: Sequence[str]) -> list[str] | None:
    """The collapsed groups of a new graph whose groups `after` are mostly the groups `before` it replaces (more
    than half of all of them in both): each group in both stays open or closed as it was, and a new one is closed.
    None when the module trees differ that much (another model): it then opens as a new graph does. A new delegate
    set of one model keeps its groups, so the view keeps what the user opened and the browser keeps its layout."""
    both = before.keys() & after.keys()
    if 2 * len(both) <= len(before.keys() | after.keys()):
        return None
    return sorted((set(collapsed) & both) | (after.keys() - before.keys()))


class GraphView(anywidget.AnyWidget):
    """`show(nodes, edges)` draws a graph; `update_nodes({id: {"device": ...}})` recolours it without a new
    layout; `selected` is the clicked (or searched) node's id, and setting it reveals and centres that node."""

    _esm = STATIC / "graph_view.js"
    _css = STATIC / "graph_view.css"
    nodes = t.List(t.Dict()).tag(sync=True)
    elements = t.List(t.Dict()).tag(sync=True)
    layout_version = t.Int(0).tag(sync=True)
    collapsed = t.List(t.Unicode()).tag(sync=True)
    selected = t.Unicode("").tag(sync=True)
    legend = t.List(t.Dict()).tag(sync=True)
    counts = t.Dict().tag(sync=True)
    height = t.Unicode("560px").tag(sync=True)
    busy = t.Bool(False).tag(sync=True)  # Python is computing what the view will show (the view says so after 0.3 s)
    revision = t.Int(0).tag(sync=True)  # bumped once per redraw: the browser renders on it, then echoes it in the DOM
    copy_kinds = t.List(t.Unicode(), list(DIRECTIONS)).tag(sync=True)
    data_revision = t.Int(0).tag(sync=True)  # the revision `nodes` and `elements` of the widget's state are at
    PATCHED = ("nodes", "elements", "data_revision")  # in the state the page gets whole; changes go as patches

    def __init__(
        self, nodes: Sequence[Mapping[str, Any]] = (), edges: Sequence[Sequence[str]] = (), **kwargs: Any
    ) -> None:
        self._edges: list[tuple[str, ...]] = []
        self._groups: dict[str, data.Group] = {}
        self._structure: tuple[Any, ...] = ()
        self._browser: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])  # what the page was last sent
        self.show(nodes, edges)  # before the comm opens: the state it opens with holds the whole graph
        super().__init__(**kwargs)
        self.on_msg(self._on_msg)
        self.observe(self._reveal_selected, names="selected")

    def show(self, nodes: Sequence[Mapping[str, Any]], edges: Sequence[Sequence[str]]) -> None:
        """Draw `nodes` (dicts with id, label, kind, device, module, ...) joined by `edges` (src, dst). The same
        node ids and edges as shown keep the open groups, selection and layout: only colours and text change. New
        nodes in mostly the same modules (the same model with another delegate set) keep the groups the user opened
        or closed (`kept_collapsed`); another model opens as a new graph does."""
        shown = [dict(n) for n in nodes]
        pairs = [tuple(e) for e in edges]
        ids = {n["id"] for n in shown}
        if len(ids) != len(shown) or any(s not in ids or d not in ids for s, d in pairs):
            unknown = sorted({x for e in pairs for x in e} - ids)
            raise ValueError(
                f"GraphView.show needs unique node ids and edges between them; edges name unknown "
                f"nodes {unknown[:5]} (of {len(ids)} nodes, {len(shown) - len(ids)} duplicate ids). "
                f"Pass every node an edge touches."
            )
        same = [(n["id"], n["module"]) for n in shown] == [(n["id"], n["module"]) for n in self.nodes] and (
            pairs == self._edges
        )
        self._edges = pairs
        with self.hold_sync():
            if not same:
                groups = data.module_groups(shown)
                kept = kept_collapsed(self._groups, groups, self.collapsed)
                self._groups = groups
                self.collapsed = initial_collapsed(shown, groups, pairs) if kept is None else kept
                if self.selected not in ids:
                    self.selected = ""
            self.nodes = shown
            self._redraw()

    def update_nodes(self, changes: Mapping[str, Mapping[str, Any]]) -> None:
        """Change fields of some nodes (`{"add": {"device": "cpu", "kind": "cpu_op"}}`) in place: no new layout."""
        unknown = sorted(set(changes) - {n["id"] for n in self.nodes})
        fields = {f for change in changes.values() for f in change} - set(UPDATABLE)
        if unknown or fields:
            raise ValueError(
                f"GraphView.update_nodes: unknown node ids {unknown[:5]} or fields {sorted(fields)}; "
                f"ids must be shown nodes and fields among {', '.join(UPDATABLE)}."
            )
        self.nodes = [{**n, **changes.get(n["id"], {})} for n in self.nodes]
        self._redraw()

    def open_group(self, path: str) -> None:
        """Open the module group `path` ('' the whole model) and, within a budget, the groups inside it."""
        self._check_group(path)
        self.collapsed = data.open_group(self.collapsed, path, self.nodes, self._groups, data.EXPAND_BUDGET)
        self._redraw()

    def close_group(self, path: str) -> None:
        """Collapse the module group `path` into one box."""
        self._check_group(path)
        self.collapsed = sorted({*self.collapsed, path})
        self._redraw()

    def reset_groups(self) -> None:
        """Collapse the groups to the model's top modules (at most COLLAPSED_ITEMS items on screen)."""
        self.collapsed = top_modules(self.nodes, self._groups, COLLAPSED_ITEMS)
        self._redraw()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Mark the view busy while the caller computes its next content (a placement, a lowering)."""
        self.busy = True
        try:
            yield
        finally:
            self.busy = False

    def _check_group(self, path: str) -> None:
        if path and path not in self._groups:
            raise ValueError(
                f"No module group {path!r}. Groups: {', '.join(list(self._groups)[:8])}"
                f"{' ...' if len(self._groups) > 8 else ''}."
            )

    def _redraw(self) -> None:
        """Recompute what is visible; a new layout only when the visible structure changed."""
        elements = data.visible_elements(self.nodes, self._edges, self._groups, self.collapsed)
        structure = data.structure(elements)
        with self.hold_sync():
            self.elements = elements
            self.counts = {
                **data.counts(self.nodes, self._edges),
                "visible_nodes": sum("source" not in e["data"] for e in elements),
                "visible_edges": sum("source" in e["data"] for e in elements),
            }
            self.legend = [
                {"device": d, "colour": data.device_colour(d), "count": c}
                for d, c in sorted(self.counts["devices"].items(), key=lambda dc: (dc[0] != "cpu", dc[0]))
            ]
            if structure != self._structure:
                self._structure = structure
                self.layout_version += 1
            now = (self.nodes, elements)
            self.send(graph_patch(self._browser, now, self.data_revision, self.revision + 1))  # before the bump
            self._browser = now
            self.revision += 1
            self.data_revision = self.revision

    def _should_send_property(self, key: str, value: Any) -> bool:
        """`nodes`, `elements` and `data_revision` go to the page with the whole state only: changes go as patches."""
        return key not in self.PATCHED and bool(super()._should_send_property(key, value))

    def _resync(self) -> None:
        """The page missed a patch: send it everything, as one patch from nothing."""
        self.send(graph_patch(([], []), self._browser, -1, self.data_revision) | {"full": True})

    def _reveal_selected(self, change: Any) -> None:
        node = next((n for n in self.nodes if n["id"] == change["new"]), None)
        if node is not None and data.representative(node["module"], set(self.collapsed)) is not None:
            self.collapsed = sorted(set(self.collapsed) - set(data.ancestors(node["module"])))
            self._redraw()

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """The browser asks to open or close a group (a click on it) or to reset the groups."""
        action = {"open": self.open_group, "close": self.close_group}.get(content.get("action"))
        if action is not None:
            action(content["group"].removeprefix(data.GROUP_PREFIX))
        elif content.get("action") == "reset":
            self.reset_groups()
        elif content.get("action") == "resync":
            self._resync()
