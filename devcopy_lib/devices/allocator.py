"""`DeviceAllocator`: the interface ExecuTorch's runtime uses to reach device memory, as a template over small hooks.

The public methods validate once (sizes, alignment, index, null pointers, bounds), keep the statistics, and retry an
allocation once after flushing caches. A backend implements the hooks: the device topology (`device_count`,
`current_index`), memory (`_allocate`, `_free`), copies (`_copy_in`, `_copy_out`) and device code's view
(`_device_view`); optionally `_trim`, `_close`, `_copy_in_async` / `_copy_out_async` (stream-ordered copies; by
default they run synchronously), `_planned_transfer` (a faster path for a validated copy) and, with
`capabilities.peer_copy`, `_copy_peer` + `_peer_access` for direct device-to-device copies.

The pieces live by job: `pointers` (DeviceBlock, DevicePtr), `stats` (counters), `host_buffers` (host-side checks),
`capabilities` (what a backend can do), `d2d_routing` (peer or host hop) and `planned_copy` (pre-validated copies).
This module re-exports their names for code that imports them from here.
"""

from __future__ import annotations

import abc
import contextlib
import math
import threading
from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np

from ..names import CURRENT_DEVICE, Direction
from .capabilities import Capabilities, DeviceTimer
from .copy_engine import CopyTicket
from .d2d_routing import EMPTY_ROUTE, route_d2d
from .device import MAX_DEVICE_INDEX, Device, DeviceType
from .errors import DeviceUsageError, InvalidArgumentError, InvalidArgumentTypeError, OutOfDeviceMemory
from .host_buffers import (
    MAX_COUNT,
    HostBuffer,
    check_alignment,
    check_count,
    host_address,
    host_size,
    quick_host_address,
)
from .host_registration import HostRegistrations, RegistrationStats
from .planned_copy import PlannedCopy, Transfer, plan_copy
from .pointers import DeviceBlock, DevicePtr
from .stats import AllocatorStats, CopyRecord

__all__ = [
    "MAX_ALIGNMENT",
    "AllocatorStats",
    "Capabilities",
    "CopyRecord",
    "DeviceAllocator",
    "DeviceBlock",
    "DevicePtr",
    "DeviceTimer",
    "HostBuffer",
    "_check_count",
    "host_address",
]

MAX_ALIGNMENT = 256
_check_count = check_count  # the name other modules imported before the split
_get_ident = threading.get_ident
_H2D, _D2H = Direction.H2D, Direction.D2H  # read once: an enum attribute costs a lookup on every copy
_DONE = CopyTicket(None)  # what a synchronous copy path returns for an async call: already landed


def _device_of(ptr: Any) -> int:
    """The device index a stream-ordered copy runs on: its device pointer's (-1 for a bad one, refused later)."""
    return ptr.index if isinstance(ptr, DevicePtr) else CURRENT_DEVICE


