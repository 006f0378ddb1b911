"""A timing result as a plain object, like torch.utils.benchmark.Measurement: raw samples kept, statistics lazy."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

SPREAD_WARNING = 0.25  # IQR / median above this is flagged


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
        return float(np.median(self.samples))

    @cached_property
    def iqr(self) -> float:
        q1, q3 = np.percentile(self.samples, [25, 75])
        return float(q3 - q1)

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
