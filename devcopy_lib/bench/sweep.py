"""`sweep()`: time every method over sizes, directions and host-memory kinds on the selected backend. `plan()` makes
the bench and its cases, `run_plan()` times them: the one loop behind the CLI, the benchmark script and the timing
panel (which passes a stop flag and keeps its bench open between runs). `sweep_to_files()` is what `devcopy bench`
calls: a sweep that refuses what the backend cannot time, keeps the rows of an interrupted one, and writes its CSV
and plot."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..devices.allocator import DeviceAllocator
from ..devices.backend import make_allocator, select_backend
from ..errors import InvalidArgumentError
from .clocks import Clock
from .harness import Case, Policy, Progress, SweepResult, run_cases
from .measurement import BOTH, ONE_WAY
from .sizes import CI_SIZES, CUDA_SIZES
from .targets import REUSED

DIRECTIONS = (*ONE_WAY, BOTH)
MEMORIES = ("pageable", "pinned", REUSED)  # the last: the same pageable buffers copied again (CUDA only)
SIMULATED_SIZES = [4 << (2 * i) for i in range(13)]  # 4 B .. 64 MiB


class Bench(Protocol):
    """What a backend's bench offers the sweep (methods_cuda.CudaBench, methods_sim.SimulatedBench)."""

    @property
    def alloc(self) -> DeviceAllocator: ...
    @property
    def device(self) -> str: ...
    @property
    def directions(self) -> Sequence[str]: ...  # what it can time
    @property
    def memories(self) -> Sequence[str]: ...
    @property
    def limits(self) -> str: ...  # why not the rest ("" when it times everything)

    def clocks(self) -> dict[str, Clock]: ...
    def cases(self, n: int, directions: Sequence[str], memories: Sequence[str]) -> list[Case]: ...
    def release(self) -> None: ...


def default_sizes(real_device: bool) -> list[int]:
    """Small sizes under CI; 4 B .. 1 GiB on a real device; up to 64 MiB on the simulated accelerator (host memory
    stands in for the device, so larger sizes only time memcpy longer)."""
    if "CI" in os.environ:
        return list(CI_SIZES)
    return list(CUDA_SIZES if real_device else SIMULATED_SIZES)


