"""RegistrationPanel: mode and linked libs edit the state; Load runs, or shows Missing operator with its fix."""

import pytest
from devcopy_widgets import RegistrationPanel, RegistrationState


def test_portable_mode_links_the_portable_lib_and_runs():
    panel = RegistrationPanel()
    assert panel.state.linked() == ("portable", "quantized")
    panel.run()
    assert panel.error is None and panel.result.ok
    assert panel.result.copies_executed == {"h2d": 2, "d2h": 1}
    assert "matches eager: True" in panel.outcome.value


def test_aten_mode_links_native_the_device_copy_lib_and_the_quantized_lib_by_default():
    panel = RegistrationPanel()
    panel.mode.value = "aten"
    aten_libs = ("native", "device_copy_ops_aten_lib", "quantized_ops_aten_lib")
    assert panel.state.linked() == aten_libs
    assert [box.description for box in panel.libs_row.children] == list(aten_libs)
    assert all(box.value for box in panel.libs_row.children)
    panel.run()
    assert panel.result.ok


def test_unlinking_the_device_copy_lib_shows_missing_operator_and_the_fix():
    panel = RegistrationPanel()
    panel.mode.value = "aten"
    panel.lib_boxes["device_copy_ops_aten_lib"].value = False
    assert panel.state.linked() == ("native", "quantized_ops_aten_lib")
    assert "MISSING" in panel.matrix.value
    panel.run()
    assert panel.result is None and panel.error is None
    assert "Missing operator: [0] et_copy::_h2d_copy.out" in panel.outcome.value
    assert "To fix: link device_copy_ops_aten_lib" in panel.outcome.value


def test_matrix_has_a_row_per_program_operator_and_a_column_per_lib():
    state = RegistrationState(mode="aten", libs=("native",))
    rows = {row["op"]: row for row in state.matrix()}
    assert set(rows) == set(state.operators())
    h2d = rows["et_copy::_h2d_copy.out"]
    assert (h2d["portable"], h2d["native"], h2d["device_copy_ops_aten_lib"]) == ("n/a", "✗", "✓")
    assert h2d["resolved by"] == "MISSING: tick device_copy_ops_aten_lib"


def test_changing_the_model_changes_the_operator_table():
    panel = RegistrationPanel()
    panel.model.value = "cpu_between"
    assert "aten::cumsum.out" in panel.matrix.value


def test_your_own_model_is_offered_and_runs():
    import torch
    from devcopy_widgets import PlacementState

    placement = PlacementState()
    placement.add_model("mine", torch.nn.ReLU(), (torch.randn(5),))
    panel = RegistrationPanel(placement=placement)
    assert panel.model.value == "mine" and "add" in panel.model.options
    panel.run()
    assert panel.result.ok and panel.result.copies_executed == {"h2d": 1, "d2h": 1}


def test_portable_mode_does_not_tick_a_lib_it_cannot_link():
    rows = {row["op"]: row for row in RegistrationState(mode="portable").matrix()}
    h2d = rows["et_copy::_h2d_copy.out"]
    assert (h2d["portable"], h2d["native"], h2d["device_copy_ops_aten_lib"]) == ("✓", "n/a", "n/a")
    assert h2d["resolved by"] == "portable"


def test_switching_modes_never_links_again_a_lib_that_was_unticked():
    panel = RegistrationPanel()
    panel.mode.value = "aten"
    panel.lib_boxes["device_copy_ops_aten_lib"].value = False
    panel.mode.value = "portable"
    assert panel.state.linked() == ("portable", "quantized")
    panel.mode.value = "aten"
    assert panel.state.linked() == ("native", "quantized_ops_aten_lib")
    assert not panel.lib_boxes["device_copy_ops_aten_lib"].value
    assert "MISSING" in panel.matrix.value


def test_an_unknown_mode_names_the_valid_ones():
    with pytest.raises(ValueError, match="Unknown mode 'cuda'. Valid: portable, aten"):
        RegistrationState().switch_mode("cuda")


