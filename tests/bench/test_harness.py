"""The timing loop, clocks, measurements and sweep results, on fake clocks: exact call counts and exact output."""

import io
import json

import pytest

from devcopy_lib.bench.clocks import CpuClock, WallClock
from devcopy_lib.bench.harness import (
    Case,
    Policy,
    SweepResult,
    TextProgress,
    interleaved,
    measure,
    repeat,
    run_cases,
    timed,
)
from devcopy_lib.bench.measurement import Measurement, Timing


class FakeClock:
    """Returns scripted durations and counts its calls."""

    def __init__(self, name, durations):
        self.name, self.durations = name, list(durations)
        self.starts = self.stops = 0

    def start(self):
        self.starts += 1
        return self.starts

    def stop(self, token):
        self.stops += 1
        return self.durations[(self.stops - 1) % len(self.durations)]


class Counter:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1


def test_measure_stops_at_min_samples_once_the_budget_is_spent():
    fn, clock = Counter(), FakeClock("wall", [0.5])
    samples = measure(fn, clock, Policy(warmup=2, min_samples=3, max_samples=10, budget_s=1.0))
    assert samples == [0.5, 0.5, 0.5] and fn.calls == 5 and clock.starts == clock.stops == 3


def test_measure_keeps_sampling_until_the_budget_then_caps_at_max():
    fn, clock = Counter(), FakeClock("wall", [0.1])
    assert len(measure(fn, clock, Policy(warmup=0, min_samples=2, max_samples=100, budget_s=0.45))) == 5
    assert len(measure(fn, clock, Policy(warmup=0, min_samples=2, max_samples=4, budget_s=10.0))) == 4


def test_wall_clock_synchronizes_around_the_timed_call():
    events, ticks = [], iter([10.0, 10.25])
    clock = WallClock(synchronize=lambda: events.append("sync"), now=lambda: next(ticks))
    token = clock.start()
    events.append("call")
    assert clock.stop(token) == 0.25 and events == ["sync", "call", "sync"]


def test_run_cases_times_each_case_on_the_clocks_it_supports_and_reports_progress():
    made, progress = [], []
    cases = [
        Case("a", "h2d", "pinned", 100, lambda: made.append("a") or Counter()),
        Case("b", "d2h", "pageable", 200, lambda: made.append("b") or Counter(), clocks=("wall",)),
    ]
    clocks = {"events": FakeClock("events", [2.0]), "wall": FakeClock("wall", [4.0])}
    out = run_cases(cases, clocks, Policy(warmup=1, min_samples=2, max_samples=2), lambda *a: progress.append(a))
    assert [(m.method, m.clock, m.samples) for m in out] == [
        ("a", "events", [2.0, 2.0]),
        ("a", "wall", [4.0, 4.0]),
        ("b", "wall", [4.0, 4.0]),
    ]
    assert made == ["a", "b"] and clocks["events"].stops == 2 and clocks["wall"].stops == 4
    assert progress == [(1, 2, "a h2d pinned 100B"), (2, 2, "b d2h pageable 200B")]


def test_measurement_statistics_and_spread_warning():
    m = Measurement("x", "h2d", "pinned", 2_000_000_000, "wall", [1.0, 2.0, 3.0, 4.0])
    assert m.median == 2.5 and m.iqr == 1.5 and m.gbps == 0.8
    assert m.warnings and "IQR is 60% of the median over 4 samples" in m.warnings[0]
    assert Measurement("x", "h2d", "pinned", 8, "wall", [1.0, 1.0, 1.01]).warnings == []


def test_text_progress_draws_a_bar_and_ends_the_line():
    stream = io.StringIO()
    bar = TextProgress(stream, width=4)
    bar(1, 2, "first")
    bar(2, 2, "second")
    assert stream.getvalue() == f"\r[##--] 1/2 {'first':<60}\r[####] 2/2 {'second':<60}\n"


def _result():
    return SweepResult(
        "simulated", "dev", [Measurement("m", "h2d", "pageable", 1000, "wall", [0.25, 0.75])], {"date": "today"}
    )


