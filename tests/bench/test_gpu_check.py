"""benchmarks/gpu_check.py's bookkeeping, on the CPU: test counts read from pytest's JUnit report, a rerun merged
into the published file, and the page's GPU section showing what the file says."""

import json
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402
import render_docs  # noqa: E402

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.a" name="test_ok"/>
<testcase classname="tests.a" name="test_ok2"/>
<testcase classname="tests.a" name="test_bad"><failure message="boom"/></testcase>
<testcase classname="tests.b" name="test_broken"><error message="fixture"/></testcase>
<testcase classname="tests.b" name="test_later"><skipped message="needs 2 GPUs"/></testcase>
</testsuite></testsuites>"""


def test_counts_come_from_the_junit_report_failures_and_errors_alike(tmp_path):
    (tmp_path / "tests.xml").write_text(JUNIT)
    counts = gpu_check._test_counts(tmp_path, [])
    assert (counts["passed"], counts["failed"], counts["skipped"]) == (2, 2, 1)
    assert counts["failures"] == ["tests.a::test_bad", "tests.b::test_broken"]
    assert counts["skip_reasons"] == {"needs 2 GPUs": 1}


def test_no_report_is_a_failure_not_a_pass(tmp_path):
    assert gpu_check._test_counts(tmp_path, [])["failed"] == 1


def _summary(tests_passed: int, target: str, device: str) -> dict:
    results = {
        "tests": {"passed": tests_passed, "failed": 0, "skipped": 0, "record": {"seconds": 1.0}},
        "copies": {"targets": [{"name": target, "measured": 1.0, "goal": 1.0, "met": True}], "record": {}},
    }
    return gpu_check.summarize(results, _meta(device, "make gpu-check"))


def _meta(device: str, command: str) -> dict:
    return {"date": "2026-12-06", "device": device, "torch": "2.11", "cupy": "14.2", "command": command, "wall_s": 1.0}


def test_a_rerun_replaces_only_its_stages_and_says_so_in_meta():
    earlier = _summary(10, "copy target", "H200")
    rerun = gpu_check.summarize(
        {"tests": {"passed": 12, "failed": 0, "skipped": 1, "record": {"seconds": 2.0}}},
        _meta("H100", "make gpu-check --only tests --update"),
    )
    merged = gpu_check._updated(earlier, rerun, {"tests"})
    assert merged["tests"]["passed"] == 12 and merged["stages"]["tests"] == {"seconds": 2.0}
    assert [t["name"] for t in merged["targets"]] == ["copy target"]  # the copy stage's rows stay
    assert merged["meta"]["device"] == "H200" and merged["meta"]["reruns"][0]["device"] == "H100"
    assert merged["meta"]["reruns"][0]["stages"] == ["tests"]


def test_the_page_shows_the_counts_every_target_and_the_rerun(tmp_path, monkeypatch):
    data = gpu_check._updated(
        _summary(10, "pinned h2d >= 0.95x", "H200"),
        gpu_check.summarize(
            {"tests": {"passed": 7, "failed": 0, "skipped": 0, "record": {}}},
            _meta("H100", "make gpu-check --only tests --update"),
        ),
        {"tests"},
    )
    data["stages"] = {"tests": {"seconds": 1, "limit_s": 2, "ok": True, "timed_out": False}}
    path = tmp_path / "gpu_check.json"
    path.write_text(json.dumps(data))
    monkeypatch.setattr(render_docs, "GPU_CHECK", path)
    monkeypatch.setattr(render_docs, "CALL_PROFILE", tmp_path / "absent.json")
    page = "\n".join(render_docs.gpu_check_section())
    assert "GPU-marked tests: 7 passed, 0 failed, 0 skipped." in page
    assert "| pinned h2d >= 0.95x | 1.000 | 1.0 | yes |" in page
    assert "on **H100**" in page


@pytest.mark.parametrize("stage", gpu_check.STAGES, ids=lambda s: s.name)
def test_every_stage_has_a_limit_and_the_limits_fit_one_ten_minute_session(stage):
    assert 0 < stage.limit_s and sum(s.limit_s for s in gpu_check.STAGES) <= 600


def _decode_rows(graphs_s: float, every_op_bytes: int) -> dict[str, Any]:
    """decode_step.py's JSON, cut to what the check reads: eager at 1 ms per token, 100 B of token ids + logits."""
    return {
        "eager": {"token_s": 1e-3},
        "goal": {"token ids + logits only": 100},
        "rows": [
            {"variant": "executorch", "token_s": 5e-3, "bytes_per_token": {"h2d": 70_000, "d2h": 90}},
            {"variant": "resident", "token_s": 2e-3, "bytes_per_token": {"h2d": 500, "d2h": 90}},
            {"variant": "resident + graphs", "token_s": graphs_s, "bytes_per_token": {"h2d": 500, "d2h": 90}},
            {"variant": "every op", "token_s": 2e-3, "bytes_per_token": {"h2d": every_op_bytes - 90, "d2h": 90}},
            {"variant": "every op + graphs", "token_s": graphs_s / 2, "bytes_per_token": {"h2d": 10, "d2h": 90}},
        ],
    }


@pytest.mark.parametrize(
    ("graphs_s", "moved", "met"), [(0.9e-3, 100, [True, True, True]), (2.2e-3, 164, [False, False, False])]
)
def test_the_decode_step_stage_reads_its_goals_from_the_run(tmp_path, monkeypatch, graphs_s, moved, met):
    path = tmp_path / "decode_step_cupy.json"
    path.write_text(json.dumps(_decode_rows(graphs_s, moved)))
    monkeypatch.setattr(gpu_check, "DECODE_STEP_DATA", path)
    targets = gpu_check._decode_step_targets(tmp_path, [{"rc": 0}])["targets"]
    assert [t["met"] for t in targets] == met
    assert [t["measured"] for t in targets] == [pytest.approx(graphs_s / 1e-3), pytest.approx(graphs_s / 2e-3), moved]


def test_a_failed_decode_step_run_publishes_no_goal_from_an_older_file(tmp_path, monkeypatch):
    path = tmp_path / "decode_step_cupy.json"
    path.write_text(json.dumps(_decode_rows(0.5e-3, 100)))
    monkeypatch.setattr(gpu_check, "DECODE_STEP_DATA", path)
    assert gpu_check._decode_step_targets(tmp_path, [{"rc": 1}]) == {"targets": []}
