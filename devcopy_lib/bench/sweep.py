"""`sweep()`: time every method over sizes, directions and host-memory kinds on the selected backend."""

from __future__ import annotations

import os

from ..devices.backend import make_allocator, select_backend
from .harness import Policy, Progress, SweepResult, run_cases
from .sizes import CI_SIZES, CUDA_SIZES

DIRECTIONS = ("h2d", "d2h", "both")
MEMORIES = ("pageable", "pinned")
SIMULATED_SIZES = [4 << (2 * i) for i in range(13)]  # 4 B .. 64 MiB


def default_sizes(backend: str) -> list[int]:
    """Small sizes under CI; 4 B .. 1 GiB on CUDA; up to 64 MiB on the simulated accelerator."""
    if "CI" in os.environ:
        return list(CI_SIZES)
    return list(CUDA_SIZES if backend == "cupy" else SIMULATED_SIZES)


def make_bench(backend: str):
    """The bench context (buffers, cases, clocks) of a backend name."""
    allocator = make_allocator(backend)
    if backend == "cupy":
        from .methods_cuda import CudaBench

        return CudaBench(allocator)
    from .methods_sim import SimulatedBench

    return SimulatedBench(allocator)


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep; `result` holds the measurements finished before it."""

    def __init__(self, result: SweepResult) -> None:
        super().__init__(f"sweep interrupted after {len(result.measurements)} measurement(s)")
        self.result = result


def plan(backend: str | None = None, sizes: list[int] | None = None, directions=DIRECTIONS, memories=MEMORIES):
    """(backend name, bench, cases) of a sweep, nothing timed yet: an empty case list means the backend cannot time
    these directions and memories."""
    name = select_backend(backend)
    bench = make_bench(name)
    return name, bench, [c for n in (sizes or default_sizes(name)) for c in bench.cases(n, directions, memories)]


def run_plan(name: str, bench, cases, policy: Policy | None = None, progress: Progress | None = None) -> SweepResult:
    """Time a plan's cases, then release the bench and close its allocator; Ctrl-C raises SweepInterrupted."""
    measurements: list = []
    meta = {"simulated": name == "simulated"}
    try:
        run_cases(cases, bench.clocks(), policy or Policy(), progress, measurements)
    except KeyboardInterrupt:
        raise SweepInterrupted(SweepResult(name, bench.device, measurements, meta)) from None
    finally:
        bench.release()
        bench.alloc.close()
    return SweepResult(name, bench.device, measurements, meta)


def sweep(
    backend: str | None = None,
    sizes: list[int] | None = None,
    directions=DIRECTIONS,
    memories=MEMORIES,
    policy: Policy | None = None,
    progress: Progress | None = None,
) -> SweepResult:
    """Run the sweep; the result names the backend (`simulated` on a machine without CUDA) and the device."""
    return run_plan(*plan(backend, sizes, directions, memories), policy, progress)
