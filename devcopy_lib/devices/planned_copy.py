"""`PlannedCopy`: a host<->device copy whose pointers, capacity and device index were validated once, at load.

A loaded method repeats the same copies between the same planned buffers on every call; `DeviceAllocator.planned_copy`
runs the public copy's checks once and hands back this descriptor, whose call re-checks only what a call can change
(the byte count, a whole number within the validated capacity, and that the device buffer is still live, marking it
busy in the allocator's `LiveBlocks` for the copy as the public copies do) and counts through the allocator's public
`count_copy`, exactly as `copy_host_to_device` / `copy_device_to_host` count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..names import Direction
from .errors import InvalidArgumentError
from .host_buffers import HostBuffer, check_count
from .live_blocks import LiveBlocks
from .pointers import DevicePtr
from .stats import CopyRecord
from .validation import Topology, start_copy

Transfer = Callable[[int], object]  # `transfer(nbytes)` moves the bytes; what it returns is ignored
CountCopy = Callable[[str, CopyRecord], None]  # `DeviceAllocator.count_copy`
TransferFor = Callable[[str, DevicePtr, int, int, int], Transfer]  # a backend's `_planned_transfer`


class PlannedCopy:
    """One validated copy: `copy(nbytes)` moves `nbytes` (<= `capacity`) between `host` and `ptr` on `index`."""

    __slots__ = ("direction", "ptr", "host", "address", "capacity", "index", "_blocks", "_count", "_transfer", "_full")

    def __init__(
        self,
        blocks: LiveBlocks,
        count: CountCopy,
        direction: str,
        ptr: DevicePtr,
        host: Any,
        address: int,
        capacity: int,
        index: int,
        transfer: Transfer,
    ) -> None:
        self.direction, self.ptr, self.host = direction, ptr, host
        self.address, self.capacity, self.index = address, capacity, index
        self._blocks, self._count, self._transfer = blocks, count, transfer
        self._full = self._record(capacity)  # the record of a full-size copy, the same on every call

    def _record(self, nbytes: int) -> CopyRecord:
        """The statistics record of one call moving `nbytes`."""
        if self.direction == Direction.H2D:
            return CopyRecord(self.ptr, self.host, nbytes, self.index)
        return CopyRecord(self.host, self.ptr, nbytes, self.index)

    def __call__(self, nbytes: int) -> None:
        if nbytes.__class__ is not int or not 0 <= nbytes <= self.capacity:
            nbytes = self._checked(nbytes)
        blocks, block = self._blocks, self.ptr.block
        marker = blocks.pin(block, self.direction)  # refused once the buffer was freed
        try:
            if nbytes:
                self._transfer(nbytes)
        finally:
            blocks.unpin(block, marker)
        # counted once it succeeded, as the public copies count
        self._count(self.direction, self._full if nbytes == self.capacity else self._record(nbytes))

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
    topology: Topology,
    blocks: LiveBlocks,
    count: CountCopy,
    transfer_for: TransferFor,
    direction: str,
    ptr: DevicePtr,
    host: HostBuffer,
    capacity: int,
    index: int,
) -> PlannedCopy:
    """Validate once a copy a loaded method repeats ("h2d": host -> ptr, "d2h": ptr -> host, up to `capacity` bytes
    on device `index`) with the public copies' checks, and return the `PlannedCopy` whose calls skip them, running
    the backend's `transfer_for(direction, ptr, address, capacity, index)`."""
    if direction not in (Direction.H2D, Direction.D2H):
        raise InvalidArgumentError(f"planned_copy: direction must be 'h2d' or 'd2h', got {direction!r}")
    capacity, index, address = start_copy(
        topology,
        blocks,
        f"planned_copy ({direction})",
        ptr,
        host,
        capacity,
        index,
        writable=direction == Direction.D2H,
        count_name="capacity",
    )
    transfer = transfer_for(direction, ptr, address, capacity, index)
    return PlannedCopy(blocks, count, direction, ptr, host, address, capacity, index, transfer)
