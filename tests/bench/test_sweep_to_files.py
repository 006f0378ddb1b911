"""`sweep_to_files` without the CLI (what `devcopy bench` calls): a plan the backend cannot time is the library's
NothingToTime (an InvalidArgumentError) before any copy; an interrupted sweep keeps its rows and draws no plot; a
write that fails after the sweep is reported beside the rows."""

from __future__ import annotations

import errno
import os

import pytest

from devcopy_lib.bench import harness
from devcopy_lib.bench.harness import Policy
from devcopy_lib.bench.sweep import NothingToTime, sweep_to_files
from devcopy_lib.errors import InvalidArgumentError

SMALL = {"sizes": [4096, 8192], "directions": ("h2d",), "memories": ("pageable",), "policy": Policy.quick()}


def test_what_the_backend_cannot_time_is_refused_naming_what_it_can(monkeypatch):
    monkeypatch.setattr(harness, "run_cases", lambda *a, **k: pytest.fail("a copy was timed"))
    with pytest.raises(NothingToTime) as refused:
        sweep_to_files("simulated", [4096], ("h2d",), ("pinned",))
    assert isinstance(refused.value, InvalidArgumentError)
    assert refused.value.can == ["d2h/pageable", "h2d/pageable"] and refused.value.memories == ("pinned",)


def test_the_rows_and_the_csv_of_a_finished_sweep(tmp_path):
    csv = tmp_path / "b.csv"
    report = sweep_to_files("simulated", **SMALL, csv=str(csv))
    assert report.interrupted is None and report.write_failure is None
    assert report.outputs == {"csv": str(csv)} and len(csv.read_text().splitlines()) == 1 + len(report.result.rows())
    assert {row["bytes"] for row in report.result.rows()} == {4096, 8192}


def test_an_interrupted_sweep_keeps_its_rows_and_draws_no_plot(tmp_path, monkeypatch):
    real, calls = harness.measure, []

    def interrupted_on_the_third(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(harness, "measure", interrupted_on_the_third)
    report = sweep_to_files("simulated", **SMALL, plot=str(tmp_path / "b.png"))
    assert report.interrupted is not None and len(report.result.rows()) == 2
    assert report.outputs == {} and not (tmp_path / "b.png").exists()


def test_a_write_failing_after_the_sweep_is_reported_beside_the_rows(tmp_path, monkeypatch):
    def full(self, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(harness.SweepResult, "write_csv", full)
    report = sweep_to_files("simulated", **SMALL, csv=str(tmp_path / "b.csv"))
    kind, path, error = report.write_failure
    assert (kind, path, error.errno) == ("csv", str(tmp_path / "b.csv"), errno.ENOSPC) and report.result.rows()
