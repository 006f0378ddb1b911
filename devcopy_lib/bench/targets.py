"""Every benchmark target, in one place: the copy engine's (docs/benchmarks.md), evaluated from one sweep, each a ratio
of devcopy to a baseline measured in the same run on the same clock; and the single-number targets of the
call-overhead and explorer benchmarks (`goal_row`), so no script keeps its own goals."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..names import MODES, Strategy
from .harness import SweepResult
from .measurement import BOTH, ONE_WAY

H2D, D2H = ONE_WAY

MiB = 1 << 20
ENGINE, ALLOCATOR = "devcopy engine", "devcopy allocator"
RAW_SYNC, REUSED = "cudaMemcpyAsync + sync", "reused pageable"  # bench/methods_cuda.py's names


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
    base_memory: str | None = None  # the baseline's host memory when it is not `memory` (reused pageable vs pinned)

    def evaluate(self, result: SweepResult) -> list[dict[str, Any]]:
        """One row per size: measured value (ratio or GB/s), met or not; sizes the sweep lacks are skipped."""
        rows = []
        for n in self.sizes:
            ours = result.find(self.ours, self.direction, self.memory, n, self.clock)
            base_memory = self.base_memory or self.memory
            base = result.find(self.base, self.direction, base_memory, n, self.clock) if self.base else None
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
        for d in ONE_WAY:
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
                H2D,
                "pageable",
                (64 * MiB,),
                ENGINE,
                "cudaMemcpy",
                2.0,
                clock,
            ),
            Target(
                "pageable h2d at 64 MiB >= 2x torch .to('cuda')",
                H2D,
                "pageable",
                (64 * MiB,),
                ENGINE,
                "torch .to/.cpu",
                2.0,
                clock,
            ),
            Target(
                "pageable h2d >= 256 MiB >= 3x cudaMemcpy",
                H2D,
                "pageable",
                (256 * MiB, 1024 * MiB),
                ENGINE,
                "cudaMemcpy",
                3.0,
                clock,
            ),
            Target(
                "pageable h2d >= 256 MiB >= 3x torch .to('cuda')",
                H2D,
                "pageable",
                (256 * MiB, 1024 * MiB),
                ENGINE,
                "torch .to/.cpu",
                3.0,
                clock,
            ),
            Target(
                "pageable d2h >= 256 MiB >= 1.5x cudaMemcpy",
                D2H,
                "pageable",
                (256 * MiB, 1024 * MiB),
                ENGINE,
                "cudaMemcpy",
                1.5,
                clock,
            ),
            Target(
                "pageable d2h >= 256 MiB >= 10x torch .cpu()",
                D2H,
                "pageable",
                (256 * MiB, 1024 * MiB),
                ENGINE,
                "torch .to/.cpu",
                10.0,
                clock,
            ),
            Target(
                "both directions, pinned, 256 MiB each: >= 0.97x raw bidirectional cudaMemcpyAsync",
                BOTH,
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
        for d in ONE_WAY
    ]
    out += [
        Target(
            f"public pinned {d} 4 KiB-1 MiB <= 1.1x raw cudaMemcpyAsync + sync (time)",
            d,
            "pinned",
            (4096, 64 << 10, MiB),
            ALLOCATOR,
            RAW_SYNC,
            1.1,
            "wall",
            lower_is_better=True,
        )
        for d in ONE_WAY
    ]
    out.append(
        Target(
            "reused pageable h2d >= 64 MiB >= 0.9x pinned (both through the allocator)",
            H2D,
            REUSED,
            (64 * MiB, 256 * MiB, 1024 * MiB),
            ALLOCATOR,
            ALLOCATOR,
            0.9,
            "wall",
            base_memory="pinned",
        )
    )
    return out


def simulated_targets() -> list[Target]:
    """Bandwidth-bound sizes (1 MiB up); below that a fixed per-call cost dominates (docs/benchmarks.md gives it)."""
    sizes = (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)
    return [
        Target(f"simulated {d} >= 0.8x numpy copyto", d, "pageable", sizes, ALLOCATOR, "numpy copyto", 0.8)
        for d in ONE_WAY
    ]


def evaluate(result: SweepResult) -> list[dict[str, Any]]:
    """Every target of the result's device (simulated or CUDA) against the sweep, one row per target and size."""
    targets = simulated_targets() if result.simulated else cuda_targets()
    return [row for t in targets for row in t.evaluate(result)]


# ---- targets of one number each: the call-overhead and explorer benchmarks ------------------------------------------
RULES: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda value, goal: value <= goal,
    "<": lambda value, goal: value < goal,
    "within": lambda value, goal: abs(value - 1) <= goal,  # a ratio within `goal` of 1 (prediction / measurement)
}


