"""The explorer's exports: the "export report" button writes the shown placement and says where; "compare with"
shows the copies another strategy would add or drop."""

import json

from devcopy_widgets import PlacementExplorer


def test_the_export_button_writes_the_shown_placement_and_shows_its_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    view = PlacementExplorer(model="cpu_between", strategy="dedupe")
    view.export_button.click()
    written = tmp_path / "devcopy_report_cpu_between_dedupe.html"
    assert view.error is None and f"report written to {written}" in view.export_note.value
    assert "b_h2d_1" not in written.read_text() and "cumsum_h2d" in written.read_text()
    view.report_path.value = "mine.json"
    view.export_button.click()
    report = json.loads((tmp_path / "mine.json").read_text())
    assert report["strategy"] == "dedupe" and report["provenance"]["model"] == "cpu_between"
    assert report["provenance"]["cost_model"] == view.state.cost_model.source


def test_a_bad_report_path_is_shown_in_the_widget_and_the_view_stays(tmp_path):
    view = PlacementExplorer(model="add")
    view.report_path.value = str(tmp_path / "missing" / "r.html")
    view.export_button.click()
    assert "does not exist" in view.error_html.value and view.export_note.value == ""
    assert view.placed is not None and list(tmp_path.iterdir()) == []


def test_compare_with_shows_the_copies_the_other_strategy_drops_and_goes_into_the_report(tmp_path):
    view = PlacementExplorer(model="cpu_between")
    assert view.diff.value == ""
    view.compare_with.value = "dedupe"
    assert "only in executorch" in view.diff.value and "b_h2d_1" in view.diff.value
    assert view.state.strategy == "executorch"  # comparing leaves the explorer's own settings alone
    view.export_report(str(tmp_path / "r.json"))
    assert json.loads((tmp_path / "r.json").read_text())["diff"]["vanish"][0]["node"] == "b_h2d_1"
    view.compare_with.value = ""
    assert view.diff.value == ""


def test_the_trace_button_profiles_the_shown_placement_and_writes_a_trace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    view = PlacementExplorer(model="cpu_between")
    view.trace_button.click()
    written = tmp_path / "devcopy_trace_cpu_between_executorch.json"
    assert view.error is None and f"written to {written}" in view.export_note.value
    trace = json.loads(written.read_text())
    names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert names.count("et_copy::_h2d_copy.out") == 4 and {"delegate_0", "delegate_1"} <= set(names)
    assert trace["otherData"]["profiled_calls"] == 10 and trace["otherData"]["backend"] == "simulated"
