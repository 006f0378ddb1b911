"""State of the copy timing panel: sizes, direction, host memory kind; runs the sweep one size at a time so the
view can redraw between sizes. No display calls."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from devcopy_lib.bench.harness import Policy, SweepResult
from devcopy_lib.bench.plots import CEILING_METHOD
from devcopy_lib.bench.sizes import parse_sizes
from devcopy_lib.bench.sweep import DIRECTIONS, MEMORIES, sweep
from devcopy_lib import select_backend

DIRECTION_CHOICES = (*DIRECTIONS, "all")
MEMORY_CHOICES = (*MEMORIES, "all")
TABLE_COLUMNS = ("method", "direction", "memory", "bytes", "clock", "median_s", "iqr_s", "gbps")


@dataclass
class TimingState:
    """What to time; `run()` fills `result` size by size, calling `on_size(result)` after each."""

    sizes: str = "4K..1M"
    direction: str = "all"
    memory: str = "all"
    backend: str = "auto"
    quick: bool = True
    result: SweepResult | None = field(default=None, repr=False)

    def size_list(self) -> list[int]:
        return parse_sizes(self.sizes)

    def choices(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(directions, memories) to sweep, validated."""
        for value, valid, what in ((self.direction, DIRECTION_CHOICES, "direction"),
                                   (self.memory, MEMORY_CHOICES, "memory")):
            if value not in valid:
                raise ValueError(f"Unknown {what} {value!r}. Valid: {', '.join(valid)}")
        directions = DIRECTIONS if self.direction == "all" else (self.direction,)
        return directions, MEMORIES if self.memory == "all" else (self.memory,)

    def run(self, progress: Callable[[int, int, str], None] | None = None,
            on_size: Callable[[SweepResult], None] | None = None) -> SweepResult:
        """Sweep every size in order; `progress(done, total, label)` counts sizes."""
        sizes, (directions, memories) = self.size_list(), self.choices()
        backend = select_backend(self.backend)
        policy = Policy.quick() if self.quick else Policy()
        self.result = None
        for done, nbytes in enumerate(sizes, 1):
            part = sweep(backend, [nbytes], directions, memories, policy)
            if self.result is None:
                self.result = part
            else:
                self.result.measurements.extend(part.measurements)
            if progress is not None:
                progress(done, len(sizes), f"{nbytes} B")
            if on_size is not None:
                on_size(self.result)
        return self.result

    def rows(self) -> list[dict]:
        """The result table (no raw samples), in sweep order."""
        return [{k: r[k] for k in TABLE_COLUMNS} for r in self.result.rows()] if self.result else []


PCIE5_X16_GBPS = 64.0  # PCIe 5.0 x16, one direction, before protocol overhead (the H200's host link)


def is_baseline(method: str) -> bool:
    """Baselines are every timed method that is not devcopy's own path."""
    return not method.startswith("devcopy")


def ceilings(result: SweepResult, ceiling_gbps: float | None = None) -> list[tuple[float, str]]:
    """The lines copies cannot beat: the given one; on CUDA the PCIe link and the measured pinned
    cudaMemcpyAsync peak (as in bench's plots); on the simulated backend the host memcpy peak."""
    if ceiling_gbps is not None:
        return [(ceiling_gbps, f"ceiling {ceiling_gbps:g} GB/s")]
    if result.backend == "cupy":
        measured = [m.gbps for m in result.measurements if (m.method, m.memory) == (CEILING_METHOD, "pinned")]
        lines = [(PCIE5_X16_GBPS, f"PCIe 5.0 x16 link ({PCIE5_X16_GBPS:g} GB/s, theoretical)")]
        return lines + ([(max(measured), f"measured ceiling ({CEILING_METHOD} pinned, {max(measured):.1f} GB/s)")]
                        if measured else [])
    peaks = [m.gbps for m in result.measurements if is_baseline(m.method)]
    return [(max(peaks), f"host memcpy peak ({max(peaks):.1f} GB/s, simulated)")] if peaks else []