class DeviceAllocator(abc.ABC):
    """Allocates device memory and copies between host and device; one per device type. An allocator owns what it
    made (its blocks, a copy engine): `close()` (or leaving a `with allocator:` block) frees them; using a closed
    allocator is an error. Counters count successful calls only. Safe to share between threads: the live set and
    the counters change under one lock (held for bookkeeping only, never during a copy). Every public call checks
    its pointers against the live set before any native call; a copy marks its buffers busy for its duration, and
    `deallocate` (or `close`) waits for the copies running on a buffer, refusing new ones from the moment it starts."""

    capabilities = Capabilities(real_device=False, device_clock=False, pinned_host=False)
    registrations: HostRegistrations | None = None  # the pageable-buffer registration cache (_use_host_registrations)
    _register_from = MAX_COUNT + 1  # copies of at least this many bytes go through `registrations`

    def __init__(self) -> None:
        self.stats = AllocatorStats()
        self._live: dict[int, DeviceBlock] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when a freed block's last copy ends
        self.closed = False

    def __enter__(self) -> DeviceAllocator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Free every live allocation and release what the backend owns (`_close`); a second call does nothing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for block in list(self._live.values()):
                if not (block.borrowed or block.freed):  # one another thread's deallocate is freeing: skipped
                    self._release(block)
        if self.registrations is not None:
            self.registrations.close()
        self._close()

    # ---- hooks a backend implements -------------------------------------------------------------------------
    @abc.abstractmethod
    def device_count(self) -> int | None:
        """How many device indices exist; None for any number (the simulated accelerator)."""

    @abc.abstractmethod
    def current_index(self) -> int:
        """The device index -1 stands for (cudaGetDevice)."""

    @abc.abstractmethod
    def _allocate(self, nbytes: int, index: int, alignment: int) -> DeviceBlock:
        """A new block of `nbytes` on device `index` (validated); MemoryError when the device is full."""

    @abc.abstractmethod
    def _free(self, block: DeviceBlock) -> None:
        """Give a live block's memory back (the caller forgot it already)."""

    @abc.abstractmethod
    def _copy_in(self, dst: DevicePtr, src_address: int, nbytes: int, index: int) -> None:
        """Copy `nbytes` (> 0, validated) from host address `src_address` to `dst`, running on device `index`."""

    @abc.abstractmethod
    def _copy_out(self, dst_address: int, src: DevicePtr, nbytes: int, index: int) -> None:
        """Copy `nbytes` (> 0, validated) from `src` to host address `dst_address`, running on device `index`."""

    @abc.abstractmethod
    def _device_view(self, ptr: DevicePtr, dtype: np.dtype[Any], shape: tuple[int, ...]) -> Any:
        """Device code's view of a validated span at `ptr` (see `device_array`)."""

    def _copy_in_async(self, dst: DevicePtr, src_address: int, nbytes: int, stream: Any) -> CopyTicket:
        """Enqueue `_copy_in` on `stream`; without an override the copy runs now and the ticket is done."""
        self._copy_in(dst, src_address, nbytes, dst.index)
        return _DONE

    def _copy_out_async(self, dst_address: int, src: DevicePtr, nbytes: int, stream: Any) -> CopyTicket:
        """Enqueue `_copy_out` on `stream`; without an override the copy runs now and the ticket is done."""
        self._copy_out(dst_address, src, nbytes, src.index)
        return _DONE

    def _trim(self, index: int) -> None:
        """Release cached memory before the one retry of a failed allocation (pools override this)."""
        return None  # nothing cached, owned or pending on a synchronous host-memory backend

    def _close(self) -> None:
        """Release backend resources (a copy engine's threads); called once by `close()`."""
        return None  # nothing cached, owned or pending on a synchronous host-memory backend

    def _peer_access(self, src_index: int, dst_index: int) -> bool:
        """Whether device `src_index` and `dst_index` (distinct) can copy directly; without an override: no."""
        return False

    def _copy_peer(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> None:
        """A direct device-to-device copy (cudaMemcpyPeerAsync), offered with `capabilities.peer_copy`."""
        raise NotImplementedError(f"{self.backend} has no direct device-to-device copy (capabilities.peer_copy)")

    def _planned_transfer(self, direction: str, ptr: DevicePtr, address: int, capacity: int, index: int) -> Transfer:
        """The transfer a PlannedCopy runs, `transfer(nbytes)`: the backend's copy hooks (a backend may return a
        faster direct path for what was validated)."""
        if direction == Direction.H2D:
            return lambda nbytes: self._copy_in(ptr, address, nbytes, index)
        return lambda nbytes: self._copy_out(address, ptr, nbytes, index)

    # ---- capabilities -----------------------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for every piece of device work enqueued on this backend's devices (synchronous backends: nothing)."""
        return None  # nothing cached, owned or pending on a synchronous host-memory backend

    def event_timer(self) -> DeviceTimer | None:
        """A timer on the device clock for work on the current stream, or None where the backend has no clock."""
        return None

    def is_pinned(self, host: Any, nbytes: int | None = None) -> bool:
        """Whether `nbytes` of a host buffer (None: all of it) are page-locked, so copies with it skip staging."""
        host_size(host, nbytes, "is_pinned")
        return False

    def allocate_host(self, nbytes: int, alignment: int = 64) -> np.ndarray:
        """Host memory for planned CPU buffers and staging: a uint8 array (CUDA backends return pinned memory)."""
        check_count("nbytes", nbytes)
        check_alignment(alignment, 1 << 12)
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        start = (-raw.ctypes.data) % alignment
        return raw[start : start + nbytes]

    def describe_devices(self) -> list[dict[str, str]]:
        """One row per device this backend sees: `{"device": "cuda:0", "name": ...}`."""
        count = self.device_count() or 1
        return [{"device": str(self.device(i)), "name": self.backend} for i in range(count)]

    # ---- public interface -----------------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        """The backend's name, for messages and reports (code asks `capabilities`, never the name)."""
        return type(self).__name__

    def device_type(self) -> DeviceType:
        """The device type this allocator serves (both backends play CUDA)."""
        return DeviceType.CUDA

    def device(self, index: int = CURRENT_DEVICE) -> Device:
        """The device `index` names (-1: the current one)."""
        return Device(self.device_type(), self._resolve_index(index))

    def allocate(self, nbytes: int, index: int = 0, alignment: int = 64) -> DevicePtr:
        """Allocate `nbytes` on device `index` (-1: current), aligned to `alignment`; 0 bytes gives a valid handle."""
        nbytes = check_count("nbytes", nbytes)
        self._check_open("allocate")
        check_alignment(alignment, MAX_ALIGNMENT)
        index = self._resolve_index(index)
        try:
            block = self._allocate(nbytes, index, alignment)
        except MemoryError:
            self._trim(index)
            try:
                block = self._allocate(nbytes, index, alignment)
            except MemoryError:
                raise OutOfDeviceMemory(
                    f"Out of device memory: could not allocate {nbytes} bytes on {self.device(index)} "
                    f"({self.stats.live_bytes} bytes live through {self.backend}). Free buffers or use smaller sizes."
                ) from None
        with self._lock:
            self._live[block.serial] = block
            s = self.stats
            s.allocate_count += 1
            s.live_bytes += nbytes
            s.peak_bytes = max(s.peak_bytes, s.live_bytes)
        return DevicePtr(block)

    def deallocate(self, ptr: DevicePtr, index: int = CURRENT_DEVICE) -> None:
        """Free an allocation returned by `allocate` (the pointer at offset 0); `index` >= 0 must be its device."""
        self._resolve_index(index)
        with self._lock:  # two threads freeing one pointer: exactly one succeeds
            block = self._own_block(ptr, "deallocate")
            self._check_index(ptr, index, "deallocate")
            if ptr.offset:
                raise InvalidArgumentError(
                    f"deallocate: pointer is {ptr.offset} bytes into its allocation; pass the allocated pointer"
                )
            if block.borrowed:
                raise InvalidArgumentError(f"deallocate: {ptr!r} is borrowed memory (borrow()); its owner frees it")
            self._release(block)
            self.stats.deallocate_count += 1

    def _release(self, block: DeviceBlock) -> None:
        """Forget a live block, wait for the copies still running on it, then free it (the caller holds the lock;
        waiting lets it go, and the block is already refused to new copies)."""
        self._retire(block)
        self._free(block)
        self.stats.live_bytes -= block.nbytes

    def _retire(self, block: DeviceBlock) -> None:
        """Take `block` out of the live set (new copies are refused from here) and wait until no copy uses it: the
        synchronous ones running in other threads, then the stream-ordered ones enqueued on it. Holds the lock."""
        del self._live[block.serial]
        block.freed = True
        me = threading.get_ident()
        # a copy that started before `freed` was set: wait for it (see `_pin`). A marker of this thread is no running
        # copy (this thread is here): an interrupt (Ctrl-C, a stop signal) left it between `_pin` and `_unpin`.
        while any(thread != me for thread in block.running):
            self._idle.wait()
        for ticket in block.pending:
            ticket.wait()
        block.pending = []

    def release_cached(self, index: int = CURRENT_DEVICE) -> None:
        """Give memory a backend caches (pools) on device `index` back to the system; live allocations stay."""
        self._check_open("release_cached")
        self._trim(self._resolve_index(index))

    def copy_host_to_device(self, dst: DevicePtr, src: HostBuffer, nbytes: int, index: int = CURRENT_DEVICE) -> None:
        """Copy `nbytes` from host `src` to device `dst`; `index` >= 0 must be `dst`'s device, -1 the current one."""
        address = self._quick_copy_checks(dst, src, nbytes, index, False)
        if not address:  # anything but the common case: every check in full, each with its message
            nbytes, index, address = self._start_copy("copy_host_to_device", dst, src, nbytes, index, writable=False)
        elif index == CURRENT_DEVICE:
            index = self.current_index()
        block, me = dst.block, _get_ident()
        block.running.append(me)  # the block is busy: `_pin`'s protocol, inlined on this latency-bound path
        try:
            if block.freed:
                self._refuse_freed(_H2D)
            if nbytes >= self._register_from:  # a buffer the registration cache may take (large, pageable)
                self._copy_registered(_H2D, dst, src, address, nbytes, index)
            elif nbytes:
                self._copy_in(dst, address, nbytes, index)
        finally:
            self._end_pin(block, me)
        with self._lock:  # counted once it succeeded
            self.stats.count_call(_H2D, dst, src, nbytes, index)

    def copy_device_to_host(self, dst: HostBuffer, src: DevicePtr, nbytes: int, index: int = CURRENT_DEVICE) -> None:
        """Copy `nbytes` from device `src` to host `dst`; `index` >= 0 must be `src`'s device, -1 the current one."""
        address = self._quick_copy_checks(src, dst, nbytes, index, True)
        if not address:
            nbytes, index, address = self._start_copy("copy_device_to_host", src, dst, nbytes, index, writable=True)
        elif index == CURRENT_DEVICE:
            index = self.current_index()
        block, me = src.block, _get_ident()
        block.running.append(me)  # the block is busy: `_pin`'s protocol, inlined on this latency-bound path
        try:
            if block.freed:
                self._refuse_freed(_D2H)
            if nbytes >= self._register_from:  # a buffer the registration cache may take (large, pageable)
                self._copy_registered(_D2H, src, dst, address, nbytes, index)
            elif nbytes:
                self._copy_out(address, src, nbytes, index)
        finally:
            self._end_pin(block, me)
        with self._lock:
            self.stats.count_call(_D2H, dst, src, nbytes, index)

    def _copy_registered(
        self, direction: str, ptr: DevicePtr, host: HostBuffer, address: int, nbytes: int, index: int
    ) -> None:
        """A validated synchronous copy of a host buffer through the registration cache: registered in place (so
        copied as pinned) when the same storage came back, held registered until the copy ends."""
        cache = self.registrations
        entry = cache.acquire(host, nbytes) if cache is not None else None
        try:
            if direction == _H2D:
                self._copy_in(ptr, address, nbytes, index)
            else:
                self._copy_out(address, ptr, nbytes, index)
        finally:
            if cache is not None:
                cache.release(entry)

    def _use_host_registrations(self, cache: HostRegistrations | None) -> None:
        """Copy reused pageable host buffers through `cache` (None: never register); the CUDA backend sets one up
        from its EngineConfig, `stats.host_registration` shows what it did."""
        self.registrations = cache
        self._register_from = MAX_COUNT + 1 if cache is None else max(cache.min_bytes, 1)
        self.stats.host_registration = RegistrationStats() if cache is None else cache.stats

    def _quick_copy_checks(self, device: Any, host: Any, nbytes: Any, index: Any, writable: bool) -> int:
        """The host address of a copy when it is the common case that passes every check of `_start_copy` - a live
        DevicePtr of this allocator with room for `nbytes` > 0, index -1 or its device, a plain NumPy array
        holding the bytes - found in about a microsecond with no allocation; 0 for anything else (then
        `_start_copy` checks in full and names what is wrong)."""
        if nbytes.__class__ is not int or device.__class__ is not DevicePtr or index.__class__ is not int:
            return 0
        block = device.block
        if (
            self._live.get(block.serial) is not block
            or nbytes > block.nbytes - device.offset
            or (index != CURRENT_DEVICE and index != block.index)
        ):
            return 0
        return quick_host_address(host, nbytes, writable)

    def copy_host_to_device_async(self, dst: DevicePtr, src: HostBuffer, nbytes: int, stream: Any = None) -> CopyTicket:
        """Enqueue H2D on `stream` (None: the current one) on `dst`'s device; `src` must stay unchanged until the
        ticket is done. Checked as `copy_host_to_device` checks; counted once enqueued."""
        what = "copy_host_to_device_async"
        nbytes, index, address = self._start_copy(what, dst, src, nbytes, _device_of(dst), writable=False)
        with _Busy(self, dst.block, Direction.H2D, CopyRecord(dst, src, nbytes, index)) as busy:
            if nbytes:
                busy.ticket = self._copy_in_async(dst, address, nbytes, stream)
        return busy.ticket

    def copy_device_to_host_async(self, dst: HostBuffer, src: DevicePtr, nbytes: int, stream: Any = None) -> CopyTicket:
        """Enqueue D2H on `stream` (None: the current one) on `src`'s device; read `dst` only once the ticket is
        done. Checked as `copy_device_to_host` checks; counted once enqueued."""
        what = "copy_device_to_host_async"
        nbytes, index, address = self._start_copy(what, src, dst, nbytes, _device_of(src), writable=True)
        with _Busy(self, src.block, Direction.D2H, CopyRecord(dst, src, nbytes, index)) as busy:
            if nbytes:
                busy.ticket = self._copy_out_async(address, src, nbytes, stream)
        return busy.ticket

    def count_copy(self, direction: str, record: CopyRecord) -> None:
        """Count one finished (or enqueued) "h2d" / "d2h" copy: every copy path counts through here."""
        with self._lock:
            self.stats.count_copy(direction, record)

    def _start_copy(
        self, what: str, device: Any, host: Any, nbytes: int, index: int, *, writable: bool, count_name: str = "nbytes"
    ) -> tuple[int, int, int]:
        """The checks every copy starts with, in ExecuTorch's order: null pointers (before the zero-byte shortcut),
        the size, the index; then the device pointer (live, even for 0 bytes; the span fits; on device `index`) and
        the host buffer (it holds the bytes; writable for a destination). Returns (nbytes, the resolved index, the
        host address); the caller marks the buffer busy for the copy and counts the call once it succeeded."""
        if device is None or host is None or (isinstance(host, int) and not isinstance(host, bool) and host == 0):
            raise InvalidArgumentError(f"{what}: null pointer (device or host); pass a DevicePtr and a host buffer")
        nbytes = check_count(count_name, nbytes)
        resolved = self._resolve_index(index)
        self._check_span(device, nbytes, what)
        self._check_index(device, index, what)
        return nbytes, resolved, host_address(host, nbytes, writable=writable, what=what)

    def _pin(self, block: DeviceBlock, what: str) -> None:
        """Mark a copy running on `block`, refusing it when the block was freed since it was checked (`what`: the
        copy, for the message). No lock on this path: the marker goes in first, then `freed` is read, while
        `_retire` sets `freed` first, then reads the markers; list appends and pops are atomic, so either the copy
        sees `freed` or `_retire` sees the copy and waits for it."""
        running = block.running
        running.append(_get_ident())
        if block.freed:
            running.remove(_get_ident())
            self._refuse_freed(what)

    def _refuse_freed(self, what: str) -> NoReturn:
        """The error of a copy (`what`) on a block freed since it was checked: the allocator closed, or a use after
        free."""
        self._check_open(what)
        raise DeviceUsageError(f"{what} copy: the buffer was already freed (use after free); allocate anew")

    def _unpin(self, block: DeviceBlock) -> None:
        """The copy on `block` ended: take its marker out and wake a `_retire` waiting for the block."""
        self._end_pin(block, _get_ident())

    def _end_pin(self, block: DeviceBlock, marker: int) -> None:
        """Take a copy's marker off `block` and wake a `_retire` waiting for the block."""
        block.running.remove(marker)
        if block.freed:
            with self._lock:
                self._idle.notify_all()

    def _count_success(self, direction: str, record: CopyRecord, block: DeviceBlock, ticket: CopyTicket) -> None:
        """Count a successful copy and keep its ticket while the stream-ordered copy is pending (before the copy's
        marker goes, so a `_retire` never misses it)."""
        with self._lock:
            if ticket is not _DONE:
                if len(block.pending) > 7:
                    block.pending = [t for t in block.pending if not t.done]
                block.pending.append(ticket)
            self.stats.count_copy(direction, record)

    def can_access_peer(self, a: int, b: int) -> bool:
        """Whether device `a`'s memory can be copied directly to or from device `b` (same device: always)."""
        a, b = self._resolve_index(a), self._resolve_index(b)
        return self.capabilities.peer_copy and (a == b or bool(self._peer_access(a, b)))

    def copy_device_to_device(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> str:
        """Copy `nbytes` from device `src` to device `dst` (each pointer names its device); returns how: "peer"
        (direct), "host" (D2H into staging host memory, then H2D: no peer path or no peer access) or "empty"."""
        what = "copy_device_to_device"
        if dst is None or src is None:
            raise InvalidArgumentError(f"{what}: null pointer (dst or src); pass two DevicePtrs")
        nbytes = check_count("nbytes", nbytes)
        self._check_span(src, nbytes, f"{what} (src)")
        self._check_span(dst, nbytes, f"{what} (dst)")
        self._pin(src.block, Direction.D2D)
        try:
            with _Busy(self, dst.block, None, None):
                how = EMPTY_ROUTE if nbytes == 0 else route_d2d(self, dst, src, nbytes)
        finally:
            self._unpin(src.block)
        with self._lock:
            self.stats.count_d2d(how, CopyRecord(dst, src, nbytes, dst.index))
        return how

    def planned_copy(
        self, direction: str, ptr: DevicePtr, host: HostBuffer, capacity: int, index: int = CURRENT_DEVICE
    ) -> PlannedCopy:
        """Validate once a copy a loaded method repeats ("h2d": host -> ptr, "d2h": ptr -> host, up to `capacity`
        bytes on device `index`) and return a `PlannedCopy` whose calls skip these checks (devices/planned_copy.py)."""
        return plan_copy(self, direction, ptr, host, capacity, index)

    def device_array(self, ptr: DevicePtr, dtype: Any, shape: tuple[int, ...], index: int | None = None) -> Any:
        """Device code's zero-copy view of `shape` elements of NumPy `dtype` at `ptr` (a delegate's input/output):
        a NumPy array on the simulated device, a CuPy array on CUDA. Contract: the span must lie inside a live
        allocation of this allocator; with `index`, `ptr` must live on device `index` (device code on cuda:1 cannot
        read cuda:0 memory); the view is valid until `ptr` is freed; host code never reads it (that needs a D2H)."""
        dtype, shape = _view_dtype(dtype), _view_shape(shape)
        self._check_span(ptr, math.prod(shape) * dtype.itemsize, "device_array")
        if index is not None:
            self._resolve_index(index)
            self._check_index(ptr, index, "device_array")
        return self._device_view(ptr, dtype, shape)

    @contextlib.contextmanager
    def borrow(self, address: int, nbytes: int, index: int, owner: Any) -> Iterator[DevicePtr]:
        """A DevicePtr over device memory this allocator did not allocate (a PyTorch CUDA tensor's, kept alive by
        `owner`), valid inside the with-block so copies can reach it; never freed here, not counted as allocated.
        The span must lie inside the memory `owner` holds (`_owner_span`); leaving the block waits for the copies
        still running on it."""
        self._check_open("borrow")
        if not isinstance(address, int) or isinstance(address, bool) or address <= 0:
            raise InvalidArgumentError(f"borrow: address must be an int > 0, got {address!r}; pass tensor.data_ptr()")
        nbytes = check_count("nbytes", nbytes)
        index = self._resolve_index(index)
        handle = self._borrowed_handle(address, nbytes, index, owner)
        block = DeviceBlock(index, nbytes, address, handle, borrowed=True)
        with self._lock:
            self._live[block.serial] = block
        try:
            yield DevicePtr(block)
        finally:
            with self._lock:
                if not block.freed:
                    self._retire(block)

    def _borrowed_handle(self, address: int, nbytes: int, index: int, owner: Any) -> Any:
        """What a borrowed block keeps (the owner) once `[address, address + nbytes)` is known to lie inside the
        device memory `owner` holds on device `index`: a CUDA torch tensor or an object with
        `__cuda_array_interface__` (a CuPy array). A backend whose device memory is something else overrides it."""
        start, size, where = _device_span(owner)
        if where is not None and where != index:
            raise InvalidArgumentError(
                f"borrow: owner lives on cuda:{where} but index {index} was passed; pass {where}"
            )
        check_inside_owner(address, nbytes, start, size)
        return owner

    def live_allocations(self) -> int:
        """How many allocations (and borrowed spans) are live."""
        return len(self._live)

    # ---- validation helpers ---------------------------------------------------------------------------------
    def _resolve_index(self, index: int) -> int:
        """A valid device index for `index` (-1: the current one), or InvalidArgumentError naming the valid range."""
        if not isinstance(index, int) or isinstance(index, bool) or not CURRENT_DEVICE <= index <= MAX_DEVICE_INDEX:
            raise (InvalidArgumentError if isinstance(index, int) else InvalidArgumentTypeError)(
                f"device index must be an int in -1..{MAX_DEVICE_INDEX} (-1: the current device), got {index!r}"
            )
        if index == CURRENT_DEVICE:
            return self.current_index()
        count = self.device_count()
        if count is not None and index >= count:
            raise InvalidArgumentError(
                f"device index {index} is out of range: {self.backend} sees {count} device(s), valid 0..{count - 1}"
            )
        return index

    def _check_open(self, what: str) -> None:
        """Refuse work on a closed allocator."""
        if self.closed:
            raise DeviceUsageError(
                f"{what}: this {self.backend} allocator was closed; make a new one (make_allocator())"
            )

    def _check_index(self, ptr: DevicePtr, index: int, what: str) -> None:
        """An explicit device index must be the one `ptr` lives on (-1, the current device, is not checked: on CUDA
        a copy reaches any device's memory through the unified address space)."""
        if index != CURRENT_DEVICE and index != ptr.block.index:
            raise InvalidArgumentError(
                f"{what}: {ptr!r} lives on cuda:{ptr.block.index} but index {index} was passed; pass "
                f"{ptr.block.index} (the pointer's device) or -1"
            )

    def _own_block(self, ptr: DevicePtr, what: str) -> DeviceBlock:
        """The live block of `ptr`, or an error (not a DevicePtr, freed, or another allocator's)."""
        if not isinstance(ptr, DevicePtr):
            raise InvalidArgumentTypeError(
                f"{what}: expected a DevicePtr from allocate(), got {type(ptr).__name__}"
                + (" (an int is never taken as a device address)" if isinstance(ptr, int) else "")
            )
        if ptr.block.freed:
            self._check_open(what)
            raise DeviceUsageError(f"{what}: {ptr!r} was already freed (use after free or double free)")
        if self._live.get(ptr.block.serial) is not ptr.block:
            raise DeviceUsageError(f"{what}: {ptr!r} was not allocated by this {self.backend}; use its own allocator")
        return ptr.block

    def _check_span(self, ptr: DevicePtr, nbytes: int, what: str) -> None:
        """`ptr` is live and `nbytes` from it fit in its allocation."""
        self._own_block(ptr, what)
        if nbytes > ptr.nbytes:
            raise DeviceUsageError(
                f"{what}: {nbytes} bytes do not fit in the device allocation ({ptr.nbytes} bytes from offset "
                f"{ptr.offset} of {ptr.block.nbytes}); copy at most {ptr.nbytes} bytes"
            )


class _Busy:
    """`with _Busy(allocator, block, direction, record):` runs one copy with `block` marked busy; on success the copy
    is counted (`direction` None: not counted here) and `ticket`, when the body set one, kept while pending."""

    __slots__ = ("allocator", "block", "direction", "record", "ticket")

    def __init__(self, allocator: DeviceAllocator, block: DeviceBlock, direction: str | None, record: Any) -> None:
        self.allocator, self.block, self.direction, self.record, self.ticket = (
            allocator,
            block,
            direction,
            record,
            _DONE,
        )

    def __enter__(self) -> _Busy:
        self.allocator._pin(self.block, self.direction or Direction.D2D)
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        try:
            if kind is None and self.direction is not None:
                self.allocator._count_success(self.direction, self.record, self.block, self.ticket)
        finally:  # an interrupt while counting still takes the marker out
            self.allocator._unpin(self.block)


def _view_dtype(dtype: Any) -> np.dtype[Any]:
    """A NumPy dtype device code can view bytes as (numeric, with a size), or an InvalidArgumentTypeError."""
    resolved: np.dtype[Any] | None
    try:
        resolved = np.dtype(dtype)
    except (TypeError, ValueError):
        resolved = None
    if dtype is None or resolved is None or resolved.hasobject or resolved.itemsize == 0:
        raise InvalidArgumentTypeError(
            f"device_array: dtype {dtype!r} is not a NumPy dtype of plain data; pass one like np.float32 or 'uint8'"
        )
    return resolved


def _view_shape(shape: Any) -> tuple[int, ...]:
    """`shape` as a tuple of ints >= 0 (an int is a 1-d shape), or an InvalidArgumentError naming it."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        items = tuple(dims)
    except TypeError:
        items = (None,)
    if any(not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 0 for d in items):
        raise InvalidArgumentError(
            f"device_array: shape must be ints >= 0, got {shape!r}; pass the view's sizes, like (4, 16)"
        )
    return tuple(int(d) for d in items)


def check_inside_owner(address: int, nbytes: int, start: int, size: int) -> int:
    """The offset of a borrowed span `[address, address + nbytes)` inside its owner's `[start, start + size)`, or an
    InvalidArgumentError: borrowing never reaches memory the owner does not hold."""
    if not start <= address or address + nbytes > start + size:
        raise InvalidArgumentError(
            f"borrow: {nbytes} bytes at 0x{address:x} are not inside the owner's memory (0x{start:x}, {size} bytes); "
            "borrow a span of the owner's own memory (its data pointer, at most its size)"
        )
    return address - start


def _device_span(owner: Any) -> tuple[int, int, int | None]:
    """(start, bytes, device index or None) of the device memory `owner` holds, or an InvalidArgumentTypeError."""
    if callable(getattr(owner, "untyped_storage", None)) and getattr(owner, "is_cuda", False):
        storage = owner.untyped_storage()
        return int(storage.data_ptr()), int(storage.nbytes()), owner.device.index
    try:
        interface = getattr(owner, "__cuda_array_interface__", None)
    except (TypeError, RuntimeError):  # a CPU torch tensor's property raises instead of being absent
        interface = None
    if isinstance(interface, dict) and isinstance(getattr(owner, "nbytes", None), int):
        device = getattr(getattr(owner, "device", None), "id", None)
        return int(interface["data"][0]), owner.nbytes, device if isinstance(device, int) else None
    raise InvalidArgumentTypeError(
        f"borrow: owner must hold the device memory (a CUDA torch tensor or a CuPy array), got "
        f"{type(owner).__name__}; pass the tensor whose memory you borrow"
    )
