"""The registration panel opens ExecuTorch's .pte: `RegistrationState.from_pte(path)` or the panel's `.pte` box.
Its matrix is the program's operator table, Load runs the program (equal to the program run eagerly) or shows the
seed's Missing operator with the fix; a bad path is shown in the panel, not raised."""

import pytest

pytest.importorskip("ipywidgets", reason="needs the lab extra (ipywidgets)")
from devcopy_widgets import RegistrationPanel, RegistrationState  # noqa: E402

from devcopy_lib import PteLoadError  # noqa: E402

pytestmark = pytest.mark.reference


@pytest.fixture
def simulated(monkeypatch):
    """The panel loads the program on the simulated backend, whatever the machine has."""
    monkeypatch.setenv("DEVCOPY_BACKEND", "simulated")


def test_from_pte_gives_the_programs_operators_and_runs_it(simulated, sin_path, sin_program):
    state = RegistrationState.from_pte(sin_path)
    assert state.operators() == sin_program.operators
    result = state.load_and_run()
    assert result.ok and result.max_abs_err == 0.0 and result.copies_executed == {"h2d": 2, "d2h": 1}


def test_from_pte_refuses_a_bad_file_at_once(tmp_path):
    (tmp_path / "bad.pte").write_bytes(b"\x00" * 64)
    with pytest.raises(PteLoadError, match="not an ExecuTorch 1.5.1 program|cannot parse"):
        RegistrationState.from_pte(str(tmp_path / "bad.pte"))


def test_the_pte_box_switches_the_panel_to_the_program(simulated, sin_path):
    panel = RegistrationPanel()
    assert "aten::sin.out" not in panel.matrix.value
    panel.pte_path.value = sin_path
    assert panel.state.pte == sin_path and panel.model.disabled
    assert "aten::sin.out" in panel.matrix.value and panel.error is None
    panel.mode.value = "aten"
    panel.lib_boxes["device_copy_ops_aten_lib"].value = False
    panel.run()
    assert panel.result is None and "Missing operator: [0] et_copy::_h2d_copy.out" in panel.outcome.value
    panel.pte_path.value = ""
    assert panel.state.pte is None and not panel.model.disabled


def test_a_missing_path_in_the_box_is_shown_not_raised(tmp_path):
    panel = RegistrationPanel()
    panel.pte_path.value = str(tmp_path / "none.pte")
    assert isinstance(panel.error, PteLoadError) and "no such .pte file" in panel.error_html.value
