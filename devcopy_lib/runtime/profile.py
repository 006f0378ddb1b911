"""Per-instruction profile of a loaded method (devcopy's addition beyond ExecuTorch's ETDump).

`StepProfiler.on_step` is the plan's step hook (runtime/plan.py): profiled calls run the very loop a plain call runs,
inputs, write-back and outputs included. Each step is timed on the host's wall clock and, for device work on a
backend with a device clock, on that clock too (the allocator's event timer around the step); a copy's time sits
beside the cost model's prediction for its bytes and host memory kind. The cost model is passed in (any object with
`predict(direction, nbytes, memory)`; the CLI passes `bench.cost_model.copy_pricer(backend)`, the one pricing the
placement report and the explorer use), so the runtime does not depend on the benchmarks.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

from ..names import Direction
from .plan import Step


def _memory_kind(step: Step) -> str:
    """'pinned' when the copy's host buffer is page-locked (the allocator says so), else 'pageable'."""
    moved = step.moved
    pinned = (
        step.allocator is not None and step.host is not None and moved and step.allocator.is_pinned(step.host, moved)
    )
    return "pinned" if pinned else "pageable"


def _predicted(step: Step, cost_model: Any) -> float | None:
    """The cost model's time for a host<->device copy's bytes, or None (no model, not such a copy, no line)."""
    if cost_model is None or step.kind != "copy" or step.direction not in (Direction.H2D, Direction.D2H):
        return None
    try:
        return float(cost_model.predict(step.direction, step.moved, _memory_kind(step)))
    except ValueError:  # the model has no line for this direction / memory kind
        return None


def _predicted_error(step: Step, cost_model: Any) -> float | None:
    """The model's out-of-sample relative error for this copy's size (0.08: ±8%), where the model knows one (a
    `CopyPricer` checked against another run: `error(direction, nbytes, memory)`), else None."""
    error = getattr(cost_model, "error", None)
    if not callable(error) or _predicted(step, cost_model) is None:
        return None
    band = error(step.direction, step.moved, _memory_kind(step))
    return None if band is None else float(band)


class StepProfiler:
    """Times every step of the calls it hooks (`method(*inputs, on_step=profiler.on_step)`); `rows()` gives medians."""

    def __init__(self, steps: Sequence[Step], repeat: int, cost_model: Any = None) -> None:
        if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
            raise ValueError(f"repeat must be an int >= 1, got {repeat!r}")
        self._steps, self._cost_model, self._repeat = tuple(steps), cost_model, repeat
        self._wall: dict[int, list[float]] = {id(step): [] for step in self._steps}
        self._device: dict[int, list[float]] = {id(step): [] for step in self._steps}

    def on_step(self, step: Step) -> None:
        """Run `step`, timed on the wall clock and, where the backend has one, on the device clock."""
        allocator = step.allocator
        timer = allocator.event_timer() if allocator is not None and allocator.capabilities.device_clock else None
        begin = time.perf_counter()
        if timer is None:
            step.run()
        else:
            with timer:
                step.run()
        self._wall[id(step)].append(time.perf_counter() - begin)
        if timer is not None:
            self._device[id(step)].append(timer.seconds())

    def rows(self) -> list[dict[str, Any]]:
        """One row per step with median times per run of the step (see Method.profile); `runs`: how many times a
        call ran it on average (1 without control flow)."""
        return [self._row(step) for step in self._steps]

    def _row(self, step: Step) -> dict[str, Any]:
        wall = self._wall[id(step)]
        wall_s = statistics.median(wall) if wall else 0.0  # a branch no call took ran never
        device = self._device[id(step)]
        device_s = statistics.median(device) if device else None
        copy = step.kind == "copy"
        return {
            "index": step.index,
            "kind": step.kind,
            "op": step.op,
            "bytes": step.moved if copy else None,
            "measured_s": device_s if device_s is not None else wall_s,
            "predicted_s": _predicted(step, self._cost_model),
            "predicted_error": _predicted_error(step, self._cost_model),
            "clock": "events" if device_s is not None else "wall",
            "wall_s": wall_s,
            "device_s": device_s,
            "memory": _memory_kind(step) if copy else None,
            "runs": len(wall) / self._repeat,  # per call: 0 on a branch not taken, a loop's count in its body
        }
