"""`bench.sweep`'s loop: a stop flag ends it between cases with what was measured, the bench stays open when asked,
and the result says simulated from the allocator's capabilities (not from the backend's name)."""

import threading

import pytest

from devcopy_lib.bench.harness import Policy
from devcopy_lib.bench.sweep import SweepStopped, default_sizes, new_result, plan, run_plan

SIZES = [4096, 1 << 16]


def test_a_stop_set_before_the_run_times_nothing_and_still_closes_the_bench():
    name, bench, cases = plan("simulated", SIZES)
    stop = threading.Event()
    stop.set()
    with pytest.raises(SweepStopped) as caught:
        run_plan(name, bench, cases, Policy.quick(), stop=stop)
    assert caught.value.result.measurements == [] and bench.alloc.closed


def test_a_stop_set_during_the_run_keeps_the_cases_finished_and_times_no_more():
    name, bench, cases = plan("simulated", SIZES)
    stop, seen = threading.Event(), []

    def progress(done, total, label):
        seen.append(done)
        stop.set()  # as the Stop button would, from another thread, while the first case is timed

    with pytest.raises(SweepStopped) as caught:
        run_plan(name, bench, cases, Policy.quick(), progress, stop)
    first = cases[0]
    assert seen == [1] and len(cases) > 1
    assert {(m.method, m.direction, m.nbytes) for m in caught.value.result.measurements} == {
        (first.method, first.direction, first.nbytes)
    }


def test_a_stop_after_the_last_case_is_a_finished_run():
    name, bench, cases = plan("simulated", [4096])
    stop = threading.Event()

    def progress(done, total, label):
        if done == total:
            stop.set()

    result = run_plan(name, bench, cases, Policy.quick(), progress, stop)
    assert {m.method for m in result.measurements} == {c.method for c in cases}


def test_close_false_keeps_the_allocator_for_the_next_run_and_a_given_result_grows():
    name, bench, cases = plan("simulated", [4096])
    result = new_result(name, bench)
    sizes_seen = []
    returned = run_plan(
        name,
        bench,
        cases,
        Policy.quick(),
        lambda *_: sizes_seen.append(len(result.measurements)),
        result=result,
        close=False,
    )
    assert returned is result and sizes_seen == sorted(sizes_seen) and sizes_seen[-1] == len(result.measurements)
    assert not bench.alloc.closed
    run_plan(name, bench, bench.cases(1 << 16, ("h2d",), ("pageable",)), Policy.quick())  # the same allocator again
    assert bench.alloc.closed


def test_the_result_says_simulated_from_the_allocator_capabilities():
    name, bench, _ = plan("simulated", [4096])
    assert bench.alloc.capabilities.real_device is False
    assert new_result(name, bench).simulated is True
    bench.alloc.close()


def test_default_sizes_follow_the_device_kind(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert max(default_sizes(real_device=True)) == 1 << 30 and max(default_sizes(real_device=False)) == 64 << 20
    monkeypatch.setenv("CI", "1")
    assert default_sizes(real_device=True) == default_sizes(real_device=False)
