"""`DeviceAllocator`: the interface ExecuTorch's runtime uses to reach device memory - a backend's hooks with the
public calls composed around them.

A backend subclasses this and writes the hooks of `BackendHooks` only (`hooks.py`); each public call here is a few
lines over small parts, each in its own module: `validation` (indices, pointers and host buffers, checked once, in
ExecuTorch's order), `live_blocks` (the live set, copies marked busy, frees waiting for them), `stats` (the
counters), `host_registration` (reused pageable buffers registered in place), `planned_copy` (copies validated once
at load) and `d2d_routing` (peer copy or host hop). This module re-exports the names other code imports from here.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from typing import Any

from ..names import CURRENT_DEVICE, Direction
from .capabilities import Capabilities, DeviceTimer
from .copy_engine import CopyTicket
from .d2d_routing import EMPTY_ROUTE, route_d2d
from .device import Device, DeviceType
from .errors import InvalidArgumentError, OutOfDeviceMemory
from .hooks import DONE, BackendHooks
from .host_buffers import MAX_COUNT, HostBuffer, check_alignment, check_count, host_address
from .host_registration import HostRegistrations, RegistrationStats
from .live_blocks import LiveBlocks
from .planned_copy import PlannedCopy, plan_copy
from .pointers import DeviceBlock, DevicePtr
from .stats import AllocatorStats, CopyRecord
from .validation import (
    check_borrow_address,
    check_index,
    quick_copy_address,
    resolve_index,
    start_copy,
    view_dtype,
    view_shape,
)

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
    "host_address",
]

MAX_ALIGNMENT = 256
_H2D, _D2H = Direction.H2D, Direction.D2H  # read once: an enum attribute costs a lookup on every copy
_get_ident = threading.get_ident
_NAMES: dict[str, str] = {_H2D: "copy_host_to_device", _D2H: "copy_device_to_host"}


class DeviceAllocator(BackendHooks):
    """Allocates device memory and copies between host and device; one per device type. An allocator owns what it
    made (its blocks, a copy engine): `close()` (or leaving a `with allocator:` block) frees them; using a closed
    allocator is an error. Counters count successful calls only. Safe to share between threads: the live set and
    the counters change under one lock (held for bookkeeping only, never during a copy). Every public call checks
    its pointers against the live set before any native call; a copy marks its buffers busy for its duration, and
    `deallocate` (or `close`) waits for the copies running on a buffer, refusing new ones from the moment it starts.

    `registrations`: the cache that registers reused pageable host buffers in place (None: never register; the CUDA
    backend passes one, `stats.host_registration` shows what it did)."""

    def __init__(self, registrations: HostRegistrations | None = None) -> None:
        self.stats = AllocatorStats()
        self._blocks = LiveBlocks(self.backend)
        self.registrations = registrations
        # copies of at least this many bytes go through `registrations`
        self._register_from = MAX_COUNT + 1 if registrations is None else max(registrations.min_bytes, 1)
        self.stats.host_registration = RegistrationStats() if registrations is None else registrations.stats

    def __enter__(self) -> DeviceAllocator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        """Whether `close()` ran (every later call is refused)."""
        return self._blocks.closed

    def close(self) -> None:
        """Free every live allocation and release what the backend owns (`_close`); a second call does nothing."""
        blocks = self._blocks
        with blocks.lock:
            if blocks.closed:
                return
            blocks.closed = True
            for block in list(blocks.live.values()):
                if not (block.borrowed or block.freed):  # one another thread's deallocate is freeing: skipped
                    self._release(block)
        if self.registrations is not None:
            self.registrations.close()
        self._close()

    # ---- devices ----------------------------------------------------------------------------------------------
    def device_type(self) -> DeviceType:
        """The device type this allocator serves (both backends play CUDA)."""
        return DeviceType.CUDA

    def device(self, index: int = CURRENT_DEVICE) -> Device:
        """The device `index` names (-1: the current one)."""
        return Device(self.device_type(), resolve_index(self, index))

    def can_access_peer(self, a: int, b: int) -> bool:
        """Whether device `a`'s memory can be copied directly to or from device `b` (same device: always)."""
        a, b = resolve_index(self, a), resolve_index(self, b)
        return self.capabilities.peer_copy and (a == b or bool(self._peer_access(a, b)))

    def release_cached(self, index: int = CURRENT_DEVICE) -> None:
        """Give memory a backend caches (pools) on device `index` back to the system; live allocations stay."""
        self._blocks.check_open("release_cached")
        self._trim(resolve_index(self, index))

    # ---- memory -----------------------------------------------------------------------------------------------
    def allocate(self, nbytes: int, index: int = 0, alignment: int = 64) -> DevicePtr:
        """Allocate `nbytes` on device `index` (-1: current), aligned to `alignment`; 0 bytes gives a valid handle."""
        nbytes = check_count("nbytes", nbytes)
        self._blocks.check_open("allocate")
        check_alignment(alignment, MAX_ALIGNMENT)
        index = resolve_index(self, index)
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
        with self._blocks.lock:
            self._blocks.add(block)
            self.stats.count_allocate(nbytes)
        return DevicePtr(block)

    def deallocate(self, ptr: DevicePtr, index: int = CURRENT_DEVICE) -> None:
        """Free an allocation returned by `allocate` (the pointer at offset 0); `index` >= 0 must be its device."""
        resolve_index(self, index)
        blocks = self._blocks
        with blocks.lock:  # two threads freeing one pointer: exactly one succeeds
            block = blocks.own(ptr, "deallocate")
            check_index(ptr, index, "deallocate")
            if ptr.offset:
                raise InvalidArgumentError(
                    f"deallocate: pointer is {ptr.offset} bytes into its allocation; pass the allocated pointer"
                )
            if block.borrowed:
                raise InvalidArgumentError(f"deallocate: {ptr!r} is borrowed memory (borrow()); its owner frees it")
            self._release(block)
            self.stats.deallocate_count += 1

    def _release(self, block: DeviceBlock) -> None:
        """Retire a live block (wait for its copies), free it and count it (the caller holds the lock)."""
        self._blocks.retire(block)
        self._free(block)
        self.stats.live_bytes -= block.nbytes

    def live_allocations(self) -> int:
        """How many allocations (and borrowed spans) are live."""
        return len(self._blocks)

    @contextlib.contextmanager
    def borrow(self, address: int, nbytes: int, index: int, owner: Any) -> Iterator[DevicePtr]:
        """A DevicePtr over device memory this allocator did not allocate (a PyTorch CUDA tensor's, kept alive by
        `owner`), valid inside the with-block so copies can reach it; never freed here, not counted as allocated.
        The span must lie inside the memory `owner` holds (`_borrowed_handle`); leaving the block waits for the
        copies still running on it."""
        blocks = self._blocks
        blocks.check_open("borrow")
        address = check_borrow_address(address)
        nbytes = check_count("nbytes", nbytes)
        index = resolve_index(self, index)
        block = DeviceBlock(index, nbytes, address, self._borrowed_handle(address, nbytes, index, owner), borrowed=True)
        with blocks.lock:
            blocks.add(block)
        try:
            yield DevicePtr(block)
        finally:
            with blocks.lock:
                if not block.freed:
                    blocks.retire(block)

    def device_array(self, ptr: DevicePtr, dtype: Any, shape: tuple[int, ...], index: int | None = None) -> Any:
        """Device code's zero-copy view of `shape` elements of NumPy `dtype` at `ptr` (a delegate's input/output):
        a NumPy array on the simulated device, a CuPy array on CUDA. Contract: the span must lie inside a live
        allocation of this allocator; with `index`, `ptr` must live on device `index` (device code on cuda:1 cannot
        read cuda:0 memory); the view is valid until `ptr` is freed; host code never reads it (that needs a D2H)."""
        dtype, shape = view_dtype(dtype), view_shape(shape)
        self._blocks.check_span(ptr, math.prod(shape) * dtype.itemsize, "device_array")
        if index is not None:
            resolve_index(self, index)
            check_index(ptr, index, "device_array")
        return self._device_view(ptr, dtype, shape)

    # ---- copies -----------------------------------------------------------------------------------------------
    def copy_host_to_device(self, dst: DevicePtr, src: HostBuffer, nbytes: int, index: int = CURRENT_DEVICE) -> None:
        """Copy `nbytes` from host `src` to device `dst`; `index` >= 0 must be `dst`'s device, -1 the current one."""
        self._copy(_H2D, dst, src, nbytes, index)

    def copy_device_to_host(self, dst: HostBuffer, src: DevicePtr, nbytes: int, index: int = CURRENT_DEVICE) -> None:
        """Copy `nbytes` from device `src` to host `dst`; `index` >= 0 must be `src`'s device, -1 the current one."""
        self._copy(_D2H, dst, src, nbytes, index)

    def _copy(self, direction: str, dst: Any, src: Any, nbytes: int, index: int) -> None:
        """One synchronous copy either way (`direction`: `_H2D` or `_D2H`, the objects themselves): checked, its
        device buffer marked busy, moved by the backend's hook (through the registration cache when large), counted
        once it succeeded. The 4 KiB copy is latency-bound: this path allocates nothing in the common case."""
        h2d = direction is _H2D
        device, host = (dst, src) if h2d else (src, dst)
        blocks = self._blocks
        address = quick_copy_address(blocks.live, device, host, nbytes, index, not h2d)
        if not address:  # anything but the common case: every check in full, each with its message
            nbytes, index, address = start_copy(
                self, blocks, _NAMES[direction], device, host, nbytes, index, writable=not h2d
            )
        elif index == CURRENT_DEVICE:
            index = self.current_index()
        block, marker = device.block, _get_ident()
        block.running.append(marker)  # `LiveBlocks.pin`, inlined: this path is latency-bound (4 KiB)
        try:
            if block.freed:
                blocks.refuse_freed(direction)
            if nbytes >= self._register_from:  # large: maybe a reused pageable buffer, registered in place
                self._copy_registered(h2d, device, host, address, nbytes, index)
            elif not nbytes:
                pass
            elif h2d:
                self._copy_in(device, address, nbytes, index)
            else:
                self._copy_out(address, device, nbytes, index)
        finally:
            block.running.remove(marker)  # `LiveBlocks.unpin`, inlined likewise
            if block.freed:
                blocks.wake()
        with blocks.lock:  # counted once it succeeded
            self.stats.count_call(direction, dst, src, nbytes, index)

    def _copy_registered(self, h2d: bool, device: DevicePtr, host: Any, address: int, nbytes: int, index: int) -> None:
        """A checked synchronous copy through the registration cache: the host buffer registered in place (so
        copied as pinned) when the same storage came back, held registered until the copy ends."""
        cache = self.registrations
        entry = cache.acquire(host, nbytes) if cache is not None else None
        try:
            if h2d:
                self._copy_in(device, address, nbytes, index)
            else:
                self._copy_out(address, device, nbytes, index)
        finally:
            if cache is not None:
                cache.release(entry)

    def copy_host_to_device_async(self, dst: DevicePtr, src: HostBuffer, nbytes: int, stream: Any = None) -> CopyTicket:
        """Enqueue H2D on `stream` (None: the current one) on `dst`'s device; `src` must stay unchanged until the
        ticket is done. Checked as `copy_host_to_device` checks; counted once enqueued."""
        return self._enqueue(_H2D, dst, src, nbytes, stream)

    def copy_device_to_host_async(self, dst: HostBuffer, src: DevicePtr, nbytes: int, stream: Any = None) -> CopyTicket:
        """Enqueue D2H on `stream` (None: the current one) on `src`'s device; read `dst` only once the ticket is
        done. Checked as `copy_device_to_host` checks; counted once enqueued."""
        return self._enqueue(_D2H, dst, src, nbytes, stream)

    def _enqueue(self, direction: str, dst: Any, src: Any, nbytes: int, stream: Any) -> CopyTicket:
        """One stream-ordered copy either way, on its device pointer's device: checked, its device buffer marked
        busy while it is enqueued and its ticket kept with the buffer until done, counted once enqueued."""
        h2d = direction is _H2D
        device, host = (dst, src) if h2d else (src, dst)
        what = _NAMES[direction] + "_async"
        on = device.index if isinstance(device, DevicePtr) else CURRENT_DEVICE  # a bad pointer: refused by the checks
        blocks = self._blocks
        nbytes, index, address = start_copy(self, blocks, what, device, host, nbytes, on, writable=not h2d)
        block = device.block
        marker = blocks.pin(block, direction)
        try:
            ticket = DONE
            if nbytes:
                if h2d:
                    ticket = self._copy_in_async(device, address, nbytes, stream)
                else:
                    ticket = self._copy_out_async(address, device, nbytes, stream)
            with blocks.lock:  # before the marker goes, so a `retire` never misses the pending copy
                if ticket is not DONE:
                    blocks.keep_pending(block, ticket)
                self.stats.count_copy(direction, CopyRecord(dst, src, nbytes, index))
        finally:
            blocks.unpin(block, marker)
        return ticket

    def count_copy(self, direction: str, record: CopyRecord) -> None:
        """Count one finished (or enqueued) "h2d" / "d2h" copy: every copy path counts through here."""
        with self._blocks.lock:
            self.stats.count_copy(direction, record)

    def copy_device_to_device(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> str:
        """Copy `nbytes` from device `src` to device `dst` (each pointer names its device); returns how: "peer"
        (direct), "host" (D2H into staging host memory, then H2D: no peer path or no peer access) or "empty"."""
        what = "copy_device_to_device"
        if dst is None or src is None:
            raise InvalidArgumentError(f"{what}: null pointer (dst or src); pass two DevicePtrs")
        nbytes = check_count("nbytes", nbytes)
        blocks = self._blocks
        blocks.check_span(src, nbytes, f"{what} (src)")
        blocks.check_span(dst, nbytes, f"{what} (dst)")
        src_marker = blocks.pin(src.block, Direction.D2D)
        try:
            dst_marker = blocks.pin(dst.block, Direction.D2D)
            try:
                how = EMPTY_ROUTE if nbytes == 0 else route_d2d(self, self._copy_peer, dst, src, nbytes)
            finally:
                blocks.unpin(dst.block, dst_marker)
        finally:
            blocks.unpin(src.block, src_marker)
        with blocks.lock:
            self.stats.count_d2d(how, CopyRecord(dst, src, nbytes, dst.index))
        return how

    def planned_copy(
        self, direction: str, ptr: DevicePtr, host: HostBuffer, capacity: int, index: int = CURRENT_DEVICE
    ) -> PlannedCopy:
        """Validate once a copy a loaded method repeats ("h2d": host -> ptr, "d2h": ptr -> host, up to `capacity`
        bytes on device `index`) and return a `PlannedCopy` whose calls skip these checks (devices/planned_copy.py)."""
        return plan_copy(
            self, self._blocks, self.count_copy, self._planned_transfer, direction, ptr, host, capacity, index
        )
