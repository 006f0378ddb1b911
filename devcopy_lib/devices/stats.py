"""Copy statistics every allocator keeps: the counters and last-call records of ExecuTorch's mock CUDA allocator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..names import Direction
from .d2d_routing import HOST_ROUTE, PEER_ROUTE
from .host_registration import RegistrationStats

_H2D = Direction.H2D  # read once: an enum attribute costs a lookup on every copy


@dataclass
class CopyRecord:
    """The last copy in one direction, like ExecuTorch's mock allocator records it."""

    dst: Any = None
    src: Any = None
    size: int = 0
    index: int = 0


@dataclass
class AllocatorStats:
    """Counters kept by every allocator (names follow ExecuTorch's mock CUDA allocator)."""

    allocate_count: int = 0
    deallocate_count: int = 0
    h2d_count: int = 0
    d2h_count: int = 0
    h2d_bytes: int = 0
    d2h_bytes: int = 0
    live_bytes: int = 0
    peak_bytes: int = 0
    last_h2d: CopyRecord = field(default_factory=CopyRecord)
    last_d2h: CopyRecord = field(default_factory=CopyRecord)
    d2d_count: int = 0  # copy_device_to_device calls (devcopy's addition), however they went
    d2d_bytes: int = 0  # bytes moved directly device to device (peer path, no host hop)
    d2d_host_hops: int = 0  # d2d calls that went through host memory (each also counts one D2H and one H2D)
    last_d2d: CopyRecord = field(default_factory=CopyRecord)
    host_registration: RegistrationStats = field(default_factory=RegistrationStats)  # reused pageable buffers

    def count_allocate(self, nbytes: int) -> None:
        """Count one allocation of `nbytes` now live (the caller holds the allocator's lock)."""
        self.allocate_count += 1
        self.live_bytes += nbytes
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def count_copy(self, direction: str, record: CopyRecord) -> None:
        """Count one finished "h2d" or "d2h" copy and keep it as the last one (the caller holds the allocator's
        lock)."""
        if direction == _H2D:
            self.last_h2d = record
        else:
            self.last_d2h = record
        self.count_call(direction, record.dst, record.src, record.size, record.index)

    def count_call(self, direction: str, dst: Any, src: Any, nbytes: int, index: int) -> None:
        """`count_copy` of a copy given by its parts, keeping the last record when this call repeats it (the same
        buffers, size and device): a copy repeated in a loop allocates no record (the caller holds the lock)."""
        if direction == _H2D:
            self.h2d_count += 1
            self.h2d_bytes += nbytes
            last = self.last_h2d
            if not (last.dst is dst and last.src is src and last.size == nbytes and last.index == index):
                self.last_h2d = CopyRecord(dst, src, nbytes, index)
        else:
            self.d2h_count += 1
            self.d2h_bytes += nbytes
            last = self.last_d2h
            if not (last.dst is dst and last.src is src and last.size == nbytes and last.index == index):
                self.last_d2h = CopyRecord(dst, src, nbytes, index)

    def count_d2d(self, how: str, record: CopyRecord) -> None:
        """Count one finished device-to-device copy that went `how` (a route of d2d_routing; the caller holds the
        allocator's lock)."""
        self.d2d_count += 1
        self.d2d_bytes += record.size if how == PEER_ROUTE else 0
        self.d2d_host_hops += how == HOST_ROUTE
        self.last_d2d = record
