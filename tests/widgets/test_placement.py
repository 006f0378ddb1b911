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


def test_the_counts_split_the_bytes_of_a_call_by_role(explorer):
    """Inputs only, no weights or state: every byte is an activation (tests/test_decode_models.py has a KV cache)."""
    assert "bytes by role per call: cache 0 B H2D, 0 B D2H · weights 0 B H2D, 0 B D2H · activations 256 B H2D" in (
        explorer.counts.value
    )


def test_switching_to_dedupe_halves_the_h2d_and_says_what_it_saves(explorer):
    explorer.strategy.value = "dedupe"
    assert explorer.state.strategy == "dedupe"
    assert explorer.placed.report.copies == {"h2d": 2, "d2h": 1}
    assert "dedupe saves 2 H2D, 128 B against executorch" in explorer.savings.value
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


def test_bad_target_is_shown_beside_the_last_good_view():
    view = PlacementExplorer(model="add")
    good = view.counts.value
    view.target.value = "tpu:0"
    assert view.error is not None
    assert "Valid types" in view.error_html.value and "devcopy-error" in view.error_html.value
    assert view.counts.value == good and "H2D 2" in good
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
    counts = explorer.counts.value
    assert "predicted copy time" in counts and "where the cost model was measured" in counts


@pytest.mark.reference
def test_executorch_counts_agree_when_compared(explorer):
    explorer.compare.value = True
    try:
        explorer.comparing.join()  # a worker thread: the kernel stays free meanwhile
        assert "ExecuTorch 1.5.1: delegates 4 · H2D 4 · D2H 1" in explorer.executorch.value
    finally:
        explorer.compare.value = False


@pytest.fixture
def export_calls(monkeypatch):
    """Counts torch.export.export calls (the real one still runs)."""
    import torch

    calls = []
    real = torch.export.export

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.export, "export", counted)
    return calls


def test_op_toggles_and_strategy_changes_never_export_again(export_calls):
    view = PlacementExplorer(model="cpu_between", partition="per_node")
    assert len(export_calls) == 1
    for box in view.op_boxes:
        box.value = not box.value
        box.value = not box.value
    for strategy in ("dedupe", "executorch"):
        view.strategy.value = strategy
    view.partition.value = "capability"
    view.skip_d2h.value = True
    view.target.value = "cuda:1"
    assert view.error is None and view.state.target_device == "cuda:1"
    assert len(export_calls) == 1


def test_a_toggle_back_reuses_the_cached_lowering(export_calls):
    view = PlacementExplorer(model="cpu_between")
    first = view.state.lowered()
    sin = next(box for box in view.op_boxes if box.description == "sin.default")
    sin.value = False
    assert view.state.lowered() is not first
    sin.value = True
    assert view.state.lowered() is first and len(export_calls) == 1


def test_a_new_model_is_exported_once_and_switching_back_does_not_export(export_calls):
    view = PlacementExplorer(model="add")
    view.model.value = "mlp"
    view.model.value = "add"
    assert [type(m).__name__ for m in export_calls] == ["_Add", "_Mlp"]


