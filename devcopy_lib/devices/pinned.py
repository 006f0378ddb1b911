"""Pinned (page-locked) host memory: allocation as NumPy arrays, and a registry of pinned address ranges.

Copies ask the registry whether a host range is pinned (then the DMA engine reads it directly) or pageable (then it
goes through the staging pipeline). A range leaves the registry when its array is garbage-collected.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    from typing_extensions import Buffer

Memory = TypeVar("Memory", bound="Buffer")  # what a raw allocation returns: host memory with the buffer protocol


class PinnedRegistry:
    """Sorted, thread-safe set of live pinned ranges [start, end)."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: dict[int, int] = {}
        self._lock = threading.Lock()

    def add(self, start: int, nbytes: int) -> None:
        with self._lock:
            if start not in self._ends:
                bisect.insort(self._starts, start)
            self._ends[start] = start + nbytes

    def remove(self, start: int) -> None:
        with self._lock:
            if self._ends.pop(start, None) is not None:
                del self._starts[bisect.bisect_left(self._starts, start)]

    def contains(self, address: int, nbytes: int) -> bool:
        """True when [address, address + nbytes) lies inside one registered range."""
        starts = self._starts
        i = bisect.bisect_right(starts, address) - 1
        if i < 0:
            return False
        try:
            return address + nbytes <= self._ends[starts[i]]
        except (KeyError, IndexError):  # removed concurrently
            return False

    def __len__(self) -> int:
        return len(self._starts)


def tracked_array(
    raw_alloc: Callable[[int], Memory],
    address_of: Callable[[Memory], int],
    nbytes: int,
    alignment: int,
    registry: PinnedRegistry,
) -> np.ndarray:
    """A uint8 array of `nbytes` over memory from `raw_alloc`, aligned, registered while the array lives."""
    size = max(nbytes + alignment, 1)
    memory = raw_alloc(size)
    start = address_of(memory)
    full = np.frombuffer(memoryview(memory), dtype=np.uint8, count=size)  # keeps `memory` alive
    registry.add(start, size)
    weakref.finalize(full, registry.remove, start)
    skip = (-start) % alignment
    return full[skip : skip + nbytes]
