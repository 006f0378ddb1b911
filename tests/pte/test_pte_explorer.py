"""The placement explorer opens ExecuTorch's .pte (`PlacementExplorer.for_pte`): the program's instructions as the
graph (copies, the delegate, CPU kernels; values as edges), ExecuTorch's memory plan beside it, the controls that
re-place a model off with the reason shown, and export trace profiling the program itself."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("anywidget", reason="needs the lab extra (anywidget)")
from devcopy_widgets import PlacementExplorer  # noqa: E402

from devcopy_lib import PteLoadError  # noqa: E402

pytestmark = pytest.mark.reference


@pytest.fixture
def explorer(sin_path, monkeypatch):
    monkeypatch.setenv("DEVCOPY_BACKEND", "simulated")
    return PlacementExplorer.for_pte(sin_path)


def test_the_graph_is_the_programs_instructions_and_values(explorer):
    assert explorer.error is None
    nodes = {n["id"]: n for n in explorer.graph.nodes}
    assert [(n["id"], n["kind"], n["device"]) for n in explorer.graph.nodes] == [
        ("input_0", "input", "cpu"),
        ("input_1", "input", "cpu"),
        ("i0_h2d_copy", "h2d", "cuda:0"),
        ("i1_h2d_copy", "h2d", "cuda:0"),
        ("i2_delegate_0", "delegate", "cuda:0"),
        ("i3_d2h_copy", "d2h", "cpu"),
        ("i4_sin", "cpu_op", "cpu"),
        ("i5_mul", "cpu_op", "cpu"),
        ("output_0", "output", "cpu"),
    ]
    assert nodes["i5_mul"]["inputs"] == ("i4_sin", "input_1") and nodes["input_1"]["users"] == ("i1_h2d_copy", "i5_mul")
    assert ("backend", "DevcopyExportBackend") in nodes["i2_delegate_0"]["rows"]
    assert nodes["i0_h2d_copy"]["bytes_text"] == "24 B"
    totals = explorer.counts.value
    assert "delegates 1 on cuda:0 · H2D 2 (48 B) · D2H 1 (24 B) · instructions 6" in totals
    assert explorer.graph.counts["kinds"] == {"input": 2, "h2d": 2, "delegate": 1, "d2h": 1, "cpu_op": 2, "output": 1}


def test_the_memory_plan_is_executorchs_and_selects_the_writer(explorer):
    assert explorer.memory.summary == "cpu: buffer 1, 5 tensors in 96 B · cuda:0: buffer 2, 3 tensors in 96 B"
    explorer.memory.selected = "4"  # the delegate's output, in the cuda:0 buffer
    assert explorer.graph.selected == "i2_delegate_0"
    explorer.graph.selected = "i4_sin"
    assert 'data-value="6" data-node="i4_sin"' in explorer.memory.svg


def test_replacing_controls_are_off_with_the_reason_and_refuse(explorer, tmp_path):
    for control in (explorer.model, explorer.strategy, explorer.target, explorer.skip_h2d, explorer.compare):
        assert control.disabled
    assert "ExecuTorch placed it when it was written" in explorer.pte_note.value
    nodes = list(explorer.graph.nodes)
    explorer.strategy.value = "dedupe"  # set by code anyway: nothing is re-placed
    assert explorer.graph.nodes == nodes and explorer.error is None
    assert explorer.export_report(str(tmp_path / "r.html")) is None
    assert "export report describes a placement devcopy makes" in explorer.error_html.value
    assert not (tmp_path / "r.html").exists()


def test_export_trace_profiles_the_program(explorer, tmp_path, sin_instruction_names):
    written = explorer.export_trace(str(tmp_path / "t.json"), calls=2)
    assert explorer.error is None and written == str(tmp_path / "t.json")
    events = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e.get("ph") == "X"]
    assert [e["name"] for e in events] == sin_instruction_names


def test_a_bad_file_is_refused_at_once(tmp_path):
    with pytest.raises(PteLoadError, match="no such .pte file"):
        PlacementExplorer.for_pte(str(tmp_path / "none.pte"))


def test_another_backends_program_is_shown_and_its_trace_refused_with_the_reason(pass_through_bytes, tmp_path):
    explorer = PlacementExplorer.for_pte(pass_through_bytes)
    assert explorer.error is None and explorer.memory.picture is not None
    delegate = next(n for n in explorer.graph.nodes if n["kind"] == "delegate")
    assert ("backend", "DevcopyPassThroughBackend") in delegate["rows"]
    assert explorer.export_trace(str(tmp_path / "t.json")) is None and not (tmp_path / "t.json").exists()
    assert "delegates of another backend (0: DevcopyPassThroughBackend)" in explorer.error_html.value
