"""Per-instruction profile of a loaded method (devcopy's addition beyond ExecuTorch's ETDump).

Each step of the precompiled plan is timed on the host's wall clock and, for device work on real CUDA, on the
device clock too (CUDA events around the step); a copy's time sits beside the cost model's prediction for its bytes
and host memory kind. The cost model is passed in (any object with `predict(direction, nbytes, memory)`), so the
runtime does not depend on the benchmarks.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any


class _EventTimer:
    """CUDA events around one step on the current stream (the stream copies and delegates run on)."""

    def __init__(self) -> None:
        import torch

        self._torch = torch
        self.start, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def __enter__(self) -> None:
        self.start.record()

    def __exit__(self, *exc) -> None:
        self.end.record()

    def seconds(self) -> float:
        self.end.synchronize()
        return self.start.elapsed_time(self.end) / 1e3


def _on_cuda(step: Any) -> bool:
    return step.allocator is not None and step.allocator.backend == "cupy"


def _memory_kind(step: Any) -> str:
    """'pinned' when the copy's host buffer is pinned (real CUDA's page-locked arenas), else 'pageable'."""
    is_pinned = getattr(step.allocator, "is_pinned", None)
    return "pinned" if is_pinned is not None and step.moved and is_pinned(step.host, step.moved) else "pageable"


def _predicted(step: Any, cost_model: Any) -> float | None:
    if cost_model is None or step.kind != "copy" or step.direction not in ("h2d", "d2h"):
        return None
    try:
        return float(cost_model.predict(step.direction, step.moved, _memory_kind(step)))
    except ValueError:  # the model has no line for this direction / memory kind
        return None


def profile_method(method: Any, inputs: Sequence[Any], repeat: int, cost_model: Any = None) -> list[dict]:
    """Run `method` `repeat` times step by step; one row per instruction with median times (see Method.profile)."""
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise ValueError(f"repeat must be an int >= 1, got {repeat!r}")
    steps = method.steps
    wall: list[list[float]] = [[] for _ in steps]
    device: list[list[float]] = [[] for _ in steps]
    with method._lock:
        for _ in range(repeat):
            method._start(tuple(inputs))
            try:
                for k, step in enumerate(steps):
                    timer = _EventTimer() if _on_cuda(step) else None
                    begin = time.perf_counter()
                    if timer is None:
                        step.run()
                    else:
                        with timer:
                            step.run()
                    wall[k].append(time.perf_counter() - begin)
                    if timer is not None:
                        device[k].append(timer.seconds())
            except BaseException as exc:
                method._note_interrupt(exc)
                raise
            for read in method._outputs:
                read()
    rows = []
    for k, step in enumerate(steps):
        wall_s = statistics.median(wall[k])
        device_s = statistics.median(device[k]) if device[k] else None
        rows.append(
            {
                "index": step.index,
                "kind": step.kind,
                "op": step.op,
                "bytes": step.moved if step.kind == "copy" else None,
                "measured_s": device_s if device_s is not None else wall_s,
                "predicted_s": _predicted(step, cost_model),
                "clock": "events" if device_s is not None else "wall",
                "wall_s": wall_s,
                "device_s": device_s,
                "memory": _memory_kind(step) if step.kind == "copy" else None,
            }
        )
    return rows