def goal_row(target: str, value: float, goal: float, rule: str = "<=") -> dict[str, Any]:
    """One target that is a single number: `value` against `goal` by `rule` (a key of RULES)."""
    return {"target": target, "value": value, "goal": goal, "met": RULES[rule](value, goal)}


def profiled_copies(data: dict[str, Any], smallest: int = MiB) -> list[dict[str, Any]]:
    """Every measured profiled copy of >= `smallest` bytes in a call-overhead run: the size sweep's and the models'
    (`Method.profile` rows)."""
    copies = data.get("copy_sizes", []) + [c for r in data["models"] for c in r["copies"]]
    return [c for c in copies if c["bytes"] >= smallest and c["measured_s"]]


CAPTURE_GOAL_MODELS = ("mlp16x16", "transformer_block", "gpt2_2l", "resnet18")  # the graph-replay goal's models


def _simulated_call_targets(by: dict[tuple[str, str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """On the simulated device: the runtime's own cost per call and per instruction, and a block against eager."""
    out = []
    for mode in MODES:
        if ("add", Strategy.EXECUTORCH, mode) in by:
            row = by[("add", Strategy.EXECUTORCH, mode)]
            out.append(goal_row(f"add ({mode}) call <= 20 µs (µs)", row["call_s"] * 1e6, 20.0))
            out.append(goal_row(f"add ({mode}) <= 5 µs per instruction (µs)", row["per_instruction_s"] * 1e6, 5.0))
        for strategy in (Strategy.EXECUTORCH, Strategy.DEDUPE):
            if ("transformer_block", strategy, mode) in by:
                row = by[("transformer_block", strategy, mode)]
                out.append(
                    goal_row(
                        f"transformer_block ({strategy}, {mode}) <= 2x eager CPU",
                        row["call_s"] / row["eager_module_s"],
                        2.0,
                    )
                )
    return out


def _device_call_targets(model: str, strategy: str, mode: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    """On a real device, one model's row: devcopy against torch eager without capture, and with graph replay
    against eager and against the module in one hand-written CUDA graph."""
    out = []
    # without capture the earlier goals hold; a run from before graph replay has only `call_s`
    plain = row.get("call_uncaptured_s") or row["call_s"]
    if model.startswith("mlp") and model != "mlp":
        out.append(goal_row(f"{model} ({mode}) <= 1.5x torch eager on CUDA", plain / row["eager_module_s"], 1.5))
    elif model in ("transformer_block", "gpt2_2l", "resnet18") and row["eager_placed_s"]:
        out.append(
            goal_row(
                f"{model} ({strategy}, {mode}) <= 1.3x the placement run by torch eager",
                plain / row["eager_placed_s"],
                1.3,
            )
        )
    if model not in CAPTURE_GOAL_MODELS or not row.get("call_uncaptured_s"):
        return out
    out.append(
        goal_row(
            f"{model} ({strategy}, {mode}) with graph replay <= 1.0x torch eager on CUDA",
            row["call_s"] / row["eager_module_s"],
            1.0,
        )
    )
    if row.get("cuda_graph_module_s"):
        out.append(
            goal_row(
                f"{model} ({strategy}, {mode}) with graph replay <= 1.3x the module in one hand-written CUDA graph",
                row["call_s"] / row["cuda_graph_module_s"],
                1.3,
            )
        )
    return out


def call_overhead_targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of a call-overhead run (benchmarks/call_overhead.py) as a ratio or a time: on the simulated
    device the runtime's own cost per call and per instruction; on a real device devcopy against torch eager and
    the cost model's predictions against the profiled copies (the model prices the H200, not host memcpy)."""
    by = {(r["model"], r["strategy"], r["mode"]): r for r in data["models"]}
    if data["simulated"]:
        return _simulated_call_targets(by)
    out = [
        target
        for (model, strategy, mode), row in by.items()
        for target in _device_call_targets(model, strategy, mode, row)
    ]
    for row in data.get("small_copies", []):
        out.append(
            goal_row(f"4 KiB {row['direction']} through et_copy <= 1.1x torch copy_ pinned + sync", row["ratio"], 1.1)
        )
    for c in profiled_copies(data):
        out.append(
            goal_row(
                f"predicted/measured ({c['clock']}) {c['op'].split('::')[-1]} {c['bytes'] >> 20} MiB ({c['memory']}) "
                "within 15%",
                c["predicted_s"] / c["measured_s"],
                0.15,
                "within",
            )
        )
    return out


EXPLORER_GOALS = {"build_s": 5.0, "median_op_toggle_s": 1.0}  # seconds, after torch.export + decompositions


def explorer_targets(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The placement explorer's targets (benchmarks/explorer.py) by result key: building it and a median op toggle
    (a new delegate set) each under its goal in seconds."""
    return {key: goal_row(key, result[key], goal, "<") for key, goal in EXPLORER_GOALS.items()}
