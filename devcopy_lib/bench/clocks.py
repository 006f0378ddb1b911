"""The clocks: `WallClock` (host clock around the call plus a device synchronize: what a caller sees) and `CpuClock`
(this process's CPU time: host-only work on a shared machine). Device time comes from a backend's `event_timer()`
(bench/methods_cuda.py). All share one protocol, so the harness also runs on fake clocks."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class Clock(Protocol):
    name: str

    def start(self) -> Any: ...
    def stop(self, token: Any) -> float: ...


class WallClock:
    """perf_counter between a synchronize before and a synchronize after the timed call."""

    name = "wall"

    def __init__(
        self, synchronize: Callable[[], None] = lambda: None, now: Callable[[], float] = time.perf_counter
    ) -> None:
        self.synchronize, self.now = synchronize, now

    def start(self) -> float:
        self.synchronize()
        return self.now()

    def stop(self, token: float) -> float:
        self.synchronize()
        return self.now() - token


class CpuClock:
    """CPU seconds of this process (`time.process_time`): for host-only work on a shared machine, where other jobs
    stretch wall time unevenly but not this process's CPU time."""

    name = "cpu"

    def start(self) -> float:
        return time.process_time()

    def stop(self, token: float) -> float:
        return time.process_time() - token