def test_sweep_result_json_round_trips_with_raw_samples():
    data = json.loads(_result().to_json())
    assert data["backend"] == "simulated" and data["date"] == "today"
    assert data["rows"] == [
        {
            "method": "m",
            "direction": "h2d",
            "memory": "pageable",
            "bytes": 1000,
            "clock": "wall",
            "median_s": 0.5,
            "iqr_s": 0.25,
            "gbps": 2e-06,
            "samples": [0.25, 0.75],
        }
    ]
    again = SweepResult.from_dict(data)
    assert again.rows() == _result().rows() and again.meta == {"date": "today"}


def test_sweep_result_csv_has_one_line_per_measurement(tmp_path):
    path = tmp_path / "out.csv"
    _result().write_csv(str(path))
    assert path.read_text().splitlines() == [
        "method,direction,memory,bytes,clock,median_s,iqr_s,gbps,samples",
        "m,h2d,pageable,1000,wall,0.5,0.25,2e-06,0.25 0.75",
    ]


def test_find_returns_none_for_an_absent_measurement():
    assert _result().find("m", "h2d", "pageable", 1000, "wall").median == 0.5
    assert _result().find("m", "d2h", "pageable", 1000, "wall") is None


def test_simulated_sweep_runs_on_the_wall_clock_and_says_simulated():
    from devcopy_lib.bench.sweep import sweep

    result = sweep("simulated", sizes=[4096, 1 << 16], policy=Policy.quick())
    assert result.backend == "simulated" and result.meta["simulated"] is True
    assert {m.clock for m in result.measurements} == {"wall"}
    assert {(m.method, m.direction) for m in result.measurements} == {
        (meth, d) for meth in ("numpy copyto", "devcopy allocator") for d in ("h2d", "d2h")
    }


@pytest.mark.gpu
def test_cuda_sweep_has_both_clocks_and_every_baseline():
    from devcopy_lib.bench.sweep import sweep

    result = sweep("cupy", sizes=[4096], policy=Policy.quick())
    assert {m.clock for m in result.measurements} == {"events", "wall"}
    assert {
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "devcopy engine",
        "devcopy allocator",
        "torch copy_",
        "torch .to/.cpu",
        "cupy asarray/get",
    } <= {m.method for m in result.measurements}


def test_interleaved_takes_turns_and_samples_the_mean_per_call():
    order = []
    clock = FakeClock("wall", [0.4, 0.2])  # the first function's rounds take 0.4 s, the second's 0.2 s
    timings = interleaved(
        {"a": lambda: order.append("a"), "b": lambda: order.append("b")}, rounds=3, calls=2, clock=clock, warmup=1
    )
    assert order == ["a", "b"] + ["a", "a", "b", "b"] * 3  # warm-ups, then turns within every round
    assert timings["a"].samples == [0.2, 0.2, 0.2] and timings["b"].samples == [0.1, 0.1, 0.1]
    assert clock.starts == clock.stops == 6


def test_timing_statistics():
    t = Timing([3.0, 1.0, 2.0, 10.0])
    assert (t.median, t.fastest) == (2.5, 1.0)
    assert t.iqr == pytest.approx(4.75 - 1.75)  # numpy percentiles, linear between the sorted samples


def test_repeat_times_every_call_on_every_clock_and_returns_the_last_result():
    calls = iter(range(10))
    wall, cpu = FakeClock("wall", [0.5]), FakeClock("cpu", [0.25])
    result, timings = repeat(lambda: next(calls), 3, (cpu, wall), warmup=2)
    assert result == 4  # two warm-ups, then three timed calls
    assert timings["wall"].samples == [0.5] * 3 and timings["cpu"].samples == [0.25] * 3
    with pytest.raises(ValueError, match="at least one"):
        repeat(lambda: None, 0)


def test_repeat_with_gc_paused_runs_without_the_collector_and_restores_it():
    import gc

    seen = []
    repeat(lambda: seen.append(gc.isenabled()), 2, gc_paused=True)
    assert seen == [False, False] and gc.isenabled()
    repeat(lambda: seen.append(gc.isenabled()), 1)
    assert seen[-1] is True


def test_timed_is_one_call_on_the_clock():
    result, seconds = timed(lambda: "x", FakeClock("wall", [0.125]))
    assert (result, seconds) == ("x", 0.125)


def test_the_cpu_clock_counts_this_process_cpu_time_not_sleep():
    import time

    clock = CpuClock()
    token = clock.start()
    time.sleep(0.05)
    assert clock.stop(token) < 0.04
