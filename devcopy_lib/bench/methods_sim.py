"""What is timed on the simulated accelerator (wall clock only): NumPy's copyto of the same bytes, and devcopy's
allocator path."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from ..devices.allocator import DeviceAllocator
from ..devices.pointers import DevicePtr
from ..names import Direction
from .clocks import Clock, WallClock
from .harness import Case


class SimulatedBench:
    """One size's buffers at a time for a `SimulatedCudaAllocator`; host memory is pageable only."""

    device = "simulated accelerator (host memory, not a GPU)"
    directions, memories = (Direction.H2D, Direction.D2H), ("pageable",)  # what it can time, and why not the rest
    limits = "the simulated accelerator copies pageable host memory one way at a time: pinned and both need CUDA"

    def __init__(self, allocator: DeviceAllocator) -> None:
        self.alloc = allocator
        self._size: int | None = None
        self._bufs: tuple[DevicePtr, np.ndarray, np.ndarray] | None = None

    def clocks(self) -> dict[str, Clock]:
        """The wall clock only: the simulated accelerator has no device clock."""
        return {"wall": WallClock()}

    def cases(self, n: int, directions: Sequence[str], memories: Sequence[str]) -> list[Case]:
        """Every method in each direction it can time at size n (pageable memory only)."""
        return [
            Case(method, d, "pageable", n, partial(build, d, n), clocks=("wall",))
            for d in directions
            if d in self.directions and "pageable" in memories
            for method, build in (("numpy copyto", self._copyto), ("devcopy allocator", self._allocator))
        ]

    def release(self) -> None:
        """Free this size's device buffer."""
        if self._bufs is not None:
            self.alloc.deallocate(self._bufs[0])
        self._size, self._bufs = None, None

    def _buffers(self, n: int) -> tuple[DevicePtr, np.ndarray, np.ndarray]:
        """(device buffer, filled source, destination) of size n, made on first use (outside timing)."""
        if self._bufs is None or self._size != n:
            self.release()
            self._size = n
            self._bufs = (self.alloc.allocate(n), np.full(n, 0xA5, np.uint8), np.zeros(n, np.uint8))
        return self._bufs

    def _copyto(self, direction: str, n: int) -> Callable[[], object]:
        """NumPy copying the same bytes host to host: the floor of a host-memory copy."""
        _, src, dst = self._buffers(n)
        return partial(np.copyto, dst, src)

    def _allocator(self, direction: str, n: int) -> Callable[[], object]:
        """devcopy's public copy, every check and counter included."""
        dev, src, dst = self._buffers(n)
        if direction == Direction.H2D:
            return partial(self.alloc.copy_host_to_device, dev, src, n)
        return partial(self.alloc.copy_device_to_host, dst, dev, n)
