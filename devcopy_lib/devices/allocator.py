"""`DeviceAllocator`: the interface ExecuTorch's runtime uses to reach device memory.

The public methods validate once (sizes, alignment, index, null pointers, bounds), keep the statistics, and retry
an allocation once after flushing caches; a backend implements four small hooks: `_allocate`, `_free`, `_copy_in`,
`_copy_out` (and optionally `_trim`, and `_copy_peer` + `_peer_access` for direct device-to-device copies).
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from ..names import CURRENT_DEVICE
from .device import MAX_DEVICE_INDEX, Device, DeviceType

MAX_ALIGNMENT = 256


class DeviceBlock:
    """One device allocation. `handle` is the backend's object that owns the memory (kept alive by the block)."""

    __slots__ = ("index", "nbytes", "address", "handle", "freed", "serial", "borrowed")
    _serials = itertools.count(1)

    def __init__(self, index: int, nbytes: int, address: int, handle: Any, borrowed: bool = False) -> None:
        self.index, self.nbytes, self.address, self.handle = index, nbytes, address, handle
        self.freed, self.borrowed = False, borrowed
        self.serial = next(self._serials)

    def __array__(self, *args, **kwargs):
        from .errors import DeviceMemoryAccessError

        raise DeviceMemoryAccessError(
            f"Host code tried to read device memory (cuda:{self.index}, {self.nbytes} bytes) directly. "
            "Device memory reaches the host only through a D2H copy (et_copy::_d2h_copy.out)."
        )


@dataclass(frozen=True)
class DevicePtr:
    """A pointer into a device allocation: the block plus a byte offset. `ptr + n` advances it."""

    block: DeviceBlock
    offset: int = 0

    @property
    def index(self) -> int:
        return self.block.index

    @property
    def address(self) -> int:
        return self.block.address + self.offset

    @property
    def nbytes(self) -> int:
        """Bytes from this pointer to the end of its allocation."""
        return self.block.nbytes - self.offset

    def __add__(self, n: int) -> DevicePtr:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"A DevicePtr advances by a whole number of bytes, got {n!r} ({type(n).__name__})")
        n = int(n)
        if not 0 <= self.offset + n <= self.block.nbytes:
            raise ValueError(f"Pointer offset {self.offset + n} is outside its allocation of {self.block.nbytes} bytes")
        return DevicePtr(self.block, self.offset + n)

    def __array__(self, *args, **kwargs):
        return self.block.__array__()

    def __repr__(self) -> str:
        return f"DevicePtr(cuda:{self.index}, 0x{self.address:x}, {self.nbytes} bytes left)"


HostBuffer = Union[int, memoryview, bytearray, np.ndarray, Any]


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

    def count_copy(self, direction: str, record: CopyRecord) -> None:
        """Count one finished "h2d" or "d2h" copy and keep it as the last one (the caller holds the allocator's
        lock)."""
        if direction == "h2d":
            self.h2d_count += 1
            self.h2d_bytes += record.size
            self.last_h2d = record
        else:
            self.d2h_count += 1
            self.d2h_bytes += record.size
            self.last_d2h = record


