"""`PlannedCopy`: a host<->device copy whose pointers, capacity and device index were validated once, at load.

A loaded method repeats the same copies between the same planned buffers on every call; `DeviceAllocator.
planned_copy` runs the public copy's checks once and hands back this descriptor, whose call re-checks only what a
call can change (the byte count, within the validated capacity, and that the device buffer is still live) and keeps
the allocator's statistics exactly as `copy_host_to_device` / `copy_device_to_host` do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .allocator import CopyRecord, DevicePtr


class PlannedCopy:
    """One validated copy: `copy(nbytes)` moves `nbytes` (<= `capacity`) between `host` and `ptr` on `index`."""

    __slots__ = ("allocator", "direction", "ptr", "host", "address", "capacity", "index", "_transfer", "_full")

    def __init__(
        self,
        allocator: Any,
        direction: str,
        ptr: DevicePtr,
        host: Any,
        address: int,
        capacity: int,
        index: int,
        transfer: Callable[[int], None],
    ) -> None:
        self.allocator, self.direction, self.ptr, self.host = allocator, direction, ptr, host
        self.address, self.capacity, self.index, self._transfer = address, capacity, index, transfer
        self._full = self._record(capacity)  # the record of a full-size copy, the same on every call

    def _record(self, nbytes: int) -> CopyRecord:
        if self.direction == "h2d":
            return CopyRecord(self.ptr, self.host, nbytes, self.index)
        return CopyRecord(self.host, self.ptr, nbytes, self.index)

    def __call__(self, nbytes: int) -> None:
        if not 0 <= nbytes <= self.capacity or self.ptr.block.freed:
            raise ValueError(
                f"planned {self.direction} copy of {nbytes} bytes: validated for 0..{self.capacity} "
                f"bytes of a live buffer ({self.ptr!r}, freed={self.ptr.block.freed}); "
                "re-validate through copy_host_to_device / copy_device_to_host"
            )
        if nbytes:
            self._transfer(nbytes)
        record = self._full if nbytes == self.capacity else self._record(nbytes)
        with self.allocator._lock:  # counted once it succeeded, as the public copies count
            self.allocator.stats.count_copy(self.direction, record)

    def __repr__(self) -> str:
        return f"PlannedCopy({self.direction}, {self.ptr!r}, host 0x{self.address:x}, <= {self.capacity} bytes)"
