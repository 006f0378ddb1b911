"""What is timed on the simulated accelerator (wall clock only): NumPy's copyto of the same bytes, and devcopy's
allocator path."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from .clocks import WallClock
from .harness import Case


class SimulatedBench:
    """One size's buffers at a time for a `SimulatedCudaAllocator`; host memory is pageable only."""

    device = "simulated accelerator (host memory, not a GPU)"
    directions, memories = ("h2d", "d2h"), ("pageable",)  # what it can time, and why not the rest
    limits = "the simulated accelerator copies pageable host memory one way at a time: pinned and both need CUDA"

    def __init__(self, allocator: Any) -> None:
        self.alloc = allocator
        self._size, self._bufs = None, None

    def clocks(self) -> dict:
        return {"wall": WallClock()}

    def cases(self, n: int, directions, memories) -> list[Case]:
        return [
            Case(method, d, "pageable", n, partial(build, d, n), clocks=("wall",))
            for d in directions
            if d in self.directions and "pageable" in memories
            for method, build in (("numpy copyto", self._copyto), ("devcopy allocator", self._allocator))
        ]

    def release(self) -> None:
        if self._bufs is not None:
            self.alloc.deallocate(self._bufs[0])
        self._size, self._bufs = None, None

    def _buffers(self, n: int):
        if self._size != n:
            self.release()
            self._size = n
            self._bufs = (self.alloc.allocate(n), np.full(n, 0xA5, np.uint8), np.zeros(n, np.uint8))
        return self._bufs

    def _copyto(self, direction: str, n: int):
        _, src, dst = self._buffers(n)
        return partial(np.copyto, dst, src)

    def _allocator(self, direction: str, n: int):
        dev, src, dst = self._buffers(n)
        if direction == "h2d":
            return partial(self.alloc.copy_host_to_device, dev, src, n)
        return partial(self.alloc.copy_device_to_host, dst, dev, n)