def host_address(buf: HostBuffer, nbytes: int, *, writable: bool, what: str) -> int:
    """The address of a host buffer (buffer-protocol object or int address), checking size and writability."""
    if isinstance(buf, bool) or buf is None:
        raise ValueError(f"{what}: null host pointer. Pass a buffer-protocol object (a NumPy array) or an address")
    if isinstance(buf, int):
        if buf == 0:
            raise ValueError(f"{what}: null host pointer (address 0)")
        return buf
    if (
        type(buf) is np.ndarray
        and buf.flags.c_contiguous
        and nbytes <= buf.nbytes
        and buf.nbytes
        and (buf.flags.writeable or not writable)
    ):
        return buf.__array_interface__["data"][0]  # fast path (small copies): the checks below all pass
    try:
        view = memoryview(buf)
    except TypeError:
        raise ValueError(
            f"{what}: host memory must be a buffer-protocol object (NumPy array, bytearray) or an int address, "
            f"got {type(buf).__name__}"
        ) from None
    if not view.c_contiguous:
        raise ValueError(f"{what}: host buffer is not contiguous; copy it into a contiguous array first")
    if writable and view.readonly:
        raise ValueError(f"{what}: host destination is read-only; pass a writable buffer")
    if nbytes > view.nbytes:
        raise ValueError(f"{what}: {nbytes} bytes requested but the host buffer holds {view.nbytes} bytes")
    if view.nbytes == 0:
        return 1  # a valid, never-dereferenced address for an empty buffer
    return np.frombuffer(view.cast("B"), dtype=np.uint8).ctypes.data


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, asked by every layer above `devices/` instead of the backend's name."""

    real_device: bool  # device memory is a real accelerator's: torch views it through DLPack, device work is async
    device_clock: bool  # `event_timer()` measures on the device's own clock (CUDA events)
    pinned_host: bool  # `allocate_host` returns page-locked memory, so copies with it skip staging


class DeviceTimer(abc.ABC):
    """Times one region on the device clock: `with timer: ...` then `timer.seconds()`."""

    @abc.abstractmethod
    def __enter__(self) -> None: ...

    @abc.abstractmethod
    def __exit__(self, *exc: object) -> None: ...

    @abc.abstractmethod
    def seconds(self) -> float: ...


