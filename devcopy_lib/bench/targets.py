"""The copy engine's targets (docs/benchmarks.md), evaluated from one sweep: each a ratio of devcopy to a baseline measured in
the same run on the same clock."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .harness import SweepResult

MiB = 1 << 20
ENGINE, ALLOCATOR = "devcopy engine", "devcopy allocator"


@dataclass(frozen=True)
class Target:
    """`ours` over `base` (bandwidth ratio), or an absolute GB/s when `base` is None, must reach `goal`."""

    name: str
    direction: str
    memory: str
    sizes: tuple[int, ...]
    ours: str
    base: str | None
    goal: float
    clock: str = "wall"
    lower_is_better: bool = False  # compare times (latency) instead of bandwidth

    def evaluate(self, result: SweepResult) -> list[dict[str, Any]]:
        """One row per size: measured value (ratio or GB/s), met or not; sizes the sweep lacks are skipped."""
        rows = []
        for n in self.sizes:
            ours = result.find(self.ours, self.direction, self.memory, n, self.clock)
            base = result.find(self.base, self.direction, self.memory, n, self.clock) if self.base else None
            if ours is None or (self.base and base is None):
                continue
            if base is None:
                value = ours.gbps
            elif self.lower_is_better:
                value = ours.median / base.median
            else:
                value = ours.gbps / base.gbps
            met = value <= self.goal if self.lower_is_better else value >= self.goal
            rows.append(
                {
                    "target": self.name,
                    "direction": self.direction,
                    "memory": self.memory,
                    "bytes": n,
                    "clock": self.clock,
                    "value": value,
                    "goal": self.goal,
                    "met": met,
                    "ours_s": ours.median,
                    "base_s": base.median if base else None,
                }
            )
        return rows


def cuda_targets() -> list[Target]:
    big = (16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB)
    out = []
    for clock in ("events", "wall"):
        for d in ("h2d", "d2h"):
            out.append(
                Target(
                    f"planned (pinned) {d} >= 0.95x cudaMemcpyAsync",
                    d,
                    "pinned",
                    big,
                    ENGINE,
                    "cudaMemcpyAsync",
                    0.95,
                    clock,
                )
            )
    for clock in ("wall", "events"):
        out += [
            Target(
                "pageable h2d at 64 MiB >= 2x cudaMemcpy",
                "h2d",
                "pageable",
                (64 * MiB,),
                ENGINE,
                "cudaMemcpy",
                2.0,
                clock,
            ),
            Target(
                "pageable h2d at 64 MiB >= 2x torch .to('cuda')",
                "h2d",
                "pageable",
                (64 * MiB,),
                ENGINE,
                "torch .to/.cpu",
                2.0,
                clock,
            ),
            Target(
                "pageable h2d >= 256 MiB >= 3x cudaMemcpy",
                "h2d",
                "pageable",
                (256 * MiB, 1024 * MiB),
                ENGINE,
                "cudaMemcpy",
                3.0,
                clock,
            ),
            Target(
                "pageable h2d >= 256 MiB >= 3x torch .to('cuda')",
                "h2d",
                "pageable",
                (256 * MiB, 1024 * MiB),
                ENGINE,
                "torch .to/.cpu",
                3.0,
                clock,
            ),
            Target(
                "pageable d2h >= 256 MiB >= 1.5x cudaMemcpy",
                "d2h",
                "pageable",
                (256 * MiB, 1024 * MiB),
                ENGINE,
                "cudaMemcpy",
                1.5,
                clock,
            ),
            Target(
                "pageable d2h >= 256 MiB >= 10x torch .cpu()",
                "d2h",
                "pageable",
                (256 * MiB, 1024 * MiB),
                ENGINE,
                "torch .to/.cpu",
                10.0,
                clock,
            ),
            Target(
                "both directions, pinned, 256 MiB each: >= 0.97x raw bidirectional cudaMemcpyAsync",
                "both",
                "pinned",
                (512 * MiB,),
                ENGINE,
                "cudaMemcpyAsync",
                0.97,
                clock,
            ),
        ]
    out += [
        Target(
            f"4 KiB {d} through the allocator path <= 1.5x torch copy_ pinned + sync (time)",
            d,
            "pinned",
            (4096,),
            ALLOCATOR,
            "torch copy_",
            1.5,
            "wall",
            lower_is_better=True,
        )
        for d in ("h2d", "d2h")
    ]
    return out


def simulated_targets() -> list[Target]:
    """Bandwidth-bound sizes (1 MiB up); below that a fixed per-call cost dominates (docs/benchmarks.md gives it)."""
    sizes = (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)
    return [
        Target(f"simulated {d} >= 0.8x numpy copyto", d, "pageable", sizes, ALLOCATOR, "numpy copyto", 0.8)
        for d in ("h2d", "d2h")
    ]


def evaluate(result: SweepResult) -> list[dict[str, Any]]:
    """Every target of the result's device (simulated or CUDA) against the sweep, one row per target and size."""
    targets = simulated_targets() if result.simulated else cuda_targets()
    return [row for t in targets for row in t.evaluate(result)]