def test_each_load_closes_the_allocator_it_made(monkeypatch):
    """Load after Load must not pile up allocators (and, with CuPy, their copy engines and streams)."""
    from devcopy_widgets import registration_state

    made = []

    def recording(backend):
        made.append(make_allocator(backend))
        return made[-1]

    make_allocator = registration_state.make_allocator
    monkeypatch.setattr(registration_state, "make_allocator", recording)
    panel = RegistrationPanel()
    panel.run()
    panel.run()
    assert panel.result.ok and len(made) == 2 and all(allocator.closed for allocator in made)


def test_aten_mode_with_no_lib_names_only_aten_libs_to_tick():
    panel = RegistrationPanel()
    panel.model.value = "cpu_between"
    panel.mode.value = "aten"
    for name in ("native", "device_copy_ops_aten_lib", "quantized_ops_aten_lib"):
        panel.lib_boxes[name].value = False
    assert panel.state.linked() == ()
    assert panel.state.advice() == (
        "tick native: it registers aten::cumsum.out; tick device_copy_ops_aten_lib: it registers "
        "et_copy::_h2d_copy.out, et_copy::_d2h_copy.out"
    )
    panel.run()
    assert panel.result is None and "Missing operator" in panel.outcome.value
    assert "portable" not in panel.outcome.value and "portable" not in panel.advice.value
    assert "To fix: link native; it registers aten::cumsum.out" in panel.outcome.value
    assert "In this panel: tick native" in panel.outcome.value


def test_the_lib_that_holds_a_missing_op_is_named_when_it_is_unticked():
    panel = RegistrationPanel()
    panel.model.value = "cpu_between"
    panel.mode.value = "aten"
    panel.lib_boxes["native"].value = False
    rows = {row["op"]: row for row in panel.state.matrix()}
    assert rows["aten::cumsum.out"]["resolved by"] == "MISSING: tick native"
    assert "To load: tick native: it registers aten::cumsum.out" in panel.advice.value
    panel.run()
    assert "link a lib that registers" not in panel.outcome.value and "tick native" in panel.outcome.value
    panel.lib_boxes["native"].value = True
    assert panel.state.advice() == "" and panel.advice.value == ""


def test_a_model_that_cannot_be_placed_leaves_the_dropdown_on_the_model_shown():
    import torch
    from devcopy_widgets import PlacementState

    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x + 1 if x.sum() > 0 else x - 1  # data-dependent control flow: torch.export refuses

    placement = PlacementState()
    placement.add_model("branchy", Branchy(), (torch.randn(3),))
    placement.model = "add"
    panel = RegistrationPanel(placement=placement)
    matrix = panel.matrix.value
    panel.model.value = "branchy"
    assert panel.error is not None and "devcopy-error" in panel.error_html.value
    assert panel.model.value == panel.state.placement.model == "add" and panel.matrix.value == matrix


def test_a_quantized_program_resolves_in_the_quantized_lib_and_unticking_it_names_it():
    import torch
    from devcopy_widgets import PlacementState

    q = torch.ops.quantized_decomposed

    class RoundTrip(torch.nn.Module):
        def forward(self, x):
            quantized = q.quantize_per_tensor.default(x, 0.05, 2, -128, 127, torch.int8)
            return torch.sin(q.dequantize_per_tensor.default(quantized, 0.05, 2, -128, 127, torch.int8))

    placement = PlacementState()
    placement.add_model("round_trip", RoundTrip(), (torch.randn(3, 5),))
    panel = RegistrationPanel(placement=placement)
    rows = {row["op"]: row for row in panel.state.matrix()}
    quantize = rows["quantized_decomposed::quantize_per_tensor.out"]
    assert (quantize["portable"], quantize["quantized"], quantize["resolved by"]) == ("✗", "✓", "quantized")
    assert quantize["quantized_ops_aten_lib"] == "n/a"
    panel.run()
    assert panel.result.ok
    panel.lib_boxes["quantized"].value = False
    assert "MISSING: tick quantized" in panel.matrix.value
    panel.run()
    assert "Missing operator: [0] quantized_decomposed::quantize_per_tensor.out" in panel.outcome.value
    assert "To fix: link quantized" in panel.outcome.value