class DeviceAllocator(abc.ABC):
    """Allocates device memory and copies between host and device; one per device type. An allocator owns what it
    made (its blocks, a copy engine): `close()` (or leaving a `with allocator:` block) frees them; using a closed
    allocator is an error. Counters count successful calls only. Safe to share between threads: the live set and
    the counters change under one lock (held for bookkeeping only, never during a copy)."""

    def __init__(self) -> None:
        self.stats = AllocatorStats()
        self._live: dict[int, DeviceBlock] = {}
        self._lock = threading.Lock()
        self.closed = False

    def __enter__(self) -> DeviceAllocator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Free every live allocation and release what the backend owns (`_close`); a second call does nothing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            for block in list(self._live.values()):
                if not block.borrowed:
                    self._release(block)
        self._close()

    def _close(self) -> None:
        """Release backend resources (a copy engine's threads); called once by `close()`."""

    # ---- hooks a backend implements -------------------------------------------------------------------------
    @abc.abstractmethod
    def device_type(self) -> DeviceType: ...

    @abc.abstractmethod
    def device_count(self) -> int | None:
        """How many device indices exist; None for any number (the simulated accelerator)."""

    @abc.abstractmethod
    def current_index(self) -> int: ...

    @abc.abstractmethod
    def _allocate(self, nbytes: int, index: int, alignment: int) -> DeviceBlock: ...

    @abc.abstractmethod
    def _free(self, block: DeviceBlock) -> None: ...

    @abc.abstractmethod
    def _copy_in(self, dst: DevicePtr, src_address: int, nbytes: int, index: int) -> None: ...

    @abc.abstractmethod
    def _copy_out(self, dst_address: int, src: DevicePtr, nbytes: int, index: int) -> None: ...

    def _trim(self, index: int) -> None:
        """Release cached memory before the one retry of a failed allocation (pools override this)."""

    @abc.abstractmethod
    def device_array(self, ptr: DevicePtr, dtype: Any, shape: tuple[int, ...], index: int | None = None) -> Any:
        """Device code's zero-copy view of `shape` elements of NumPy `dtype` at `ptr` (a delegate's input/output):
        a NumPy array on the simulated device, a CuPy array on CUDA. Contract: the span must lie inside a live
        allocation of this allocator; with `index`, `ptr` must live on device `index` (device code on cuda:1 cannot
        read cuda:0 memory); the view is valid until `ptr` is freed; host code never reads it (that needs a D2H)."""

    def _peer_access(self, src_index: int, dst_index: int) -> bool:
        """Whether device `src_index` and `dst_index` (distinct) can copy directly; without an override: no."""
        return False

    def _copy_peer(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> None:
        """A direct device-to-device copy (cudaMemcpyPeerAsync); a backend without a peer path leaves this out."""
        raise NotImplementedError

    def allocate_host(self, nbytes: int, alignment: int = 64) -> np.ndarray:
        """Host memory for planned CPU buffers and staging: a uint8 array (CUDA backends return pinned memory)."""
        _check_count("nbytes", nbytes)
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        start = (-raw.ctypes.data) % alignment
        return raw[start : start + nbytes]

    def describe_devices(self) -> list[dict]:
        """One row per device this backend sees: `{"device": "cuda:0", "name": ...}`."""
        count = self.device_count() or 1
        return [{"device": str(self.device(i)), "name": self.backend} for i in range(count)]

    # ---- capabilities -----------------------------------------------------------------------------------------
    capabilities = Capabilities(real_device=False, device_clock=False, pinned_host=False)

    def synchronize(self) -> None:
        """Wait for every piece of device work enqueued on this backend's devices (synchronous backends: nothing)."""

    def event_timer(self) -> DeviceTimer | None:
        """A timer on the device clock for work on the current stream, or None where the backend has no clock."""
        return None

    def is_pinned(self, host: Any, nbytes: int | None = None) -> bool:
        """Whether a host buffer (array or address) is page-locked, so copies with it skip staging."""
        return False

    # ---- public interface -----------------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        return type(self).__name__

    def device(self, index: int = CURRENT_DEVICE) -> Device:
        return Device(self.device_type(), self._resolve_index(index))

    def allocate(self, nbytes: int, index: int = 0, alignment: int = 64) -> DevicePtr:
        """Allocate `nbytes` on device `index` (-1: current), aligned to `alignment`; 0 bytes gives a valid handle."""
        nbytes = _check_count("nbytes", nbytes)
        self._check_open("allocate")
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1) or alignment > MAX_ALIGNMENT:
            raise ValueError(f"alignment must be a power of two no larger than {MAX_ALIGNMENT}, got {alignment!r}")
        index = self._resolve_index(index)
        try:
            block = self._allocate(nbytes, index, alignment)
        except MemoryError:
            self._trim(index)
            try:
                block = self._allocate(nbytes, index, alignment)
            except MemoryError:
                raise MemoryError(
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
                raise ValueError(
                    f"deallocate: pointer is {ptr.offset} bytes into its allocation; pass the allocated pointer"
                )
            if block.borrowed:
                raise ValueError(f"deallocate: {ptr!r} is borrowed memory (borrow()); its owner frees it")
            self._release(block)
            self.stats.deallocate_count += 1

    def _release(self, block: DeviceBlock) -> None:
        """Forget and free a live block (the caller holds the lock)."""
        del self._live[block.serial]
        block.freed = True
        self._free(block)
        self.stats.live_bytes -= block.nbytes

    def copy_host_to_device(self, dst: DevicePtr, src: HostBuffer, nbytes: int, index: int = CURRENT_DEVICE) -> None:
        """Copy `nbytes` from host `src` to device `dst`; `index` >= 0 must be `dst`'s device, -1 the current one."""
        nbytes, index = self._start_copy("copy_host_to_device", dst, src, src, nbytes, index)
        if nbytes:
            self._copy_in(dst, host_address(src, nbytes, writable=False, what="copy_host_to_device"), nbytes, index)
        with self._lock:
            self.stats.count_copy("h2d", CopyRecord(dst, src, nbytes, index))

    def copy_device_to_host(self, dst: HostBuffer, src: DevicePtr, nbytes: int, index: int = CURRENT_DEVICE) -> None:
        """Copy `nbytes` from device `src` to host `dst`; `index` >= 0 must be `src`'s device, -1 the current one."""
        nbytes, index = self._start_copy("copy_device_to_host", src, dst, dst, nbytes, index)
        if nbytes:
            self._copy_out(host_address(dst, nbytes, writable=True, what="copy_device_to_host"), src, nbytes, index)
        with self._lock:
            self.stats.count_copy("d2h", CopyRecord(dst, src, nbytes, index))

    def _start_copy(self, what: str, device: Any, other: Any, host: Any, nbytes: int, index: int) -> tuple[int, int]:
        """The checks every copy starts with, in ExecuTorch's order: null pointers (before the zero-byte shortcut),
        the size, the index; then the device pointer (live, even for 0 bytes; the span fits; on device `index`).
        Returns (nbytes, the resolved index); the caller counts the call once it succeeded."""
        if device is None or other is None or (isinstance(host, int) and not isinstance(host, bool) and host == 0):
            raise ValueError(f"{what}: null pointer (dst or src)")
        nbytes = _check_count("nbytes", nbytes)
        resolved = self._resolve_index(index)
        self._check_span(device, nbytes, what)
        self._check_index(device, index, what)
        return nbytes, resolved

    def can_access_peer(self, a: int, b: int) -> bool:
        """Whether device `a`'s memory can be copied directly to or from device `b` (same device: always)."""
        a, b = self._resolve_index(a), self._resolve_index(b)
        has_path = type(self)._copy_peer is not DeviceAllocator._copy_peer
        return has_path and (a == b or bool(self._peer_access(a, b)))

    def copy_device_to_device(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> str:
        """Copy `nbytes` from device `src` to device `dst` (each pointer names its device); returns how: "peer"
        (direct), "host" (D2H into staging host memory, then H2D: no peer path or no peer access) or "empty"."""
        if dst is None or src is None:
            raise ValueError("copy_device_to_device: null pointer (dst or src)")
        nbytes = _check_count("nbytes", nbytes)
        self._check_span(src, nbytes, "copy_device_to_device (src)")
        self._check_span(dst, nbytes, "copy_device_to_device (dst)")
        how = "empty" if nbytes == 0 else self._d2d(dst, src, nbytes)
        with self._lock:
            s = self.stats
            s.d2d_count += 1
            s.d2d_bytes += nbytes if how == "peer" else 0
            s.d2d_host_hops += how == "host"
            s.last_d2d = CopyRecord(dst, src, nbytes, dst.index)
        return how

    def _d2d(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> str:
        if self.can_access_peer(src.index, dst.index):
            self._copy_peer(dst, src, nbytes)
            return "peer"
        staging = self.allocate_host(nbytes)
        self.copy_device_to_host(staging, src, nbytes, src.index)
        self.copy_host_to_device(dst, staging, nbytes, dst.index)
        return "host"

    @contextlib.contextmanager
    def borrow(self, address: int, nbytes: int, index: int, owner: Any) -> Iterator[DevicePtr]:
        """A DevicePtr over device memory this allocator did not allocate (a PyTorch CUDA tensor's, kept alive by
        `owner`), valid inside the with-block so copies can reach it; never freed here, not counted as allocated."""
        self._check_open("borrow")
        block = DeviceBlock(self._resolve_index(index), nbytes, address, owner, borrowed=True)
        with self._lock:
            self._live[block.serial] = block
        try:
            yield DevicePtr(block)
        finally:
            with self._lock:
                self._live.pop(block.serial, None)

    def live_allocations(self) -> int:
        return len(self._live)

    # ---- pre-validated copies (devcopy's addition, devices/planned_copy.py) -------------------------------------
    def planned_copy(
        self, direction: str, ptr: DevicePtr, host: HostBuffer, capacity: int, index: int = CURRENT_DEVICE
    ):
        """Validate once a copy a loaded method repeats ("h2d": host -> ptr, "d2h": ptr -> host, up to `capacity`
        bytes on device `index`) and return a `PlannedCopy` whose calls skip these checks."""
        from .planned_copy import PlannedCopy

        if direction not in ("h2d", "d2h"):
            raise ValueError(f"planned_copy: direction must be 'h2d' or 'd2h', got {direction!r}")
        what = f"planned_copy ({direction})"
        if ptr is None or host is None:
            raise ValueError(f"{what}: null pointer (ptr or host)")
        _check_count("capacity", capacity)
        resolved = self._resolve_index(index)
        self._check_span(ptr, capacity, what)
        self._check_index(ptr, index, what)
        index = resolved
        address = host_address(host, capacity, writable=direction == "d2h", what=what) if capacity else 1
        return PlannedCopy(
            self,
            direction,
            ptr,
            host,
            address,
            capacity,
            index,
            self._planned_transfer(direction, ptr, address, capacity, index),
        )

    def _planned_transfer(self, direction: str, ptr: DevicePtr, address: int, capacity: int, index: int):
        """The transfer a PlannedCopy runs, `transfer(nbytes)`: the backend's copy hooks (a backend may return a
        faster direct path for what it validated here)."""
        if direction == "h2d":
            return lambda nbytes: self._copy_in(ptr, address, nbytes, index)
        return lambda nbytes: self._copy_out(address, ptr, nbytes, index)

    # ---- validation helpers ---------------------------------------------------------------------------------
    def _resolve_index(self, index: int) -> int:
        if not isinstance(index, int) or isinstance(index, bool) or not CURRENT_DEVICE <= index <= MAX_DEVICE_INDEX:
            raise ValueError(
                f"device index must be an int in -1..{MAX_DEVICE_INDEX} (-1: the current device), got {index!r}"
            )
        if index == CURRENT_DEVICE:
            return self.current_index()
        count = self.device_count()
        if count is not None and index >= count:
            raise ValueError(
                f"device index {index} is out of range: {self.backend} sees {count} device(s), valid 0..{count - 1}"
            )
        return index

    def _check_open(self, what: str) -> None:
        if self.closed:
            raise ValueError(f"{what}: this {self.backend} allocator was closed; make a new one (make_allocator())")

    def _check_index(self, ptr: DevicePtr, index: int, what: str) -> None:
        """An explicit device index must be the one `ptr` lives on (-1, the current device, is not checked: on CUDA
        a copy reaches any device's memory through the unified address space)."""
        if index != CURRENT_DEVICE and index != ptr.block.index:
            raise ValueError(
                f"{what}: {ptr!r} lives on cuda:{ptr.block.index} but index {index} was passed; pass "
                f"{ptr.block.index} (the pointer's device) or -1"
            )

    def _own_block(self, ptr: DevicePtr, what: str) -> DeviceBlock:
        if not isinstance(ptr, DevicePtr):
            raise ValueError(f"{what}: expected a DevicePtr from allocate(), got {type(ptr).__name__}")
        if ptr.block.freed:
            self._check_open(what)
            raise ValueError(f"{what}: {ptr!r} was already freed (use after free or double free)")
        if self._live.get(ptr.block.serial) is not ptr.block:
            raise ValueError(f"{what}: {ptr!r} was not allocated by this {self.backend}")
        return ptr.block

    def _check_span(self, ptr: DevicePtr, nbytes: int, what: str) -> None:
        self._own_block(ptr, what)
        if nbytes > ptr.nbytes:
            raise ValueError(
                f"{what}: {nbytes} bytes do not fit in the device allocation ({ptr.nbytes} bytes from offset "
                f"{ptr.offset} of {ptr.block.nbytes})"
            )


def _check_count(name: str, value: int) -> int:
    """`value` as a Python int (NumPy ints would overflow address arithmetic), or ValueError."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return int(value)
