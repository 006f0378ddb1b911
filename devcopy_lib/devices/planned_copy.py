"""`PlannedCopy`: a host<->device copy whose pointers, capacity and device index were validated once, at load.

A loaded method repeats the same copies between the same planned buffers on every call; `plan_copy` (behind
`DeviceAllocator.planned_copy`) runs the public copy's checks once and hands back this descriptor, whose call
re-checks only what a call can change (the byte count, a whole number within the validated capacity, and that the
device buffer is still live, marking it busy for the copy as the public copies do) and keeps the allocator's
statistics exactly as `copy_host_to_device` / `copy_device_to_host` do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..names import Direction
from .errors import InvalidArgumentError
from .host_buffers import HostBuffer, check_count
from .pointers import DeviceBlock, DevicePtr
from .stats import CopyRecord

Transfer = Callable[[int], object]  # `transfer(nbytes)` moves the bytes; what it returns is ignored


class CopyPlanner(Protocol):
    """What planning needs of an allocator (a `DeviceAllocator` has it all): the public copies' checks, the backend's
    transfer for a validated copy, and the counters."""

    def _start_copy(
        self, what: str, device: Any, host: Any, nbytes: int, index: int, *, writable: bool, count_name: str = "nbytes"
    ) -> tuple[int, int, int]: ...
    def _planned_transfer(
        self, direction: str, ptr: DevicePtr, address: int, capacity: int, index: int
    ) -> Transfer: ...
    def _pin(self, block: DeviceBlock, what: str) -> None: ...
    def _unpin(self, block: DeviceBlock) -> None: ...
    def count_copy(self, direction: str, record: CopyRecord) -> None: ...


class PlannedCopy:
    """One validated copy: `copy(nbytes)` moves `nbytes` (<= `capacity`) between `host` and `ptr` on `index`."""

    __slots__ = ("allocator", "direction", "ptr", "host", "address", "capacity", "index", "_transfer", "_full")

    def __init__(
        self,
        allocator: CopyPlanner,
        direction: str,
        ptr: DevicePtr,
        host: Any,
        address: int,
        capacity: int,
        index: int,
        transfer: Transfer,
    ) -> None:
        self.allocator, self.direction, self.ptr, self.host = allocator, direction, ptr, host
        self.address, self.capacity, self.index, self._transfer = address, capacity, index, transfer
        self._full = self._record(capacity)  # the record of a full-size copy, the same on every call

    def _record(self, nbytes: int) -> CopyRecord:
        """The statistics record of one call moving `nbytes`."""
        if self.direction == Direction.H2D:
            return CopyRecord(self.ptr, self.host, nbytes, self.index)
        return CopyRecord(self.host, self.ptr, nbytes, self.index)

    def __call__(self, nbytes: int) -> None:
        if nbytes.__class__ is not int or not 0 <= nbytes <= self.capacity:
            nbytes = self._checked(nbytes)
        allocator, block = self.allocator, self.ptr.block
        allocator._pin(block, self.direction)  # refused once the buffer was freed
        try:
            if nbytes:
                self._transfer(nbytes)
        finally:
            allocator._unpin(block)
        # counted once it succeeded, as the public copies count
        allocator.count_copy(self.direction, self._full if nbytes == self.capacity else self._record(nbytes))

    def _checked(self, nbytes: int) -> int:
        """A byte count of another int type (NumPy's) within the capacity, or an InvalidArgumentError."""
        count = check_count("nbytes", nbytes)
        if count > self.capacity:
            raise InvalidArgumentError(
                f"planned {self.direction} copy of {count} bytes: validated for 0..{self.capacity} bytes of "
                f"{self.ptr!r}; re-validate through copy_host_to_device / copy_device_to_host"
            )
        return count

    def __repr__(self) -> str:
        return f"PlannedCopy({self.direction}, {self.ptr!r}, host 0x{self.address:x}, <= {self.capacity} bytes)"


def plan_copy(
    allocator: CopyPlanner, direction: str, ptr: DevicePtr, host: HostBuffer, capacity: int, index: int
) -> PlannedCopy:
    """Validate once a copy a loaded method repeats ("h2d": host -> ptr, "d2h": ptr -> host, up to `capacity` bytes
    on device `index`) with the public copies' checks, and return the `PlannedCopy` whose calls skip them."""
    if direction not in (Direction.H2D, Direction.D2H):
        raise InvalidArgumentError(f"planned_copy: direction must be 'h2d' or 'd2h', got {direction!r}")
    what = f"planned_copy ({direction})"
    writable = direction == Direction.D2H
    capacity, index, address = allocator._start_copy(
        what, ptr, host, capacity, index, writable=writable, count_name="capacity"
    )
    transfer = allocator._planned_transfer(direction, ptr, address, capacity, index)
    return PlannedCopy(allocator, direction, ptr, host, address, capacity, index, transfer)
