"""Resident buffers (placement/resident.py): a mutable buffer whose readers and writers can run on the device lives
there for the method's life - no per-call copy of it either way - and a loaded method computes step after step as
eager does, in both modes; a buffer a CPU op must read stays on the host with the reason in the report."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from devcopy_lib import (
    SimulatedCudaAllocator,
    compare_outputs,
    export_and_lower,
    load_method,
    place_devices,
    scoped_allocators,
)
from devcopy_lib.devices.errors import InvalidArgumentError
from devcopy_lib.names import CopyRole

ROWS, WIDTH = 8, 4


class Ring(nn.Module):
    """A cache of ROWS rows updated in place at a position (`index_copy_`, `index_put_` through indexing) or as a
    whole (`add_`: the update is a delegated op), read by a delegate (`mm`); `returned`/`random`: a reader that keeps
    it on the CPU."""

    def __init__(self, how: str = "index_copy") -> None:
        super().__init__()
        self.how = how
        self.register_buffer("cache", torch.zeros(ROWS, WIDTH))

    def forward(self, row: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        if self.how == "add":
            self.cache.add_(row)
        elif self.how == "index_put":
            self.cache[position] = row
        else:
            self.cache.index_copy_(0, position, row)
        if self.how == "returned":
            return self.cache
        if self.how == "random":
            return torch.mm(self.cache, self.cache.t()) + torch.rand_like(self.cache).sum()
        return torch.mm(self.cache, self.cache.t())


def _step(seed: int, position: int) -> tuple[torch.Tensor, torch.Tensor]:
    row = torch.randn(1, WIDTH, generator=torch.Generator().manual_seed(seed))
    return row, torch.tensor([position])


@functools.cache
def _placed(how: str, resident: bool = True):
    return place_devices(export_and_lower(Ring(how), _step(0, 0)), resident_buffers=resident)


@pytest.mark.parametrize("how", ["index_copy", "index_put", "add"])
def test_a_buffer_its_delegates_read_and_write_never_crosses_per_call(how):
    plain, resident = _placed(how, False).report, _placed(how).report
    assert plain.bytes_by_role()[CopyRole.CACHE]["h2d"] > 0  # ExecuTorch's placement: the cache crosses every call
    assert resident.bytes_by_role()[CopyRole.CACHE] == {"h2d": 0, "d2h": 0}
    (buffer,) = resident.buffers
    assert buffer["resident"] and buffer["device"] == "cuda:0" and buffer["name"] == "cache"
    assert buffer["bytes"] == ROWS * WIDTH * 4
    row = next(r for r in resident.rows if r.name == buffer["node"])
    assert row.device == "cuda:0" and "resident on cuda:0" in row.reason


@pytest.mark.parametrize("how", ["index_copy", "index_put"])
def test_an_update_that_overwrites_the_buffer_runs_in_place(how):
    placed = _placed(how)
    updates = [d for name, d in placed.delegates.items() if name.startswith("update_")]
    assert len(updates) == 1 and updates[0].in_place == {0: 0}
    assert updates[0].ops[0].endswith("_.default")  # index_copy_ / index_put_: the buffer's own memory


def test_without_the_option_the_report_says_where_the_buffer_would_live():
    (buffer,) = _placed("index_copy", False).report.buffers
    assert not buffer["resident"] and buffer["device"] == "cpu"
    assert "resident_buffers=True would keep it on cuda:0" in buffer["reason"]


@pytest.mark.parametrize(
    "how,reason",
    [
        ("returned", "the program returns it"),
        ("random", "rand_like (rand_like.default) computes from it on the CPU"),
    ],
)
def test_a_buffer_a_cpu_op_must_read_stays_with_the_reason(how, reason):
    report = _placed(how).report
    (buffer,) = report.buffers
    assert not buffer["resident"] and buffer["device"] == "cpu" and reason in buffer["reason"]
    row = next(r for r in report.rows if r.name == buffer["node"])
    assert row.device == "cpu" and reason in row.reason


def test_the_report_puts_the_three_placements_side_by_side():
    table = _placed("index_copy", False).report.bytes_by_placement
    assert list(table) == ["plain", "hoisted", "resident"]
    assert [(e["hoist_constants"], e["resident_buffers"]) for e in table.values()] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    assert table["plain"]["copy_bytes_by_role"][CopyRole.CACHE]["h2d"] > 0
    assert table["resident"]["copy_bytes_by_role"][CopyRole.CACHE] == {"h2d": 0, "d2h": 0}
    lines = _placed("index_copy", False).report.placements_lines()
    assert lines[0].split(":")[0] == "bytes per call by role" and [line.split()[0] for line in lines[1:]] == list(table)


def test_a_non_boolean_option_is_refused_naming_it():
    lowered = export_and_lower(Ring(), _step(0, 0))
    with pytest.raises(InvalidArgumentError, match="resident_buffers must be True or False, got 'yes'"):
        place_devices(lowered, resident_buffers="yes")


def _steps_equal_eager(how: str, mode: str, steps: list[tuple[int, int]]) -> None:
    eager = Ring(how)
    with scoped_allocators(SimulatedCudaAllocator()), load_method(_placed(how), mode) as method:
        for count, (seed, position) in enumerate(steps):
            inputs = _step(seed, position)
            ours = method(*inputs)
            with torch.no_grad():
                theirs = eager(*inputs)
            ok, err = compare_outputs(ours, [theirs])
            assert ok, f"step {count}: max |devcopy - eager| = {err}"
        assert method.copies_executed["h2d"] == len(steps) * _placed(how).report.copies["h2d"]
        assert torch.equal(method.buffers()["cache"], eager.cache)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    how=st.sampled_from(["index_copy", "index_put", "add"]),
    mode=st.sampled_from(["portable", "aten"]),
    steps=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, ROWS - 1)), min_size=1, max_size=6),
)
def test_consecutive_steps_equal_eager(how, mode, steps):
    _steps_equal_eager(how, mode, steps)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_reading_the_buffers_is_one_counted_d2h_each_and_reset_restores_the_start(mode):
    allocator = SimulatedCudaAllocator()
    with scoped_allocators(allocator), load_method(_placed("index_copy"), mode) as method:
        first = method(*_step(1, 2))
        method(*_step(2, 5))
        before = method.caller_copies
        copies = allocator.stats.d2h_count
        state = method.buffers()
        assert method.caller_copies == before + 1 and allocator.stats.d2h_count == copies + 1
        assert torch.count_nonzero(state["cache"].sum(1)) == 2
        method.reset_buffers()
        assert torch.equal(method.buffers()["cache"], torch.zeros(ROWS, WIDTH))
        again = method(*_step(1, 2))
    assert torch.equal(first[0], again[0])


def test_a_host_buffer_is_read_and_reset_too():
    with scoped_allocators(SimulatedCudaAllocator()), load_method(_placed("index_copy", False), "aten") as method:
        method(*_step(1, 2))
        assert torch.count_nonzero(method.buffers()["cache"]) == WIDTH and method.caller_copies == 0
        method.reset_buffers()
        assert torch.equal(method.buffers()["cache"], torch.zeros(ROWS, WIDTH))


@pytest.mark.parametrize("how", ["index_copy", "add"])
def test_threads_sharing_one_method_lose_no_update(run_concurrently, how):
    """Each thread writes its own rows (index_copy) or adds its own whole numbers (add): whatever the order of the
    serialized calls, the final state is every thread's updates."""
    expected = torch.zeros(ROWS, WIDTH)
    updates = {seed: [torch.full((1, WIDTH), float(seed * 10 + k)) for k in range(3)] for seed in range(4)}
    with scoped_allocators(SimulatedCudaAllocator()), load_method(_placed(how), "aten") as method:

        def worker(seed: int) -> None:
            for row in updates[seed]:
                method(row, torch.tensor([seed]))

        run_concurrently(worker)
        state = method.buffers()["cache"]
    for seed, rows in updates.items():
        if how == "add":
            expected += sum(rows)
        else:
            expected[seed] = rows[-1][0]
    assert torch.equal(state, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_consecutive_steps_equal_eager_on_cuda_with_cupy(exact_float32, mode):
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    steps = [(seed, seed % ROWS) for seed in range(6)]
    for how in ("index_copy", "index_put", "add"):
        eager = Ring(how)
        with scoped_allocators(CupyCudaAllocator()), load_method(_placed(how), mode) as method:
            for seed, position in steps:
                ours = method(*_step(seed, position))
                with torch.no_grad():
                    theirs = eager(*_step(seed, position))
                ok, err = compare_outputs(ours, [theirs])
                assert ok, (how, mode, seed, err)
            assert torch.equal(method.buffers()["cache"], eager.cache)
            method.reset_buffers()
            assert torch.equal(method.buffers()["cache"], torch.zeros(ROWS, WIDTH))


def test_the_html_report_shows_the_three_placements_and_where_each_buffer_lives(tmp_path):
    from devcopy_lib import export_report

    page = Path(export_report(_placed("index_copy", False).report, str(tmp_path / "report.html"), model="ring"))
    page = page.read_text()
    assert "Bytes per call by role: plain, hoisted, resident buffers" in page
    assert "<td>plain</td><td>128 B</td>" in page and "<td>resident</td><td>0 B</td>" in page
    assert "resident_buffers=True would keep it on cuda:0" in page
