"""benchmarks/gpu_check.py's bookkeeping, on the CPU: test counts read from pytest's JUnit report, a rerun merged
into the published file, and the page's GPU section showing what the file says."""

import json
import sys
from pathlib import Path

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
