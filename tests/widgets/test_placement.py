"""PlacementExplorer: controls edit the state and the drawing follows; errors stay inside the widget."""
import pytest

from devcopy_widgets import PlacementExplorer, PlacementState


@pytest.fixture(scope="module")
def explorer():
    return PlacementExplorer(model="shared_input", partition="per_node")


def test_shared_input_per_node_has_four_h2d_with_executorch_strategy(explorer):
    explorer.strategy.value = "executorch"
    assert explorer.error is None
    assert explorer.placed.report.copies == {"h2d": 4, "d2h": 1}
    assert "H2D 4 (256 B)" in explorer.counts.value


def test_switching_to_dedupe_halves_the_h2d_and_says_what_it_saves(explorer):
    explorer.strategy.value = "dedupe"
    assert explorer.state.strategy == "dedupe"
    assert explorer.placed.report.copies == {"h2d": 2, "d2h": 1}
    assert "saves 2 H2D (128 B)" in explorer.savings.value
    explorer.strategy.value = "executorch"


def test_graph_marks_every_copy_node(explorer):
    kinds = explorer.graph.counts["kinds"]
    assert (kinds["h2d"], kinds["d2h"]) == (4, 1)


def test_decision_table_lists_every_node_with_its_reason(explorer):
    for row in explorer.placed.report.rows:
        assert row.name in explorer.table.value
    assert "a to cuda:0 for" in explorer.table.value


def test_unticking_an_op_removes_it_from_the_delegated_ops(explorer):
    explorer.model.value = "cpu_between"
    sin = next(box for box in explorer.op_boxes if box.description == "sin.default")
    sin.value = False
    assert "sin.default" not in explorer.state.ticked_ops()
    assert all("sin" not in d.ops for d in explorer.placed.delegates.values())
    explorer.model.value = "shared_input"


def test_skip_h2d_for_inputs_removes_input_copies():
    view = PlacementExplorer(model="add")
    view.skip_h2d.value = True
    assert view.state.skip_h2d_for_method_inputs
    assert view.placed.report.copies["h2d"] == 0


def test_bad_target_is_shown_not_raised():
    view = PlacementExplorer(model="add")
    view.target.value = "tpu:0"
    assert view.error is not None
    assert "Valid types" in view.error_html.value and "devcopy-error" in view.error_html.value
    assert view.counts.value == ""
    view.target.value = "cuda:1"
    assert view.error is None and view.error_html.value == ""
    assert {r.device for r in view.placed.report.rows if r.kind == "h2d"} == {"cuda:1"}


def test_your_own_module_can_be_explored():
    import torch

    class Scale(torch.nn.Module):
        def forward(self, x):
            return torch.sin(x) * 2

    view = PlacementExplorer()
    view.add_model("mine", Scale(), (torch.randn(3),))
    assert view.state.model == "mine" and view.model.value == "mine"
    assert "sin.default" in [box.description for box in view.op_boxes]
    assert view.placed.report.delegates == 1
    opened = PlacementExplorer.for_model(Scale(), (torch.randn(3),), strategy="dedupe")
    assert (opened.model.value, opened.strategy.value, opened.error) == ("my_model", "dedupe", None)
    assert "add" in opened.model.options


def test_state_has_no_widgets():
    state = PlacementState(model="add")
    assert state.placed().report.copies == {"h2d": 2, "d2h": 1}


def test_copies_are_priced_by_the_cost_model(explorer):
    copies = [row for row in explorer.placed.report.rows if row.kind in ("h2d", "d2h")]
    assert copies and all(row.predicted_s > 0 for row in copies)
    assert "predicted copy time" in explorer.counts.value and "cost model measured on" in explorer.counts.value


@pytest.mark.reference
def test_executorch_counts_agree_when_compared(explorer):
    explorer.compare.value = True
    try:
        assert "ExecuTorch 1.5.1: delegates 4 · H2D 4 · D2H 1" in explorer.executorch.value
    finally:
        explorer.compare.value = False