def make_bench(backend: str) -> Bench:
    """The bench context (buffers, cases, clocks) of a backend name, chosen by what its allocator can do: CUDA
    events and pinned memory where the device is real, host-memory methods otherwise."""
    allocator = make_allocator(backend)
    if allocator.capabilities.real_device:
        from .methods_cuda import CudaBench

        return CudaBench(allocator)
    from .methods_sim import SimulatedBench

    return SimulatedBench(allocator)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep; `result` holds the measurements finished before it."""

    def __init__(self, result: SweepResult) -> None:
        super().__init__(f"sweep interrupted after {len(result.measurements)} measurement(s)")
        self.result = result


class SweepStopped(Exception):
    """The sweep's stop flag was set (the timing panel's Stop button); `result` holds the measurements finished
    before it."""

    def __init__(self, result: SweepResult) -> None:
        super().__init__(f"stopped after {len(result.measurements)} measurement(s)")
        self.result = result


def plan(
    backend: str | None = None,
    sizes: list[int] | None = None,
    directions: Sequence[str] = DIRECTIONS,
    memories: Sequence[str] = MEMORIES,
) -> tuple[str, Bench, list[Case]]:
    """(backend name, bench, cases) of a sweep, nothing timed yet: an empty case list means the backend cannot time
    these directions and memories."""
    name = select_backend(backend)
    bench = make_bench(name)
    sizes = sizes or default_sizes(bench.alloc.capabilities.real_device)
    return name, bench, [c for n in sizes for c in bench.cases(n, directions, memories)]


def new_result(name: str, bench: Bench) -> SweepResult:
    """An empty result for `bench`: its backend and device, and whether the device is simulated (from the
    allocator's capabilities; targets and plots read it from the result, so a result loaded from JSON says too)."""
    return SweepResult(name, bench.device, [], {"simulated": not bench.alloc.capabilities.real_device})


def run_plan(
    name: str,
    bench: Bench,
    cases: Sequence[Case],
    policy: Policy | None = None,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    result: SweepResult | None = None,
    close: bool = True,
) -> SweepResult:
    """Time a plan's cases into `result` (a new one by default; a caller that passes its own sees it grow), then
    release the bench's buffers and, with `close`, its allocator. Ctrl-C raises SweepInterrupted; `stop` set (from
    another thread) raises SweepStopped after the case being timed; both carry the measurements finished."""
    result = new_result(name, bench) if result is None else result

    def each(done: int, total: int, label: str) -> None:
        if progress is not None:
            progress(done, total, label)
        if stop is not None and stop.is_set() and done < total:
            raise SweepStopped(result)

    try:
        if stop is not None and stop.is_set():
            raise SweepStopped(result)
        run_cases(cases, bench.clocks(), policy or Policy(), each, result.measurements)
    except KeyboardInterrupt:
        raise SweepInterrupted(result) from None
    finally:
        bench.release()
        if close:
            bench.alloc.close()
    return result


def sweep(
    backend: str | None = None,
    sizes: list[int] | None = None,
    directions: Sequence[str] = DIRECTIONS,
    memories: Sequence[str] = MEMORIES,
    policy: Policy | None = None,
    progress: Progress | None = None,
) -> SweepResult:
    """Run the sweep; the result names the backend (`simulated` on a machine without CUDA) and the device."""
    return run_plan(*plan(backend, sizes, directions, memories), policy, progress)


class NothingToTime(InvalidArgumentError):
    """None of the asked directions and memories is one the backend can time; `can` lists what it times
    (`direction/memory`)."""

    def __init__(self, backend: str, directions: Sequence[str], memories: Sequence[str], can: list[str]) -> None:
        super().__init__(
            f"the {backend} backend cannot time directions {'/'.join(directions)} with memories "
            f"{'/'.join(memories)}: it times {', '.join(can)} only"
        )
        self.backend, self.directions, self.memories, self.can = backend, tuple(directions), tuple(memories), can


@dataclass
class SweepReport:
    """A sweep and its files: the result (the measurements finished before Ctrl-C when `interrupted`), the files
    asked for (`{"csv" | "plot": absolute path}`; no plot for an interrupted sweep) and, where writing one failed
    after the sweep, `write_failure` = (`"csv"` or `"plot"`, the path, the OSError)."""

    result: SweepResult
    interrupted: SweepInterrupted | None = None
    outputs: dict[str, str] = field(default_factory=dict)
    write_failure: tuple[str, str, OSError] | None = None


def sweep_to_files(
    backend: str | None = None,
    sizes: list[int] | None = None,
    directions: Sequence[str] = DIRECTIONS,
    memories: Sequence[str] = MEMORIES,
    policy: Policy | None = None,
    progress: Progress | None = None,
    csv: str | None = None,
    plot: str | None = None,
) -> SweepReport:
    """`sweep()` that refuses a plan with nothing the backend can time (NothingToTime, before any copy), keeps the
    rows of an interrupted sweep instead of raising, then writes every measurement to `csv` and, unless interrupted,
    the bandwidth plot to `plot`; a write that fails is reported, the rows stay."""
    name, bench, cases = plan(backend, sizes, directions, memories)
    if not cases:
        can = sorted({f"{c.direction}/{c.memory}" for c in bench.cases((sizes or [4096])[0], DIRECTIONS, MEMORIES)})
        bench.alloc.close()
        raise NothingToTime(name, directions, memories, can)
    try:
        report = SweepReport(run_plan(name, bench, cases, policy, progress))
    except SweepInterrupted as exc:
        report = SweepReport(exc.result, exc)
    if report.interrupted is not None:
        plot = None  # a plot is not drawn for an interrupted sweep
    report.outputs = {kind: os.path.abspath(path) for kind, path in (("csv", csv), ("plot", plot)) if path}
    kind, path = "csv", csv
    try:
        if csv:
            report.result.write_csv(csv)
        if plot:
            from .plots import plot_bandwidth

            kind, path = "plot", plot
            plot_bandwidth(report.result, plot)
    except OSError as exc:
        report.write_failure = (kind, str(path), exc)
    return report
