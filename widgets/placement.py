"""PlacementExplorer: pick a model, delegated ops, target, strategy and skip switches; see the placed graph."""

from __future__ import annotations

import threading
from dataclasses import replace

import ipywidgets as w

from devcopy_lib.names import PARTITIONS, STRATEGIES, Strategy

from . import html
from . import placement_summary as summary
from .graph_view import GraphView
from .graph_view_data import graph_elements
from .guard import shown_errors
from .placement_state import PlacementState, parse_target

TARGETS = ("cuda:0", "cuda:1", "cpu")


def _strategies(state: PlacementState) -> tuple[str, ...]:
    """The strategies worth offering: `peer` only when the target names two devices (else it equals executorch)."""
    return STRATEGIES if state.peer_possible() else tuple(s for s in STRATEGIES if s != Strategy.PEER)


def _target_text(target) -> str:
    """The target box's text for a state's target: the device, or `key=device` pairs."""
    return ", ".join(f"{k}={v}" for k, v in target.items()) if isinstance(target, dict) else str(target)


class PlacementExplorer(w.VBox):
    """The view over a `PlacementState`: every control edits the state, then the view is redone (the graph keeps
    its layout when only devices or kinds changed)."""

    def __init__(self, state: PlacementState | None = None, compare_executorch: bool = False, **settings):
        self.state = state or PlacementState(**settings)
        self.placed = None
        self.error = None
        self.comparing: threading.Thread | None = None  # the ExecuTorch comparison running in the background
        self._comparison = 0  # which refresh the comparison on screen belongs to
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
        self.compare = w.Checkbox(value=compare_executorch, description="compare with ExecuTorch")
        self.op_boxes: list[w.Checkbox] = []
        wrap = w.Layout(**html.WRAP)
        self.ops = w.HBox(layout=wrap)
        self.counts, self.graph, self.table = w.HTML(), GraphView(), w.HTML()
        self.savings, self.executorch, self.error_html = w.HTML(), w.HTML(), w.HTML()
        for widget, name in (
            (self.strategy, "devcopy-strategy"),
            (self.counts, "devcopy-counts"),
            (self.model, "devcopy-model"),
            (self.partition, "devcopy-partition"),
        ):
            widget.add_class(name)
        super().__init__(
            [
                w.HBox([self.model, self.partition, self.target, self.strategy], layout=wrap),
                w.HBox([self.skip_h2d, self.skip_d2h, self.hoist, self.compare], layout=wrap),
                w.HTML("<b>delegated ops</b> (the model's ops after decomposition)"),
                self.ops,
                self.error_html,
                self.counts,
                self.savings,
                self.executorch,
                self.graph,
                self.table,
            ]
        )
        self.add_class("devcopy-placement")
        self._wire(
            self.model,
            self.partition,
            self.target,
            self.strategy,
            self.skip_h2d,
            self.skip_d2h,
            self.hoist,
            self.compare,
        )
        self._rebuild_ops()
        self.refresh()

    @classmethod
    def for_model(cls, module, example_inputs, name: str = "my_model", **settings) -> PlacementExplorer:
        """An explorer opened on your own module (the sample models stay selectable)."""
        state = PlacementState(**settings)
        state.add_model(name, module, example_inputs)
        return cls(state)

    def _wire(self, *widgets) -> None:
        """The one place controls are connected: any value change goes through `_changed`."""
        for widget in widgets:
            widget.observe(self._changed, names="value")

    @shown_errors
    def _rebuild_ops(self) -> None:
        ticked = set(self.state.ticked_ops())
        self.op_boxes = [
            w.Checkbox(value=op in ticked, description=op, indent=False, layout=w.Layout(width="170px"))
            for op in self.state.model_ops()
        ]
        self.ops.children = self.op_boxes
        self._wire(*self.op_boxes)

    def _changed(self, change) -> None:
        with self.graph.working():  # the graph view says busy when this takes over 0.3 s
            if self._read_controls(change["owner"]):
                self.refresh()

    @shown_errors
    def _read_controls(self, owner) -> bool:
        """Copy the controls into the state (a bad target text is shown, the state keeps its last good one)."""
        s = self.state
        s.target_device = parse_target(self.target.value)
        s.partition, s.strategy = self.partition.value, self.strategy.value
        s.skip_h2d_for_method_inputs, s.skip_d2h_for_method_outputs = self.skip_h2d.value, self.skip_d2h.value
        s.hoist_constants = self.hoist.value
        offered = _strategies(s)  # peer only with two target devices
        if self.strategy.options != offered:
            self.strategy.options = offered  # keeps the value when still offered (no event then)
            s.strategy = self.strategy.value
        if owner is self.model:
            s.model, s.delegate_ops = self.model.value, None
            self._rebuild_ops()
        elif owner in self.op_boxes:
            s.delegate_ops = tuple(box.description for box in self.op_boxes if box.value)
        return True

    def add_model(self, name: str, module, example_inputs) -> None:
        """Offer your own module under `name` and show it."""
        self.state.add_model(name, module, example_inputs)
        self.model.options = self.state.model_names
        self.model.value = name  # fires _changed, which rebuilds the op boxes and redraws

    @shown_errors
    def refresh(self) -> None:
        """Recompute the placement from the state and redraw everything; an error is shown above the last good
        view, which stays."""
        self.placed = self.state.placed()
        report = self.placed.report
        self.counts.value = html.note(summary.totals_line(report), "devcopy-totals") + (
            html.note(summary.cost_model_line(self.state.cost_model)) if self.state.cost_model is not None else ""
        )
        self.savings.value = html.note(summary.dedupe_line(report), "devcopy-savings")
        self.graph.show(*graph_elements(self.placed))
        self.table.value = html.table(summary.table_rows(report), summary.TABLE_COLUMNS)
        self._show_executorch()

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
