"""What the graph view shows, as plain data: one dict per node of a placed graph (kind, device, module path, reason,
bytes, shape, predicted time, users, inputs, the inspector's rows), the module groups they nest in, and the elements
visible when some groups are collapsed. Pure functions, no widget: the view (`graph_view.py`) sends their output to
the browser. Sequences in a node (users, inputs, rows) are tuples: a big model's view keeps a hundred thousand of
them, and Python's cyclic collector leaves tuples of strings alone, where it would walk lists at every full
collection.

Nodes are grouped by the innermost module of their `nn_module_stack` (the module path torch.export records); a copy
sits in the module of the value it copies, a delegate in the deepest module holding most of its ops, a constant in
the deepest module holding all of its readers (docs/design.md describes the placed graph these nodes come from).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devcopy_lib import delegate_of, delegate_source, graph_fact, node_kind, overload_name
from devcopy_lib.bench.cost_model import price_text
from devcopy_lib.names import COPY_OP, DIRECTIONS, Direction, device_string, format_bytes

from .graph_inspector import node_rows, tensor_text

_CUDA_COLOURS = ("#b9e3bc", "#ffd59e", "#e1bee7", "#b2ebf2")  # cuda:0 .. cuda:3
DEVICE_COLOURS = {"cpu": "#dbe4f3", **{device_string(i): colour for i, colour in enumerate(_CUDA_COLOURS)}}
OTHER_DEVICE = "#f0f4c3"
GROUP_PREFIX = "group:"
# More nodes than this and the view opens with module groups collapsed, showing at most OPEN_BUDGET items.
COLLAPSE_ABOVE = 300
OPEN_BUDGET = 120
# One click on a collapsed group shows up to this many more items (a whole GPT-2 layer fits).
EXPAND_BUDGET = 300


def _innermost(node: Any) -> str | None:
    stack = node.meta.get("nn_module_stack")
    return list(stack.values())[-1][0] if stack else None


def _common(paths: Iterable[str]) -> str:
    """The deepest module path that contains every path ('' when they share none)."""
    split = [p.split(".") if p else [] for p in paths]
    if not split:
        return ""
    common = []
    for parts in zip(*split, strict=False):  # the common prefix: up to the shortest path
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    return ".".join(common)


def _majority(paths: Sequence[str]) -> str:
    """The deepest module path holding more than half of `paths` ('' when none does): a delegate spanning the end of
    one layer and the start of the next sits in the layer holding most of it."""
    held = Counter(a for p in paths for a in ancestors(p))
    return max((a for a, n in held.items() if 2 * n > len(paths)), key=lambda a: a.count("."), default="")


def _delegate_paths(delegate: Any) -> tuple[str, tuple[str, ...]]:
    """(the deepest module holding most of the delegate's ops, the module of each of its outputs)."""
    paths: tuple[str, tuple[str, ...]] = graph_fact(delegate.graph_module.graph, "module_paths", _graph_paths)
    return paths


def _graph_paths(graph: Any) -> tuple[str, tuple[str, ...]]:
    """`_delegate_paths` of a delegate's graph."""
    inner = {n: _innermost(n) for n in graph.nodes if n.op == "call_function"}  # its inputs belong elsewhere
    home = _majority([p for p in inner.values() if p is not None])
    output = next(n for n in graph.nodes if n.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    return home, tuple(inner.get(v) or home for v in values)


def module_paths(graph: Any) -> dict[str, str]:
    """Node name -> module path ('' is the model itself) for every node of a placed graph."""
    paths: dict[str, str] = {}
    delegates: dict[str, tuple[str, ...]] = {}
    for node in graph.nodes:
        delegate, source = delegate_of(node), delegate_source(node)
        if delegate is not None:
            paths[node.name], delegates[node.name] = _delegate_paths(delegate)
        elif source is not None:
            paths[node.name] = delegates[source.name][node.args[1]]
        elif node_kind(node) in DIRECTIONS:
            paths[node.name] = paths[node.args[0].name]
        else:
            paths[node.name] = _innermost(node) or ""
    for node in graph.nodes:  # constants read by one module sit in it
        if node.op == "get_attr" and node.users:
            paths[node.name] = _common(paths[u.name] for u in node.users)
    return paths


def _op(node: Any, kind: str) -> str:
    """The op a node runs, as the runtime names it: a copy by its out variant (`et_copy::_h2d_copy.out`)."""
    if kind in DIRECTIONS:
        return COPY_OP[Direction(kind)].name
    if node.op == "call_function":
        return overload_name(node.target) or str(getattr(node.target, "__name__", node.target))
    return str(node.target) if node.op in ("call_module", "get_attr") else node.op


def _label(node: Any, kind: str, op: str, nbytes: int, tensor: str) -> str:
    """The node's name, then its op, then its value's dtype and shape (`tensor`: `f32[1,64,768]`); a copy:
    direction, name, dtype and shape with bytes; a delegate: its name and op count."""
    name = node.name
    if kind in DIRECTIONS:
        return f"{kind.upper()} {name}\n{tensor} {format_bytes(nbytes)}".rstrip()
    if kind == "delegate" and (delegate := delegate_of(node)) is not None:
        return f"{name}\n{len(delegate.ops)} op{'s' if len(delegate.ops) != 1 else ''}"
    lines = [name] if kind in ("input", "output", "getitem") or op == name else [name, op]
    return "\n".join([*lines, tensor] if tensor else lines)


def branch_notes(placed: Any) -> dict[str, str]:
    """node name -> what it is in control flow (the report's `control_flow`): a branch submodule says which branch
    of which construct it is and what a call taking it copies; a construct, its branches and the one the example
    inputs take."""
    notes: dict[str, str] = {}
    graph = {n.name: n for n in placed.graph_module.graph.nodes}
    for row in placed.report.control_flow:
        node = graph.get(row["node"])
        modules = [a.name for a in node.args if getattr(a, "op", None) == "get_attr"] if node is not None else []
        for module, (label, branch) in zip(modules, row["branches"].items(), strict=False):
            copies = branch["copies"]
            notes[module] = (
                f"{label} branch of {row['node']}: {branch['ops']} ops on the CPU, "
                f"{copies[Direction.H2D]} H2D + {copies[Direction.D2H]} D2H around it"
            )
        taken = row["example"]
        iterations = f", {row['iterations']} iterations" if "iterations" in row else ""
        notes[row["node"]] = (
            f"{row['construct']}: branches {' / '.join(row['branches'])}; "
            f"the example inputs take {taken if taken is not None else 'none (not run)'}{iterations}"
        )
    return notes


# A node that is no copy or delegate, seen again with the same report row, module, neighbours and value (most nodes
# of a model, from one delegate set to the next), keeps the dict made for it: its texts and inspector rows are most
# of the work, and depend on nothing else. Up to PLAIN_KEPT dicts stay (all are dropped when there are more).
PLAIN_KINDS = frozenset({"input", "output", "cpu_op", "getitem"})
PLAIN_KEPT = 200_000
_plain: dict[tuple[Any, ...], tuple[Any, dict[str, Any]]] = {}


def graph_elements(placed: Any) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The placed program's nodes (as dicts the view shows) and its data edges (src, dst)."""
    rows = {row.name: row for row in placed.report.rows}
    branches = branch_notes(placed)
    graph = placed.graph_module.graph
    paths = module_paths(graph)
    devices, nbytes = {r.name: r.device for r in rows.values()}, {r.name: r.bytes for r in rows.values()}
    nodes = []
    if len(_plain) > PLAIN_KEPT:
        _plain.clear()
    for node in graph.nodes:
        row, value = rows[node.name], node.meta.get("val")
        users, inputs = tuple(u.name for u in node.users), tuple(i.name for i in node.all_input_nodes)
        plain = row.kind in PLAIN_KINDS and row.predicted_s is None
        if plain:  # the value's id, with the value kept beside the dict to check it is the same one
            key = (node.name, node.op, node.target, row.kind, row.device, row.reason, row.bytes, paths[node.name],
                   branches.get(node.name, ""), users, inputs, id(value))  # fmt: skip
            if (seen := _plain.get(key)) is not None and seen[0] is value:
                nodes.append(seen[1])
                continue
        op, tensor = _op(node, row.kind), tensor_text(value)
        label = _label(node, row.kind, op, row.bytes, tensor)
        if node.name in branches:  # control flow: the branch label on the node (docs/explorer.md)
            label += "\n" + branches[node.name].split(":")[0]
        nodes.append(
            {
                "id": node.name,
                "label": label,
                "branch": branches.get(node.name, ""),
                "kind": row.kind,
                "op": op,
                "device": row.device,
                "module": paths[node.name],
                "reason": row.reason,
                "bytes": row.bytes,
                "bytes_text": format_bytes(row.bytes),
                "predicted_s": row.predicted_s,
                "predicted_text": price_text(row.predicted_s, placed.report.pricing, row.predicted_error),
                "users": users,
                "inputs": inputs,
                "shape": tensor,
            }
        )
        nodes[-1]["rows"], nodes[-1]["what_if"] = node_rows(node, nodes[-1], devices, nbytes)
        if plain:
            _plain[key] = (value, nodes[-1])
    edges = [(i, node["id"]) for node in nodes for i in node["inputs"]]
    return nodes, edges


@dataclass(frozen=True)
class Group:
    """One module path: its parent group ('' at the top), the label shown, and how many nodes it holds in all."""

    path: str
    parent: str
    label: str
    size: int

    @property
    def id(self) -> str:
        return GROUP_PREFIX + self.path


def ancestors(path: str) -> list[str]:
    """'a.b.c' -> ['a', 'a.b', 'a.b.c'] (outermost first); '' -> []."""
    parts = path.split(".") if path else []
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def module_groups(nodes: Sequence[Mapping[str, Any]]) -> dict[str, Group]:
    """Every module path the nodes sit in, and every path above one, as groups."""
    direct = Counter(n["module"] for n in nodes)  # a model has about one module per seven nodes
    sizes: Counter[str] = Counter()
    for module, count in direct.items():
        for a in ancestors(module):
            sizes[a] += count
    groups = {}
    for path in sorted(sizes):
        parent, _, last = path.rpartition(".")
        label = f"{parent.rpartition('.')[2]}.{last}" if last.isdigit() and parent else last
        groups[path] = Group(path, parent, label, sizes[path])
    return groups


def _children(nodes: Sequence[Mapping[str, Any]], groups: Mapping[str, Group]) -> dict[str, tuple[int, list[str]]]:
    """Group path ('' the top) -> (number of nodes directly in it, its child groups)."""
    direct = Counter(n["module"] for n in nodes)
    kids: dict[str, list[str]] = {path: [] for path in ["", *groups]}
    for group in groups.values():
        kids[group.parent].append(group.path)
    return {path: (direct.get(path, 0), children) for path, children in kids.items()}


def _shown_items(collapsed: set[str], nodes: Sequence[Mapping[str, Any]]) -> int:
    """Nodes and collapsed groups on screen (expanded groups are frames around them and not counted)."""
    return len({representative(n["module"], collapsed) or n["id"] for n in nodes})


def representative(module: str, collapsed: set[str]) -> str | None:
    """The outermost collapsed group holding `module`, or None when every group around it is open."""
    return next((a for a in ancestors(module) if a in collapsed), None)


def open_group(
    collapsed: Iterable[str], path: str, nodes: Sequence[Mapping[str, Any]], groups: Mapping[str, Group], budget: int
) -> list[str]:
    """Collapsed groups after opening `path` ('' the whole model): its subgroups open too, smallest first, while
    the items on screen grow by at most `budget` (so one click shows a whole layer, not the whole model)."""
    closed = set(collapsed) - {path, *ancestors(path)}
    children = _children(nodes, groups)
    limit = _shown_items(set(collapsed), nodes) + budget
    shown = _shown_items(closed, nodes)
    frontier = list(children[path][1])
    while frontier:
        frontier.sort(key=lambda g: groups[g].size)
        group = frontier.pop(0)
        direct, kids = children[group]
        if group not in closed:  # already open: look inside
            frontier.extend(kids)
            continue
        cost = direct + len(kids) - 1
        if shown + cost <= limit:
            closed.discard(group)
            shown += cost
            frontier.extend(kids)
    return sorted(closed)


def initial_collapsed(nodes: Sequence[Mapping[str, Any]], groups: Mapping[str, Group]) -> list[str]:
    """No group collapsed up to COLLAPSE_ABOVE nodes; past that, the model opened within OPEN_BUDGET items."""
    if len(nodes) <= COLLAPSE_ABOVE:
        return []
    return open_group(groups, "", nodes, groups, OPEN_BUDGET - _shown_items(set(groups), nodes))


def _classes(kind: str) -> str:
    return f"{kind} copy" if kind in DIRECTIONS else kind


def device_colour(device: str) -> str:
    return DEVICE_COLOURS.get(device, OTHER_DEVICE)


def visible_elements(
    nodes: Sequence[Mapping[str, Any]],
    edges: Sequence[Sequence[str]],
    groups: Mapping[str, Group],
    collapsed: Iterable[str],
) -> list[dict[str, Any]]:
    """Cytoscape elements on screen: open groups as frames, collapsed groups as single boxes standing for all
    they hold, the other nodes inside their innermost open group, and edges between what is shown (deduplicated)."""
    closed = set(collapsed)
    shown: dict[str, str] = {}  # node id -> the element standing for it
    held: dict[str, Counter[str]] = {}
    leaves, frames = [], set()
    # per module: its box (None when every group around it is open) and the open frames around it; a model has
    # about one module per seven nodes, so this is computed once per module, not once per node
    placed: dict[str, tuple[str | None, list[str]]] = {}
    for node in nodes:
        if (module := node["module"]) not in placed:
            box = representative(module, closed)
            placed[module] = (box, ancestors(box.rpartition(".")[0] if box else module))
        group, around = placed[module]
        shown[node["id"]] = GROUP_PREFIX + group if group else node["id"]
        frames.update(around)
        if group:
            held.setdefault(group, Counter())[node["device"]] += 1
            held[group]["copies"] += node["kind"] in DIRECTIONS
            continue
        data = {k: node[k] for k in ("id", "label", "kind", "device")}
        parent = {"parent": GROUP_PREFIX + node["module"]} if node["module"] else {}
        leaves.append(
            {"data": {**data, **parent, "colour": device_colour(node["device"])}, "classes": _classes(node["kind"])}
        )
    elements = [_group_element(groups[path], held.get(path)) for path in sorted(frames | set(held))]  # outer first
    pairs = dict.fromkeys((shown[s], shown[t]) for s, t in edges if shown[s] != shown[t])
    return elements + leaves + [{"data": {"id": f"{s}->{t}", "source": s, "target": t}} for s, t in pairs]


def _group_element(group: Group, held: Counter[str] | None) -> dict[str, Any]:
    """An open group as a frame, or a collapsed one as a box saying what it holds, in its main device's colour."""
    data = {"id": group.id, "kind": "group", **({"parent": GROUP_PREFIX + group.parent} if group.parent else {})}
    if held is None:
        return {"data": {**data, "label": group.label}, "classes": "group expanded"}
    copies = held.pop("copies")
    main = held.most_common(1)[0][0]
    what = [f"{group.size} nodes"] + ([f"{copies} cop{'ies' if copies > 1 else 'y'}"] if copies else [])
    label = f"{group.label}  [{', '.join(what)}]"
    return {
        "data": {**data, "label": label, "device": main, "colour": device_colour(main)},
        "classes": "group collapsed" + (" has-copies" if copies else ""),
    }


def structure(elements: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    """What a layout depends on: the elements' ids, parents, and edge ends (not colours or labels)."""
    return tuple((e["data"]["id"], e["data"].get("parent"), e["data"].get("source")) for e in elements)


def counts(nodes: Sequence[Mapping[str, Any]], edges: Sequence[Any]) -> dict[str, Any]:
    """Nodes, edges, nodes per device and per kind, over the whole graph (collapsed or not)."""
    return {
        "nodes": len(nodes),
        "edges": len(edges),
        "devices": dict(Counter(n["device"] for n in nodes)),
        "kinds": dict(Counter(n["kind"] for n in nodes)),
    }
