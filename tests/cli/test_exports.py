"""`devcopy place --report/--diff-strategy/--diff-delegate` and `devcopy run --trace` (cli/exports.py): the files
they write, the diff they print, and paths and ops refused before any work starts."""

import json

import pytest

from devcopy_lib.cli import main, place


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the model is exported (a refusal must come before any work)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the work started before the arguments were checked")

    monkeypatch.setattr(place.model_spec, "load", refuse)


def test_place_report_html_and_json_hold_the_placement(capsys, tmp_path):
    code, result = run_json(capsys, "place", "cpu_between", "--report", str(tmp_path / "r.html"))
    assert code == 0 and result["report_file"] == str(tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "b_h2d_1" in page and "http" not in page
    code, result = run_json(capsys, "place", "cpu_between", "--report", str(tmp_path / "r.json"))
    written = json.loads((tmp_path / "r.json").read_text())
    assert written.pop("provenance")["model"] == "cpu_between"
    assert written == {k: v for k, v in result.items() if k not in ("ok", "report_file")}


def test_place_diff_strategy_names_the_deduplicated_copy_in_json_and_text(capsys):
    code, result = run_json(capsys, "place", "cpu_between", "--diff-strategy", "dedupe")
    assert code == 0 and [(r["value"], r["node"]) for r in result["diff"]["vanish"]] == [("b", "b_h2d_1")]
    assert main(["place", "cpu_between", "--diff-strategy", "dedupe"]) == 0
    text = capsys.readouterr().out
    assert "diff executorch -> dedupe: 0 copies appear, 1 vanish, 0 change, 5 the same" in text
    assert "  - b -> cuda:0 H2D (b_h2d_1, 64 B)  (only in executorch)" in text


def test_place_diff_delegate_compares_two_delegate_sets(capsys):
    code, result = run_json(capsys, "place", "cpu_between", "--diff-delegate", "add.Tensor,sin.default,mul.Tensor")
    diff = result["diff"]
    assert code == 0 and diff["b"]["delegate_ops"] == ["add.Tensor", "sin.default", "mul.Tensor"]
    assert diff["appear"] == diff["vanish"] == [] and diff["same"] == 6  # the model's delegated ops either way
    code, result = run_json(capsys, "place", "cpu_between", "--diff-delegate", "add.Tensor")
    assert {(r["value"], r["direction"]) for r in result["diff"]["vanish"]} >= {("sin", "d2h"), ("b", "h2d")}


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["place", "add", "--report", "{tmp}/missing/r.html"], "is in a folder that does not exist"),
        (["place", "add", "--report", "{tmp}/r.pdf"], "must end in .html or .htm or .json"),
        (["place", "add", "--report", "{tmp}"], "is a directory"),
        (["place", "add", "--diff-delegate", "nope.op"], "--diff-delegate: Unknown delegate op 'nope.op'"),
        (["place", "add", "--diff-strategy", "fastest"], "invalid choice: 'fastest'"),
        (["place", "add", "--delegate", "nope.op", "--diff-strategy", "dedupe"], "Unknown delegate op 'nope.op'"),
        (["run", "add", "--trace", "{tmp}/t.html"], "--trace"),
        (["run", "add", "--trace", "{tmp}/missing/t.json"], "is in a folder that does not exist"),
    ],
)
def test_bad_exports_are_refused_before_any_work(capsys, tmp_path, no_work, argv, fragment):
    code, result = run_json(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert code == 2 and result["error"]["kind"] == "usage" and fragment in result["error"]["message"]
    assert ("--diff-delegate" in result["error"]["message"]) == ("--diff-delegate" in argv)
    assert list(tmp_path.iterdir()) == []


def test_run_trace_writes_the_profiled_call_and_implies_profile(capsys, tmp_path):
    code, result = run_json(capsys, "run", "add", "--backend", "simulated", "--trace", str(tmp_path / "t.json"))
    assert code == 0 and result["trace_file"] == str(tmp_path / "t.json") and len(result["profile"]) == 4
    trace = json.loads((tmp_path / "t.json").read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert [e["args"]["index"] for e in events] == [r["index"] for r in result["profile"]]
    assert trace["otherData"]["profiled_calls"] == 10 and trace["otherData"]["cost_model"] == result["cost_model"]
    assert main(["run", "add", "--backend", "simulated", "--profile", "2", "--trace", str(tmp_path / "u.json")]) == 0
    assert f"trace written to {tmp_path / 'u.json'}" in capsys.readouterr().out
    assert json.loads((tmp_path / "u.json").read_text())["otherData"]["profiled_calls"] == 2