def test_peer_is_offered_only_with_two_target_devices():
    view = PlacementExplorer(model="back_to_back", partition="per_node")
    assert "peer" not in view.strategy.options
    view.target.value = "delegate_0=cuda:0, delegate_1=cuda:1"
    assert view.error is None and view.state.target_device == {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    assert "peer" in view.strategy.options
    view.strategy.value = "peer"
    assert view.placed.report.copies.get("d2d", 0) == 1
    view.target.value = "cuda:0"
    assert "peer" not in view.strategy.options and view.state.strategy == "executorch"
    assert PlacementExplorer(model="add", strategy="peer").state.strategy == "executorch"
    two = PlacementExplorer(
        model="back_to_back",
        partition="per_node",
        strategy="peer",
        target_device={"delegate_0": "cuda:0", "delegate_1": "cuda:1"},
    )
    assert (two.strategy.value, two.error) == ("peer", None)


def test_the_target_box_applies_on_enter_not_per_keystroke():
    assert PlacementExplorer(model="add").target.continuous_update is False


def test_a_malformed_target_mapping_names_the_entry_and_the_fix():
    view = PlacementExplorer(model="add")
    view.target.value = "delegate_0=, cuda:1"
    assert "Bad target entry 'delegate_0='" in str(view.error) and "key=device" in str(view.error)
    assert "devcopy-error" in view.error_html.value
    assert view.state.target_device == "cuda:0"


def test_sizes_have_units_and_counts_are_plural_only_above_one():
    import re

    from devcopy_widgets import placement_summary

    view = PlacementExplorer(model="transformer_block", partition="per_node")
    rows = placement_summary.table_rows(view.placed.report)
    assert all(re.fullmatch(r"\d+(\.\d)? (B|KiB|MiB|GiB)", row["bytes"]) for row in rows)
    assert any(row["bytes"].endswith("KiB") for row in rows)
    reasons = [row["reason"] for row in rows]
    assert any(": 1 op (" in r for r in reasons) and not any(" 1 ops" in r for r in reasons)
    assert not any("built-in function" in r for r in reasons)
    assert re.search(r"H2D \d+ \([\d.]+ (B|KiB)\)", view.counts.value)


def test_hoist_constants_copies_a_constant_derived_value_once_at_load(export_calls):
    import torch

    class Biased(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(8))

        def forward(self, x):
            return x + torch.cumsum(self.w, 0)  # cumsum stays on CPU: its result is constant-derived

    view = PlacementExplorer.for_model(Biased(), (torch.randn(8),))
    assert "would copy it once at load" in view.table.value
    view.hoist.value = True
    assert view.error is None and view.state.hoist_constants
    assert "hoisted, computed and copied once at load" in view.table.value
    assert view.placed.report.constant_derived["hoisted"] == 1 and len(export_calls) == 1


def test_the_python_surface_edits_the_state_then_refresh_redraws():
    view = PlacementExplorer(model="shared_input", partition="per_node")
    view.state.strategy, view.state.delegate_ops = "dedupe", ("add.Tensor",)
    view.refresh()
    assert view.placed.strategy == "dedupe" and view.placed.report.copies == {"h2d": 2, "d2h": 1}
    assert "strategy dedupe" in view.counts.value


def _controls_agree_with_the_view(panel):
    """Every control shows a setting of the placement on screen (the strategy, the target, the model)."""
    from devcopy_widgets.placement import _target_text

    s = panel.state
    assert panel.strategy.value == s.strategy == panel.placed.strategy
    assert f"strategy {s.strategy} " in panel.counts.value
    assert panel.target.value == _target_text(s.target_device) and panel.model.value == s.model


@pytest.mark.parametrize("bad", ["bogus", "delegate_0=", "delegate_0=cuda:0, delegate_1=gpu:1"])
def test_after_a_bad_target_controls_and_view_agree(bad):
    panel = PlacementExplorer(model="mlp", partition="per_node")
    panel.target.value = "delegate_0=cuda:0, delegate_1=cuda:1"
    panel.strategy.value = "peer"
    assert panel.error is None and panel.placed.strategy == "peer"
    panel.target.value = bad
    assert panel.error is not None and "devcopy-error" in panel.error_html.value  # the refusal stays shown
    _controls_agree_with_the_view(panel)
    assert panel.state.target_device == {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    panel.target.value = "cuda:1"  # the next good change clears the error and places again
    assert panel.error is None and panel.state.target_device == "cuda:1"
    _controls_agree_with_the_view(panel)


def test_after_a_model_that_fails_to_export_the_last_model_stays_selected():
    import torch

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x + 1 if x.sum() > 0 else x - 1  # data-dependent control flow: torch.export refuses

    panel = PlacementExplorer(model="add")
    panel.add_model("branchy", Branchy(), (torch.randn(3),))
    assert panel.error is not None and "branchy" in panel.model.options
    _controls_agree_with_the_view(panel)
    assert panel.model.value == "add" and [box.description for box in panel.op_boxes] == ["add.Tensor"]


def test_resident_buffers_keep_a_cache_on_the_device_and_the_counts_compare_three_placements(export_calls):
    import torch

    class Ring(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(8, 4))

        def forward(self, row, position):
            self.cache.index_copy_(0, position, row)
            return torch.mm(self.cache, self.cache.t())

    view = PlacementExplorer.for_model(Ring(), (torch.randn(1, 4), torch.tensor([3])))
    assert "resident_buffers=True would keep it on cuda:0" in view.table.value
    assert "<td>plain</td><td>128 B / 0 B</td>" in view.placements.value  # the cache crosses every call
    assert "<td>resident</td><td>0 B / 0 B</td>" in view.placements.value
    view.resident.value = True
    assert view.error is None and view.state.resident_buffers
    assert "resident on cuda:0: copied there once at load" in view.table.value
    assert view.placed.report.bytes_by_role()["cache"] == {"h2d": 0, "d2h": 0} and len(export_calls) == 1
