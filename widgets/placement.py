"""PlacementExplorer: pick a model, delegated ops, target, strategy and skip switches; see the placed graph and its
memory plan. Or open an ExecuTorch `.pte` and see its instructions and ExecuTorch's memory plan."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, TypeVar

import ipywidgets as w

from devcopy_lib import (
    PteProgram,
    diff_html,
    export_report,
    load_method,
    make_allocator,
    memory_picture,
    models,
    open_pte,
    placement_diff,
    profile_trace,
    pte_inputs,
    pte_program,
    scoped_allocators,
    write_trace,
)
from devcopy_lib.names import PARTITIONS, STRATEGIES, Strategy

from . import html
from . import placement_summary as summary
from .collector import collector_paused
from .graph_inspector import what_if_texts
from .graph_view import GraphView
from .graph_view_data import graph_elements
from .guard import shown_errors
from .memory_plan_view import MemoryPlanView
from .placement_state import PlacementState, parse_target
from .pte_graph import pte_graph_elements

TARGETS = ("cuda:0", "cuda:1", "cpu")
KEPT_WHAT_IFS = 256  # what-if rows kept per explorer, per (placement, copy); least recently used dropped first
KEPT_GRAPHS = 8  # the graph view's nodes and edges kept per explorer, per placement (least recently used dropped)
# placed nodes past which the memory plan, the bytes-by-placement table and the table of nodes open folded (not
# computed, not sent on each edit or click, until opened)
MEMORY_OPEN_UP_TO = 400
# The diff's table in the explorer: headers left-aligned and padded as their cells (a browser centres a bare <th>)
DIFF_STYLE = (
    "<style>.devcopy-diff table{border-collapse:collapse;font-family:monospace;font-size:12px}"
    ".devcopy-diff th,.devcopy-diff td{padding:1px 10px 1px 0;text-align:left;vertical-align:top;"
    "border-bottom:1px solid #e0e0e0}</style>"
)
CUSTOM = "custom"  # the delegate-set menu's entry when the ticked ops match no preset
# The state's settings the controls edit: the view shown was placed with these (restored after a refused change).
SETTINGS = (
    "model",
    "delegate_ops",
    "target_device",
    "partition",
    "strategy",
    "skip_h2d_for_method_inputs",
    "skip_d2h_for_method_outputs",
    "hoist_constants",
    "resident_buffers",
)
PTE_REASON = (
    "an ExecuTorch program (.pte): ExecuTorch placed it when it was written, so the model, delegated ops, target, "
    "partition, strategy, skip, hoist and resident-buffer switches, the ExecuTorch comparison, the strategy diff "
    "and the report (which describe a placement devcopy makes) do not apply and are off; the graph, the memory plan "
    "and export trace (a profiled run of the program) do (docs/pte.md)"
)


T = TypeVar("T")


def kept(store: OrderedDict[Any, T], key: Any, compute: Callable[[], T], size: int) -> T:
    """`store[key]`, computed first when missing; only the `size` most recently used entries stay."""
    if key in store:
        store.move_to_end(key)
    else:
        store[key] = compute()
        while len(store) > size:
            store.popitem(last=False)
    return store[key]


def _strategies(state: PlacementState) -> tuple[str, ...]:
    """The strategies worth offering: `peer` only when the target names two devices (else it equals executorch)."""
    return STRATEGIES if state.peer_possible() else tuple(s for s in STRATEGIES if s != Strategy.PEER)


def _target_text(target: Any) -> str:
    """The target box's text for a state's target: the device, or `key=device` pairs."""
    return ", ".join(f"{k}={v}" for k, v in target.items()) if isinstance(target, dict) else str(target)


class PlacementExplorer(w.VBox):
    """The view over a `PlacementState`: every control edits the state, then the view is redone (the graph keeps
    its layout when only devices or kinds changed); the memory plan is drawn beside the graph. With `pte` (or
    `for_pte`) it shows an ExecuTorch program instead, its re-placing controls off (docs/explorer.md)."""

    def __init__(
        self, state: PlacementState | None = None, compare_executorch: bool = False, pte: Any = None, **settings: Any
    ) -> None:
        self.state = state or PlacementState(**settings)
        # an ExecuTorch program shown instead of the state's placement (a path, its bytes or a PteProgram)
        self.pte: PteProgram | None = pte if isinstance(pte, PteProgram) or pte is None else open_pte(pte)
        self.placed: Any = None  # the placement on screen (a PlacedProgram), None before the first draw
        self.error: Exception | None = None
        self._shown: dict[str, Any] | None = None  # the settings of the view on screen (None until one is drawn)
        self._syncing = False  # True while _restore sets the controls: their events are not user edits
        self.comparing: threading.Thread | None = None  # the ExecuTorch comparison running in the background
        self._comparison = 0  # which refresh the comparison on screen belongs to
        self.last_branches: list[dict[str, Any]] = []  # the last traced call's Method.control_flow
        self._placed_key: tuple[Any, ...] = ()  # the state's placed_key() of the placement on screen
        # the what-if rows computed so far, per (placed_key, copy id): asked for on the button, never on a click
        self._what_ifs: OrderedDict[tuple[Any, ...], list[list[str]]] = OrderedDict()
        # the graph view's nodes and edges per placement: an op toggled back shows a placement the state kept, and
        # making its nodes again (inspector rows, labels) took half a second on a 96-layer GPT-2
        self._graphs: OrderedDict[tuple[Any, ...], tuple[list[dict[str, Any]], list[tuple[str, str]]]] = OrderedDict()
        s = self.state
        self.model = w.Dropdown(options=s.model_names, value=s.model, description="model")
        self.partition = w.Dropdown(options=PARTITIONS, value=s.partition, description="partition")
        # applies on Enter or leaving the box, not per keystroke; `key=device, ...` pairs put delegates apart
        self.target = w.Combobox(
            options=TARGETS,
            value=_target_text(s.target_device),
            description="target",
            ensure_option=False,
            continuous_update=False,
            placeholder="cuda:0 or delegate_0=cuda:0, delegate_1=cuda:1",
        )
        if s.strategy not in _strategies(s):  # peer asked for with one target device: it would equal executorch
            s.strategy = Strategy.EXECUTORCH
        self.strategy = w.Dropdown(options=_strategies(s), value=s.strategy, description="strategy")
        self.skip_h2d = w.Checkbox(value=s.skip_h2d_for_method_inputs, description="skip H2D for method inputs")
        self.skip_d2h = w.Checkbox(value=s.skip_d2h_for_method_outputs, description="skip D2H for method outputs")
        self.hoist = w.Checkbox(value=s.hoist_constants, description="hoist constants (copy once at load)")
        self.resident = w.Checkbox(value=s.resident_buffers, description="resident buffers (state stays on device)")
        self.compare = w.Checkbox(value=compare_executorch, description="compare with ExecuTorch")
        self.op_boxes: list[w.Checkbox] = []
        wrap = w.Layout(**html.WRAP)
        self.ops = w.HBox(layout=wrap)
        self.preset = w.Dropdown(options=(CUSTOM, *models.DELEGATE_SETS), value=CUSTOM, description="delegate set")
        self.select_all, self.select_none = w.Button(description="select all"), w.Button(description="select none")
        self.preset.observe(self._preset_chosen, names="value")
        self.select_all.on_click(lambda _: self._tick(self.state.model_ops()))
        self.select_none.on_click(lambda _: self._tick(()))
        # the graph takes the whole width; the what-if line, the memory plan and the table sit below it
        self.counts, self.graph, self.table = w.HTML(), GraphView(layout=w.Layout(width="100%")), w.HTML()
        self.memory = MemoryPlanView()
        # the same program placed plain, hoisted and with resident buffers: three more placements, made when shown
        self.placements = w.HTML()
        self.placements_section = w.Accordion(
            [self.placements], titles=("bytes per call: plain, hoisted, resident buffers",), selected_index=0
        )
        self.placements_section.add_class("devcopy-placements-section")
        self.placements_section.observe(lambda _: self._show_placements(), names="selected_index")
        self.memory_section = w.Accordion([self.memory], titles=("memory plan",), selected_index=0)
        # every placed node (a .pte: every instruction) as a row: 8,000 rows on a 96-layer GPT-2, made when shown
        self.table_section = w.Accordion([self.table], titles=("nodes",), selected_index=0)
        self.table_section.add_class("devcopy-table-section")
        self.table_section.observe(lambda _: self._show_table(), names="selected_index")
        self.memory_section.add_class("devcopy-memory-section")
        self.memory_section.observe(self._memory_folded, names="selected_index")
        self._memory_source: tuple[Any, Any] | None = None  # what the folded memory plan will draw once opened
        # the selected copy's what-if: computed on this button (one re-placement per change), cached per placement
        self.what_if_button = w.Button(
            description="what if?",
            icon="question",
            disabled=True,
            tooltip="place the program again with each change that could remove the selected copy",
        )
        self.what_if_button.on_click(lambda _: self.what_if())
        self.what_if_html = w.HTML()
        self.what_if_html.add_class("devcopy-what-if")
        self.pte_note = w.HTML()
        self.savings, self.executorch, self.error_html = w.HTML(), w.HTML(), w.HTML()
        # exports (docs/explorer.md, Exports): the report as a file, and a diff against another strategy
        self.report_path = w.Text(description="report file", placeholder="devcopy_report.html (or .json)")
        self.export_button = w.Button(description="export report", icon="download")
        self.export_button.on_click(lambda _: self.export_report())
        self.trace_button = w.Button(description="export trace", icon="clock-o")
        self.trace_button.on_click(lambda _: self.export_trace())
        self.compare_with = w.Dropdown(options=("", *_strategies(s)), value="", description="compare with")
        self.export_note, self.diff = w.HTML(), w.HTML()
        for widget, name in (
            (self.strategy, "devcopy-strategy"),
            (self.counts, "devcopy-counts"),
            (self.model, "devcopy-model"),
            (self.partition, "devcopy-partition"),
            (self.pte_note, "devcopy-pte-note"),
        ):
            widget.add_class(name)
        super().__init__(
            [
                w.HBox([self.model, self.partition, self.target, self.strategy], layout=wrap),
                w.HBox([self.skip_h2d, self.skip_d2h, self.hoist, self.resident, self.compare], layout=wrap),
                w.HBox([self.compare_with, self.report_path, self.export_button, self.trace_button], layout=wrap),
                w.HBox(
                    [
                        w.HTML("<b>delegated ops</b> (the model's ops after decomposition)"),
                        self.preset,
                        self.select_all,
                        self.select_none,
                    ],
                    layout=wrap,
                ),
                self.ops,
                self.pte_note,
                self.error_html,
                self.counts,
                self.placements_section,
                self.savings,
                self.executorch,
                self.export_note,
                self.diff,
                self.graph,
                w.HBox([self.what_if_button, self.what_if_html], layout=wrap),
                self.memory_section,
                self.table_section,
            ]
        )
        self.add_class("devcopy-placement")
        self._wire(*self._placing_controls())
        self.graph.observe(self._explain, names="selected")
        self.graph.observe(lambda change: self.memory.highlight(change["new"]), names="selected")
        self.memory.observe(self._memory_picked, names="selected_node")
        if self.pte is not None:
            self._off_for_pte()
        else:
            self._rebuild_ops()
        self.refresh()

    @classmethod
    def for_pte(cls, source: Any, **settings: Any) -> PlacementExplorer:
        """An explorer on an ExecuTorch program: `source` is a `.pte` path, its bytes or a `PteProgram` (a bad file
        raises PteLoadError here). The controls that re-place a model are off, with the reason shown."""
        return cls(pte=source, **settings)

    def _placing_controls(self) -> tuple[w.ValueWidget, ...]:
        """The controls whose change places the model again (wired to a refresh; off on a `.pte`)."""
        return (
            self.model,
            self.partition,
            self.target,
            self.strategy,
            self.skip_h2d,
            self.skip_d2h,
            self.hoist,
            self.resident,
            self.compare,
            self.compare_with,
        )

    def _off_for_pte(self) -> None:
        """Turn off every control that re-places a model, and say why in the panel."""
        for control in (
            *self._placing_controls(),
            self.preset,
            self.select_all,
            self.select_none,
            self.report_path,
            self.export_button,
            self.what_if_button,
        ):
            control.disabled = True
        self.placements_section.layout.display = "none"  # placements of a model devcopy places: none here
        self.pte_note.value = html.note(f"Showing {PTE_REASON}.", "devcopy-pte-reason")

    def _memory_picked(self, change: Any) -> None:
        """A tensor clicked in the memory plan selects the graph node that writes it."""
        if change["new"] and any(n["id"] == change["new"] for n in self.graph.nodes):
            self.graph.selected = change["new"]

    @classmethod
    def for_model(cls, module: Any, example_inputs: Any, name: str = "my_model", **settings: Any) -> PlacementExplorer:
        """An explorer opened on your own module (the sample models stay selectable)."""
        state = PlacementState(**settings)
        state.add_model(name, module, example_inputs)
        return cls(state)

    def _wire(self, *widgets: Any) -> None:
        """The one place controls are connected: any value change goes through `_changed`."""
        for widget in widgets:
            widget.observe(self._changed, names="value")

    @shown_errors
    def _rebuild_ops(self) -> None:
        self._build_op_boxes()

    def _build_op_boxes(self) -> None:
        ticked = set(self.state.ticked_ops())
        self.op_boxes = [
            w.Checkbox(value=op in ticked, description=op, indent=False, layout=w.Layout(width="170px"))
            for op in self.state.model_ops()
        ]
        self.ops.children = self.op_boxes
        self._wire(*self.op_boxes)
        self._show_preset()

    def _show_preset(self) -> None:
        """Show the preset the ticked ops equal (CUSTOM when none does, or none is ticked), without applying it; of
        presets giving the same ops (all ops of `add` are in `cnn` and `default`) the one shown stays, else
        `default` (what the explorer opens with), else the first."""
        ticked = self.state.ticked_ops()
        order = dict.fromkeys([self.preset.value, "default", *models.DELEGATE_SETS])
        presets = (name for name in order if name != CUSTOM and ticked and self.state.preset_ops(name) == ticked)
        match = next(presets, CUSTOM)
        self.preset.unobserve(self._preset_chosen, names="value")
        self.preset.value = match
        self.preset.observe(self._preset_chosen, names="value")

    def _preset_chosen(self, change: Any) -> None:
        if change["new"] != CUSTOM:
            self._tick(self.state.preset_ops(change["new"]))

    @contextmanager
    def _busy(self) -> Iterator[None]:
        """The graph view's busy state around work that can take over 0.3 s (a lowering, a placement, an export; the
        view shows it after 0.3 s). Nested calls mark it once: the outermost clears it."""
        if self.graph.busy:
            yield
            return
        with collector_paused(), self.graph.working():  # the collector resumes once the page is told
            yield

    @shown_errors
    def _tick(self, ops: Any) -> None:
        """Delegate exactly `ops` (a preset, all or none): the boxes change together and the view is redone once."""
        with self._busy():  # a new delegate set lowers again: seconds on a big model
            self.state.delegate_ops = tuple(ops)
            self._rebuild_ops()
            self.refresh()

    def _selected_copy(self) -> dict[str, Any] | None:
        """The selected node when it is a copy some change could remove (it has `what_if` changes), else None."""
        if not self.graph.selected or self.placed is None or self.pte is not None:
            return None
        node = next((n for n in self.graph.nodes if n["id"] == self.graph.selected), None)
        return node if node is not None and node.get("what_if") else None

    def _explain(self, _change: Any = None) -> None:
        """Show the selected copy's what-if when it is already computed (per placement and copy), else offer the
        button that computes it. Nothing is placed here: a click on a copy stays instant."""
        node = self._selected_copy()
        rows = None if node is None else self._what_ifs.get((self._placed_key, node["id"]))
        self.what_if_button.disabled = node is None or rows is not None
        if node is None:
            self.what_if_html.value = ""
            return
        if rows is None:
            changes = ", ".join(f"{key} {value}" for change in node["what_if"] for key, value in change.items())
            text = f"{node['id']}: press 'what if?' to place the program again with each change ({changes})"
            self.what_if_html.value = html.note(text, "devcopy-what-if-pending")
            return
        self.what_if_html.value = html.note(f"what if, for {node['id']}:", "devcopy-what-if-title") + html.table(
            [{"change": text} for _, text in rows], ("change",), "devcopy-what-if-rows"
        )

    @shown_errors
    def what_if(self, node_id: str | None = None) -> list[list[str]]:
        """The what-if rows (`["what if", text]`) of copy `node_id`, selected first (default: the selected copy):
        each change that could remove it is placed again and compared with the placement shown; a change that is
        refused says so in its row. Computed once per (placement, copy), the view busy meanwhile; shown under the
        graph. Only those rows are sent to the browser, never the graph's nodes again."""
        if node_id is not None:
            self.graph.selected = node_id
        node = self._selected_copy()
        if node is None:
            raise ValueError(
                f"No what-if for {self.graph.selected or 'nothing selected'!r}: select a copy (an H2D, D2H or D2D "
                "node whose inspector has a 'what if' row) first"
            )

        def compute() -> list[list[str]]:
            with self._busy():
                before = self.placed.report
                return what_if_texts(node["what_if"], before, lambda change: self.state.placed_if(change).report)

        rows = kept(self._what_ifs, (self._placed_key, node["id"]), compute, KEPT_WHAT_IFS)
        self._explain()
        return rows

    def _changed(self, change: Any) -> None:
        if self._syncing or self.pte is not None:  # a .pte's controls are off: nothing to re-place
            return
        with self._busy():  # the graph view says busy when this takes over 0.3 s
            if self._read_controls(change["owner"]):
                self.refresh()
        if self.error is not None and self._shown is not None:
            self._restore(self._shown)

    def _restore(self, shown: dict[str, Any]) -> None:
        """After a refused change, put the state and every control back to the settings of the view on screen, so
        controls and view agree; the error box keeps saying what was refused and why."""
        s = self.state
        for name, value in shown.items():
            setattr(s, name, value)
        self._syncing = True
        try:
            self.model.value, self.partition.value = s.model, s.partition
            self.target.value = _target_text(s.target_device)
            self.strategy.options = _strategies(s)
            self.strategy.value = s.strategy
            self.skip_h2d.value, self.skip_d2h.value = s.skip_h2d_for_method_inputs, s.skip_d2h_for_method_outputs
            self.hoist.value, self.resident.value = s.hoist_constants, s.resident_buffers
            ticked = set(s.ticked_ops())
            if [box.description for box in self.op_boxes] != list(s.model_ops()):
                self._build_op_boxes()  # the shown model's op boxes, without clearing the error box
            for box in self.op_boxes:
                box.value = box.description in ticked
        finally:
            self._syncing = False

    @shown_errors
    def _read_controls(self, owner: Any) -> bool:
        """Copy the controls into the state (a bad target text is shown, the state keeps its last good one)."""
        s = self.state
        s.target_device = parse_target(self.target.value)
        s.partition, s.strategy = self.partition.value, self.strategy.value
        s.skip_h2d_for_method_inputs, s.skip_d2h_for_method_outputs = self.skip_h2d.value, self.skip_d2h.value
        s.hoist_constants, s.resident_buffers = self.hoist.value, self.resident.value
        offered = _strategies(s)  # peer only with two target devices
        if self.strategy.options != offered:
            self._syncing = True  # a value dropped with its option is read here, not as a second edit
            try:
                self.strategy.options = offered  # keeps the value when still offered (no event then)
            finally:
                self._syncing = False
            s.strategy = self.strategy.value
            self.compare_with.options = ("", *offered)
        if owner is self.model:
            s.model, s.delegate_ops = self.model.value, None
            self._rebuild_ops()
        elif owner in self.op_boxes:
            s.delegate_ops = tuple(box.description for box in self.op_boxes if box.value)
            self._show_preset()
        return True

    def add_model(self, name: str, module: Any, example_inputs: Any) -> None:
        """Offer your own module under `name` and show it."""
        self.state.add_model(name, module, example_inputs)
        self.model.options = self.state.model_names
        self.model.value = name  # fires _changed, which rebuilds the op boxes and redraws

    @shown_errors
    def refresh(self) -> None:
        """Recompute the placement from the state and redraw everything; an error is shown above the last good
        view, which stays. A .pte is drawn as it is (`_show_pte`)."""
        if self.pte is not None:
            self._show_pte(self.pte)
            return
        self.placed = self.state.placed()
        self._placed_key = self.state.placed_key()
        report = self.placed.report
        self.counts.value = (
            html.note(summary.totals_line(report), "devcopy-totals")
            + html.note(f"bytes by role {report.roles_line()}", "devcopy-roles")
            + (html.note(summary.cost_model_line(self.state.cost_model)) if self.state.cost_model is not None else "")
        )
        self.savings.value = html.note(summary.dedupe_line(report), "devcopy-savings")
        placed = self.placed
        self.graph.show(*kept(self._graphs, self._placed_key, lambda: graph_elements(placed), KEPT_GRAPHS))
        if self._shown is None and len(self.graph.nodes) > MEMORY_OPEN_UP_TO:
            # a big program opens with its memory plan, bytes-by-placement table and table of nodes folded
            self.memory_section.selected_index = self.placements_section.selected_index = None
            self.table_section.selected_index = None
        self._show_placements()
        self._show_memory(self.placed, None)
        self._show_table()
        self._show_executorch()
        self._explain()
        self._shown = {name: getattr(self.state, name) for name in SETTINGS}
        self.diff.value = self._diff_html()

    def _show_placements(self) -> None:
        """The bytes-by-placement table of the placement shown, when its section is open (reading it places the
        program three more times: 1.5 s of a 6 s delegate-set change at 24 GPT-2 layers); '' while folded."""
        if self.placements_section.selected_index is None or self.placed is None or self.pte is not None:
            self.placements.value = ""
            return
        with self._busy():
            rows = summary.placement_rows(self.placed.report)
        self.placements.value = html.table(rows, summary.PLACEMENT_COLUMNS)

    def _show_pte(self, p: PteProgram) -> None:
        """The program's totals, its instructions as a graph and ExecuTorch's memory plan beside it."""
        self.counts.value = html.note(summary.pte_totals_line(p), "devcopy-totals")
        nodes, edges, writers = pte_graph_elements(p)
        self.graph.show(nodes, edges)
        self._show_memory(p, writers)
        self._show_table()

    def _show_table(self) -> None:
        """The table of every placed node (a .pte: every instruction) when its section is open; '' while folded: on
        a 96-layer GPT-2 its 8,000 rows took a second to build at each edit, and the page as long to lay them out."""
        if self.table_section.selected_index is None:
            self.table.value = ""
        elif (p := self.pte) is not None:
            rows = [
                {"#": str(i), "instruction": p.instruction_name(i), "values": str(p.uses(i))}
                for i in range(len(p.instructions))
            ]
            self.table.value = html.table(rows, ("#", "instruction", "values"))
        elif self.placed is not None:
            self.table.value = html.table(summary.table_rows(self.placed.report), summary.TABLE_COLUMNS)

    def _memory_folded(self, change: Any) -> None:
        """Folding the memory plan stops its drawing; opening it computes and draws what it missed meanwhile."""
        folded = change["new"] is None
        if not folded and self._memory_source is not None:
            source, nodes = self._memory_source
            self._memory_source = None
            with self._busy():  # the picture of a big program takes a while
                self._draw_memory(source, nodes)
        self.memory.pause(folded)

    def _show_memory(self, source: Any, nodes: Any) -> None:
        """Draw the memory plan of `source`, or, while it is folded, keep `source` to draw once it is opened (its
        picture emits the program: 0.7 s at 24 GPT-2 layers)."""
        if self.memory.paused:
            self._memory_source = (source, nodes)
            return
        self._memory_source = None
        self._draw_memory(source, nodes)

    def _draw_memory(self, source: Any, nodes: Any) -> None:
        """Draw the memory plan of `source`; one that cannot be drawn says why in its place, the graph stays."""
        try:
            self.memory.show(memory_picture(source, nodes))
        except Exception as exc:  # e.g. control flow emit refuses: the graph is still worth showing
            self.memory.show_error(f"memory plan not drawn: {type(exc).__name__}: {exc}")

    def _other_placement(self) -> Any:
        """The placement of the same model and settings by the "compare with" strategy (sharing the caches)."""
        return replace(self.state, strategy=self.compare_with.value).placed()

    def _diff_html(self) -> str:
        if self.compare_with.value not in _strategies(self.state):
            return ""
        html_text: str = diff_html(placement_diff(self.placed, self._other_placement()))
        return f'<div class="devcopy-diff">{DIFF_STYLE}{html_text}</div>'

    @shown_errors
    def export_report(self, path: str | None = None) -> str:
        """Write the shown placement's report (HTML or JSON by the suffix; with the diff when comparing) and show
        where it went; `path` defaults to the report file box, else `devcopy_report_MODEL_STRATEGY.html`."""
        self.export_note.value = ""  # a failed export shows its error alone, not an earlier export's note
        with self._busy():  # the diff places another strategy; a big report takes a while to write
            return self._write_report(path)

    def _write_report(self, path: str | None) -> str:
        s = self.state
        if self.pte is not None:
            raise ValueError(
                "export report describes a placement devcopy makes; this explorer shows an ExecuTorch program. "
                "To fix: `devcopy place PROGRAM.pte --json` gives the program's operators, instructions, buffers and "
                "copies, and export_trace() profiles it"
            )
        path = path or self.report_path.value.strip() or f"devcopy_report_{s.model}_{s.strategy}.html"
        report = self.placed.report.to_dict()
        if self.compare_with.value in _strategies(s):
            report["diff"] = placement_diff(self.placed, self._other_placement())
        written: str = export_report(report, path, s.model, s.cost_model, getattr(s.cost_model, "backend", None))
        self.export_note.value = html.note(f"report written to {written}", "devcopy-export")
        return written

    @shown_errors
    def export_trace(self, path: str | None = None, calls: int = 10) -> str:
        """Load the shown placement, or the .pte (portable mode, the default backend), profile `calls` calls and write
        them as a Chrome/Perfetto trace; `path` defaults to `devcopy_trace_MODEL_STRATEGY.json` (a .pte's:
        `devcopy_trace_pte_PLAN.json`)."""
        self.export_note.value = ""  # a failed export shows its error alone, not an earlier export's note
        with self._busy():  # loading and profiling `calls` calls
            return self._write_trace(path, calls)

    def _write_trace(self, path: str | None, calls: int) -> str:
        s = self.state
        if self.pte is not None:  # ExecuTorch's program with its own memory plan, on seeded inputs (docs/pte.md)
            path = path or f"devcopy_trace_pte_{self.pte.plan}.json"
            program, inputs = pte_program(self.pte), tuple(pte_inputs(self.pte))
        else:
            path = path or f"devcopy_trace_{s.model}_{s.strategy}.json"
            program, inputs = self.placed, s.module_and_inputs()[1]
        with make_allocator() as allocator, scoped_allocators(allocator), load_method(program) as method:
            trace = profile_trace(method, *inputs, repeat=calls, cost_model=s.cost_model)
            capture = method.capture["line"]
            self.last_branches = method.control_flow  # what the last profiled call did at each cond / loop
        written: str = write_trace(trace, path)
        ran = "".join(
            f"; {flow['node']} ran {flow['branch']}"
            + (f" x{flow['iterations']}" if flow["construct"] != "torch.cond" else "")
            for flow in self.last_branches
        )
        self.export_note.value = html.note(
            f"{capture}{ran}; trace of {calls} profiled calls written to {written}", "devcopy-export"
        )
        return written

    def _show_executorch(self) -> None:
        """ExecuTorch's counts for these settings, on a worker thread (its own export and lowering take seconds,
        the kernel stays free): the line says it is running until they arrive; a newer refresh's result wins."""
        self._comparison += 1
        if not self.compare.value:
            self.executorch.value = ""
            return
        self.executorch.value = html.note("comparing with ExecuTorch ... (its own export and lowering)", "devcopy-busy")
        self.comparing = threading.Thread(
            target=self._compare, args=(self._comparison, replace(self.state)), name="devcopy-compare", daemon=True
        )
        self.comparing.start()

    def _compare(self, number: int, state: PlacementState) -> None:
        try:
            text = html.note(summary.executorch_line(state.executorch_counts()), "devcopy-executorch")
        except Exception as exc:  # the reference is optional: say why it is missing, keep the rest of the view
            text = html.error_box(exc)
        if number == self._comparison:
            self.executorch.value = text
