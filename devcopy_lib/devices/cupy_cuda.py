"""The CUDA backend through CuPy: device memory from CuPy's pool, pinned host memory, copies by the copy engine.

Importable without CuPy (the import happens when an allocator is made). Every CUDA call runs inside `cuda_status`,
which turns a failure into CudaError (a DeviceCopyError) or MemoryError with CUDA's error name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InvalidArgumentTypeError
from ..names import Backend, Direction, device_string
from .allocator import DeviceAllocator
from .capabilities import Capabilities, DeviceTimer
from .copy_engine import CopyEngine, CopyTicket, EngineConfig
from .cuda_status import cuda_status, reset_last_error
from .host_buffers import check_alignment, check_count, host_size
from .host_registration import HostRegistrations
from .pinned import PinnedRegistry, tracked_array
from .planned_copy import Transfer
from .pointers import DeviceBlock, DevicePtr

MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: direction from the unified address space
HOST_REGISTER_PORTABLE = 1  # cudaHostRegisterPortable: pinned for every device, not only the current one
_HOST_MEMORY = 1  # cudaMemoryTypeHost in cudaPointerAttributes.type
_QUERY_BYTES = 1 << 20  # from this size, ask CUDA whether memory pinned elsewhere (torch, CuPy) is pinned


def import_cupy() -> Any:
    """The cupy module, or RuntimeError saying how to get it (or run without it)."""
    try:
        import cupy
    except ImportError as exc:
        raise RuntimeError(
            "The cupy backend needs CuPy: install the gpu extra (`pip install devcopy[gpu]`) on a CUDA machine, "
            "or use the simulated backend (--backend simulated)."
        ) from exc
    return cupy


class CupyTransport:
    """The copy engine's primitives on CUDA: cudaMemcpyAsync on CuPy streams, CUDA events, pinned pool memory."""

    def __init__(self) -> None:
        self._cupy = import_cupy()
        self._rt = self._cupy.cuda.runtime
        self._current_stream = self._cupy.cuda.get_current_stream
        self.registry = PinnedRegistry()

    def current_stream(self) -> Any:
        return self._cupy.cuda.get_current_stream()

    def copy(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        with cuda_status("cudaMemcpyAsync of {} bytes (0x{:x} -> 0x{:x})", nbytes, src, dst):
            self._rt.memcpyAsync(dst, src, nbytes, MEMCPY_DEFAULT, stream.ptr)

    def copy_sync(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        self.copy_now(dst, src, nbytes, stream.ptr)

    def copy_now(self, dst: int, src: int, nbytes: int, stream: int | None = None) -> None:
        """cudaMemcpyAsync + synchronize on stream handle `stream` (None: the current stream): a copy that lands
        before this returns. The small-copy path: no context manager, the error mapped only on failure."""
        if stream is None:
            stream = self._current_stream().ptr
        try:
            self._rt.memcpyAsync(dst, src, nbytes, MEMCPY_DEFAULT, stream)
            self._rt.streamSynchronize(stream)
        except Exception:
            with cuda_status("cudaMemcpyAsync + synchronize of {} bytes (0x{:x} -> 0x{:x})", nbytes, src, dst):
                raise

    def record(self, stream: Any) -> Any:
        with cuda_status("record a CUDA event"):
            event = self._cupy.cuda.Event(block=False, disable_timing=True)
            event.record(stream)
        return _CupyEvent(event)

    def wait(self, stream: Any, event: Any) -> None:
        with cuda_status("make a stream wait for an event"):
            stream.wait_event(event.event)

    def synchronize(self, stream: Any) -> None:
        with cuda_status("synchronize the copy stream"):
            self._rt.streamSynchronize(stream.ptr)

    def host_alloc(self, nbytes: int, alignment: int = 64) -> np.ndarray:
        with cuda_status("allocate {} bytes of pinned host memory", nbytes):
            return tracked_array(self._cupy.cuda.alloc_pinned_memory, _pointer, nbytes, alignment, self.registry)

    def is_pinned(self, address: int, nbytes: int) -> bool:
        """Pinned by us (registry), or for large ranges, pinned by anyone (CUDA's pointer attributes, both ends)."""
        if self.registry.contains(address, nbytes):
            return True
        if nbytes < _QUERY_BYTES:
            return False
        try:
            return all(self._rt.pointerGetAttributes(a).type == _HOST_MEMORY for a in (address, address + nbytes - 1))
        except Exception:  # pageable memory on old drivers reports an error instead of "unregistered"
            reset_last_error()
            return False


class CupyRegistrar:
    """cudaHostRegister / cudaHostUnregister through CuPy's `runtime` for the registration cache; a registered range
    joins the transport's pinned `registry` while registered, so the copy engine sends it straight to the DMA
    engine."""

    def __init__(self, runtime: Any, registry: PinnedRegistry, quiesce: Callable[[], None]) -> None:
        self._rt, self._registry, self.quiesce = runtime, registry, quiesce

    def register(self, address: int, nbytes: int) -> None:
        with cuda_status("cudaHostRegister of {} bytes at 0x{:x}", nbytes, address):
            self._rt.hostRegister(address, nbytes, HOST_REGISTER_PORTABLE)
        self._registry.add(address, nbytes)

    def unregister(self, address: int) -> None:
        self._registry.remove(address)
        with cuda_status("cudaHostUnregister at 0x{:x}", address):
            self._rt.hostUnregister(address)


class _CupyEvent:
    __slots__ = ("event",)

    def __init__(self, event: Any) -> None:
        self.event = event

    @property
    def done(self) -> bool:
        with cuda_status("query a CUDA event"):
            return bool(self.event.done)

    def synchronize(self) -> None:
        with cuda_status("wait for a CUDA event"):
            self.event.synchronize()


class _EventTimer(DeviceTimer):
    """CUDA events around a region on the current stream (the stream copies and delegates run on)."""

    def __init__(self, cupy: Any) -> None:
        self._cupy = cupy
        self._start, self._end = cupy.cuda.Event(), cupy.cuda.Event()

    def __enter__(self) -> None:
        self._start.record()

    def __exit__(self, *exc: object) -> None:
        self._end.record()

    def seconds(self) -> float:
        self._end.synchronize()
        return float(self._cupy.cuda.get_elapsed_time(self._start, self._end)) / 1e3


def _pointer(memory: Any) -> int:
    """The address of CuPy pinned memory."""
    return int(memory.ptr)


class CupyCudaAllocator(DeviceAllocator):
    """Real CUDA memory through CuPy. Copies go through `self.engine` (pinned: direct DMA; pageable: staged)."""

    backend = Backend.CUPY
    capabilities = Capabilities(real_device=True, device_clock=True, pinned_host=True, peer_copy=True, graphs=True)

    def __init__(self, config: EngineConfig | None = None) -> None:
        if config is not None and not isinstance(config, EngineConfig):
            raise InvalidArgumentTypeError(
                f"config must be an EngineConfig or None, got {type(config).__name__}; pass EngineConfig(threads=4)"
            )
        self._cupy = import_cupy()
        self._rt = self._cupy.cuda.runtime
        self.transport = CupyTransport()
        self.engine = CopyEngine(self.transport, config)
        self._direct_bytes = self.engine.config.direct_bytes  # up to here a copy is one cudaMemcpyAsync + sync
        with cuda_status("count CUDA devices"):
            self._count: int = self._rt.getDeviceCount()
        c = self.engine.config
        cache = HostRegistrations(
            CupyRegistrar(self._rt, self.transport.registry, self.synchronize),
            min_bytes=c.register_min_bytes,
            max_bytes=c.register_max_bytes,
            max_count=c.register_max_count,
            enabled=c.register_reused,
        )
        super().__init__(registrations=cache)

    def device_count(self) -> int:
        """The CUDA devices CuPy sees (counted once, when the allocator was made)."""
        return self._count

    def current_index(self) -> int:
        """cudaGetDevice (no call on a one-GPU machine)."""
        if self._count == 1:
            return 0
        with cuda_status("read the current CUDA device"):
            return int(self._rt.getDevice())

    def describe_devices(self) -> list[dict[str, str]]:
        with cuda_status("read CUDA device properties"):
            names = [self._rt.getDeviceProperties(i)["name"] for i in range(self.device_count())]
        return [
            {"device": device_string(i), "name": n.decode() if isinstance(n, bytes) else str(n)}
            for i, n in enumerate(names)
        ]

    # CuPy's pool hands out 512-byte aligned blocks, so any alignment the base class accepts (<= 256) holds.
    def _allocate(self, nbytes: int, index: int, alignment: int) -> DeviceBlock:
        with _OnDevice(self._rt, index), cuda_status("allocate {} bytes on {}", nbytes, device_string(index)):
            memory = self._cupy.cuda.alloc(max(nbytes, 1))
        return DeviceBlock(index, nbytes, memory.ptr, memory)

    def _free(self, block: DeviceBlock) -> None:
        block.drop_handle()  # back to CuPy's pool, ordered on the stream

    def _close(self) -> None:
        """Stop the copy engine's host threads (the engine is this allocator's alone)."""
        self.engine.close()

    def _trim(self, index: int) -> None:
        with _OnDevice(self._rt, index), cuda_status("free cached blocks on {}", device_string(index)):
            self._cupy.get_default_memory_pool().free_all_blocks()
            self._cupy.get_default_pinned_memory_pool().free_all_blocks()

    def _copy_in(self, dst: DevicePtr, src_address: int, nbytes: int, index: int) -> None:
        if self._count == 1:  # nothing to switch: skip the device calls (small copies are latency-bound)
            if nbytes <= self._direct_bytes:  # the engine's direct path, without its frames
                return self.transport.copy_now(dst.address, src_address, nbytes)
            return self.engine.h2d(dst.address, src_address, nbytes)
        with _OnDevice(self._rt, index):
            self.engine.h2d(dst.address, src_address, nbytes)

    def _copy_out(self, dst_address: int, src: DevicePtr, nbytes: int, index: int) -> None:
        if self._count == 1:
            if nbytes <= self._direct_bytes:
                return self.transport.copy_now(dst_address, src.address, nbytes)
            return self.engine.d2h(dst_address, src.address, nbytes)
        with _OnDevice(self._rt, index):
            self.engine.d2h(dst_address, src.address, nbytes)

    def _planned_transfer(self, direction: str, ptr: DevicePtr, address: int, capacity: int, index: int) -> Transfer:
        """A planned copy with pinned host memory on a one-GPU machine: cudaMemcpyAsync + synchronize on the current
        stream directly, skipping the engine's per-call decisions (small copies are latency-bound)."""
        if self._count != 1 or not self.transport.is_pinned(address, capacity):
            return super()._planned_transfer(direction, ptr, address, capacity, index)
        rt, current_stream = self._rt, self._cupy.cuda.get_current_stream
        dst, src = (ptr.address, address) if direction == Direction.H2D else (address, ptr.address)

        def transfer(nbytes: int) -> None:
            stream = current_stream().ptr
            with cuda_status("planned cudaMemcpyAsync + synchronize of {} bytes (0x{:x} -> 0x{:x})", nbytes, src, dst):
                rt.memcpyAsync(dst, src, nbytes, MEMCPY_DEFAULT, stream)
                rt.streamSynchronize(stream)

        return transfer

    def _peer_access(self, src_index: int, dst_index: int) -> bool:
        with cuda_status("ask peer access {} -> {}", device_string(src_index), device_string(dst_index)):
            return bool(self._rt.deviceCanAccessPeer(dst_index, src_index))

    def _copy_peer(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> None:
        with (
            _OnDevice(self._rt, dst.index),
            cuda_status("peer copy {} bytes {} -> {}", nbytes, device_string(src.index), device_string(dst.index)),
        ):
            self._rt.memcpyPeer(dst.address, dst.index, src.address, src.index, nbytes)

    def allocate_host(self, nbytes: int, alignment: int = 64) -> np.ndarray:
        """Pinned host memory (a uint8 array), registered so copies from/to it take the direct DMA path."""
        check_count("nbytes", nbytes)
        check_alignment(alignment, 1 << 12)
        return self.transport.host_alloc(nbytes, alignment)

    def is_pinned(self, host: Any, nbytes: int | None = None) -> bool:
        """Whether a host buffer (array or address) is pinned, i.e. copies with it skip staging."""
        return self.transport.is_pinned(*host_size(host, nbytes, "is_pinned"))

    def synchronize(self) -> None:
        """Wait for all work on every device (delegates run on torch's stream, copies on the engine's)."""
        with cuda_status("synchronize the devices"):
            for index in range(self.device_count()):
                with _OnDevice(self._rt, index):
                    self._rt.deviceSynchronize()

    def event_timer(self) -> DeviceTimer:
        return _EventTimer(self._cupy)

    def _copy_in_async(self, dst: DevicePtr, src_address: int, nbytes: int, stream: Any) -> CopyTicket:
        """The engine's stream-ordered H2D on `dst`'s device (pinned: one DMA; pageable: staged, done on return)."""
        with _OnDevice(self._rt, dst.index):
            return self.engine.h2d_async(dst.address, src_address, nbytes, stream)

    def _copy_out_async(self, dst_address: int, src: DevicePtr, nbytes: int, stream: Any) -> CopyTicket:
        """The engine's stream-ordered D2H on `src`'s device (pageable `dst`: done on return)."""
        with _OnDevice(self._rt, src.index):
            return self.engine.d2h_async(dst_address, src.address, nbytes, stream)

    def _device_view(self, ptr: DevicePtr, dtype: np.dtype[Any], shape: tuple[int, ...]) -> Any:
        """A CuPy array over device memory (device code's view; the CuPy memory stays alive with the array)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        memory = self._cupy.cuda.UnownedMemory(ptr.address, nbytes, ptr.block.handle, ptr.index)
        return self._cupy.ndarray(shape, dtype, self._cupy.cuda.MemoryPointer(memory, 0))


class _OnDevice:
    """Select CUDA device `index` for a block and restore the previous one after (no call when already current)."""

    __slots__ = ("rt", "index", "previous")

    def __init__(self, rt: Any, index: int) -> None:
        self.rt, self.index = rt, index

    def __enter__(self) -> None:
        with cuda_status("select {}", device_string(self.index)):
            self.previous = self.rt.getDevice()
            if self.previous != self.index:
                self.rt.setDevice(self.index)

    def __exit__(self, *exc: object) -> None:
        if self.previous != self.index:
            with cuda_status("restore {}", device_string(self.previous)):
                self.rt.setDevice(self.previous)
