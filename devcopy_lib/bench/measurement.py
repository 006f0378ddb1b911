"""A timing result as a plain object, like torch.utils.benchmark.Measurement: raw samples kept, statistics lazy."""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..names import Direction

SPREAD_WARNING = 0.25  # IQR / median above this is flagged
ONE_WAY = (Direction.H2D, Direction.D2H)  # the host<->device copy directions a sweep times one at a time
BOTH = "both"  # a sweep's third direction: H2D and D2H at once (its bytes count both)


class FullCollections:
    """The seconds of each full garbage collection (generation 2) Python runs while attached: what a benchmark of
    the explorer reports beside its times, since one such collection over a big kernel takes longer than an edit."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._started = 0.0

    def _note(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] == 2:
            if phase == "start":
                self._started = time.perf_counter()
            else:
                self.seconds.append(time.perf_counter() - self._started)

    def attach(self) -> FullCollections:
        gc.callbacks.append(self._note)
        return self

    def detach(self) -> None:
        gc.callbacks.remove(self._note)

    def __enter__(self) -> FullCollections:
        return self.attach()

    def __exit__(self, *_: object) -> None:
        self.detach()


def median_of(samples: Sequence[float]) -> float:
    """The middle sample (the mean of the two middle ones for an even count): the statistic every script reports."""
    return float(np.median(samples))


def mean_of(samples: Sequence[float]) -> float:
    """The arithmetic mean, for totals spread over a count (a time per instruction), not for a timed call's spread."""
    return float(np.mean(samples))


def iqr_of(samples: Sequence[float]) -> float:
    """Interquartile range: the spread of the middle half, which one stray sample does not move."""
    q1, q3 = np.percentile(samples, [25, 75])
    return float(q3 - q1)


@dataclass(frozen=True)
class Timing:
    """Samples (seconds) of one timed function, from `harness.interleaved` or `harness.repeat`: median and IQR, and
    the fastest sample (on a shared machine other processes only ever add time, so the fastest is the closest to the
    code's own cost, as timeit reports)."""

    samples: Sequence[float]

    @property
    def median(self) -> float:
        return median_of(self.samples)

    @property
    def iqr(self) -> float:
        return iqr_of(self.samples)

    @property
    def fastest(self) -> float:
        return min(self.samples)


@dataclass
class Measurement:
    """Samples (seconds) of one method moving `nbytes` (total, both directions counted) on one clock."""

    method: str
    direction: str
    memory: str
    nbytes: int
    clock: str
    samples: list[float] = field(repr=False)

    @cached_property
    def median(self) -> float:
        return median_of(self.samples)

    @cached_property
    def iqr(self) -> float:
        return iqr_of(self.samples)

    @property
    def gbps(self) -> float:
        """Bandwidth in GB/s (10^9 bytes per second) at the median."""
        return self.nbytes / self.median / 1e9 if self.median > 0 else float("inf")

    @property
    def warnings(self) -> list[str]:
        if self.median > 0 and self.iqr / self.median > SPREAD_WARNING:
            return [
                f"{self.label}: IQR is {self.iqr / self.median:.0%} of the median over {len(self.samples)} "
                "samples; the timing is noisy (other load, clock ramp-up): rerun or take more samples"
            ]
        return []

    @property
    def label(self) -> str:
        return f"{self.method} {self.direction} {self.memory} {self.nbytes}B ({self.clock})"

    def row(self) -> dict[str, Any]:
        """The JSON/CSV row: method, direction, memory, bytes, clock, median_s, iqr_s, gbps, samples."""
        return {
            "method": self.method,
            "direction": self.direction,
            "memory": self.memory,
            "bytes": self.nbytes,
            "clock": self.clock,
            "median_s": self.median,
            "iqr_s": self.iqr,
            "gbps": self.gbps,
            "samples": list(self.samples),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Measurement:
        return cls(
            row["method"],
            row["direction"],
            row["memory"],
            int(row["bytes"]),
            row["clock"],
            [float(s) for s in row["samples"]],
        )
