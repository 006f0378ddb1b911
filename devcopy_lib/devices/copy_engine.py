"""The copy engine: host<->device copies at the link's limit, over injectable copy primitives (a `Transport`).

Pinned host memory goes straight to the DMA engine (one async copy on the stream). Pageable host memory goes through a
pipeline of pinned staging buffers: host memcpy threads work on several chunks at once while the DMA engine moves
earlier ones, and a buffer is written again only after the event recorded behind its last copy has completed. Small
copies take one direct copy (the driver stages them itself), the cheapest path.
"""

from __future__ import annotations

import ctypes
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .errors import InvalidArgumentError

MiB = 1 << 20


class Event(Protocol):
    done: bool

    def synchronize(self) -> None: ...


class Transport(Protocol):
    """The copy primitives: CUDA through CuPy (`CupyTransport`) or host threads (`HostTransport`, for tests)."""

    def current_stream(self) -> Any: ...
    def copy(self, dst: int, src: int, nbytes: int, stream: Any) -> None: ...
    def copy_sync(self, dst: int, src: int, nbytes: int, stream: Any) -> None: ...
    def record(self, stream: Any) -> Event: ...
    def wait(self, stream: Any, event: Event) -> None: ...
    def synchronize(self, stream: Any) -> None: ...
    def host_alloc(self, nbytes: int, alignment: int = 64) -> np.ndarray: ...
    def is_pinned(self, address: int, nbytes: int) -> bool: ...


@dataclass(frozen=True)
class EngineConfig:
    """Pipeline shape, tuned on the H200 host (16 cores, ~9 GB/s per memcpy thread, ~31 GB/s for 4+ threads).

    `threads` host copies (one chunk each) run at once, and `buffers` more staging buffers let the DMA engine run
    that many chunks ahead; pageable copies up to `direct_bytes` go to the driver's own staging (one call): on the
    H200 host the driver's path is as fast up to 16 MiB (waking the threads costs more than they save there) and 3-6x
    slower above 64 MiB (docs/benchmarks.md)."""

    chunk_bytes: int = 8 * MiB
    min_chunk_bytes: int = 512 << 10
    buffers: int = 3
    threads: int = 8
    direct_bytes: int = 16 * MiB
    # Reused pageable buffers (devices/host_registration.py): a NumPy array or CPU tensor storage copied a second
    # time is registered in place (cudaHostRegister) and copied as pinned from then on; at least
    # `register_min_bytes` (below it pinning costs more than it saves), at most `register_max_count` buffers and
    # `register_max_bytes` registered at once (least recently used evicted first).
    register_reused: bool = True
    register_min_bytes: int = 1 * MiB
    register_max_bytes: int = 4096 * MiB
    register_max_count: int = 64

    def __post_init__(self) -> None:
        least_of = {"direct_bytes": 0, "register_max_bytes": 0, "register_max_count": 0}  # 0: never that path
        for name in (
            "chunk_bytes",
            "min_chunk_bytes",
            "buffers",
            "threads",
            "direct_bytes",
            "register_min_bytes",
            "register_max_bytes",
            "register_max_count",
        ):
            value, least = getattr(self, name), least_of.get(name, 1)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise InvalidArgumentError(f"EngineConfig.{name} must be an int >= {least}, got {value!r}")
        if not isinstance(self.register_reused, bool):
            raise InvalidArgumentError(
                f"EngineConfig.register_reused must be True or False, got {self.register_reused!r}"
            )
        if self.min_chunk_bytes > self.chunk_bytes:
            raise InvalidArgumentError(
                f"EngineConfig.min_chunk_bytes ({self.min_chunk_bytes}) exceeds chunk_bytes "
                f"({self.chunk_bytes}); lower it or raise chunk_bytes"
            )

    def chunk_for(self, nbytes: int) -> int:
        """Chunk size for one copy: two chunks per host thread, within [min_chunk_bytes, chunk_bytes]."""
        share = -(-nbytes // (2 * self.threads) // 65536) * 65536
        return max(self.min_chunk_bytes, min(self.chunk_bytes, share))


class CopyTicket:
    """An enqueued copy: `done` once the data has landed; `wait()` blocks until then."""

    __slots__ = ("event",)

    def __init__(self, event: Event | None) -> None:
        self.event = event

    @property
    def done(self) -> bool:
        return self.event is None or bool(self.event.done)

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()


class _Staging:
    """One set of pinned staging buffers; `events[k]` completes when buffer k may be written again."""

    def __init__(self, transport: Transport, count: int, nbytes: int) -> None:
        self.buffers = [transport.host_alloc(nbytes, 4096) for _ in range(count)]
        self.addresses = [b.ctypes.data for b in self.buffers]
        self.events: list[Event | None] = [None] * count

    def ready(self, k: int) -> int:
        """Wait until buffer k's last copy completed; its address."""
        event = self.events[k]
        if event is not None:
            event.synchronize()
            self.events[k] = None
        return self.addresses[k]


class CopyEngine:
    """Synchronous (`h2d`, `d2h`) and stream-ordered (`h2d_async`, `d2h_async`) copies between raw addresses."""

    def __init__(self, transport: Transport, config: EngineConfig | None = None) -> None:
        self.transport = transport
        self.config = config or EngineConfig()
        self._free: list[_Staging] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=self.config.threads, thread_name_prefix="devcopy")

    # ---- public -----------------------------------------------------------------------------------------------
    def h2d(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        """Copy host `src` to device `dst` and return when it has landed."""
        stream = self.transport.current_stream() if stream is None else stream
        if self._direct(src, nbytes):
            self.transport.copy_sync(dst, src, nbytes, stream)
        else:
            self._staged_h2d(dst, src, nbytes, stream)
            self.transport.synchronize(stream)

    def d2h(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        """Copy device `src` to host `dst` and return when it has landed."""
        stream = self.transport.current_stream() if stream is None else stream
        if self._direct(dst, nbytes):
            self.transport.copy_sync(dst, src, nbytes, stream)
        else:
            self._staged_d2h(dst, src, nbytes, stream)

    def h2d_async(self, dst: int, src: int, nbytes: int, stream: Any = None) -> CopyTicket:
        """Enqueue host -> device on `stream`. A pinned `src` must stay unchanged until the ticket is done; a pageable
        one is consumed (staged) before this returns."""
        stream = self.transport.current_stream() if stream is None else stream
        if nbytes == 0:
            return CopyTicket(None)
        if self.transport.is_pinned(src, nbytes):
            self.transport.copy(dst, src, nbytes, stream)
            return CopyTicket(self.transport.record(stream))
        return CopyTicket(self._staged_h2d(dst, src, nbytes, stream))

    def d2h_async(self, dst: int, src: int, nbytes: int, stream: Any = None) -> CopyTicket:
        """Enqueue device -> host on `stream` into pinned `dst`; into pageable `dst` it completes before returning."""
        stream = self.transport.current_stream() if stream is None else stream
        if self.transport.is_pinned(dst, nbytes):
            self.transport.copy(dst, src, nbytes, stream)
            return CopyTicket(self.transport.record(stream))
        self._staged_d2h(dst, src, nbytes, stream)
        return CopyTicket(None)

    def close(self) -> None:
        """Stop the host copy threads (staging buffers go with the engine)."""
        self._pool.shutdown(wait=True)

    # ---- pipeline ---------------------------------------------------------------------------------------------
    def _direct(self, host: int, nbytes: int) -> bool:
        return nbytes <= self.config.direct_bytes or self.transport.is_pinned(host, nbytes)

    def _chunks(self, nbytes: int) -> list[tuple[int, int]]:
        chunk = self.config.chunk_for(nbytes)
        return [(off, min(chunk, nbytes - off)) for off in range(0, nbytes, chunk)]

    def _staged_h2d(self, dst: int, src: int, nbytes: int, stream: Any) -> Event:
        """Host threads fill staging buffers `threads` chunks ahead; this thread enqueues their DMAs in order."""
        chunks, staging, lead = self._chunks(nbytes), self._acquire(), self.config.threads
        count, fills = len(staging.buffers), {}

        def fill(i: int) -> None:
            off, n = chunks[i]
            fills[i] = self._pool.submit(ctypes.memmove, staging.ready(i % count), src + off, n)

        try:
            for i in range(min(lead, len(chunks))):
                fill(i)
            for i, (off, n) in enumerate(chunks):
                fills.pop(i).result()
                k = i % count
                self.transport.copy(dst + off, staging.addresses[k], n, stream)
                staging.events[k] = event = self.transport.record(stream)
                if i + lead < len(chunks):
                    fill(i + lead)
            return event
        finally:
            self._settle(fills, staging)

    def _staged_d2h(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        """The DMA engine fills staging buffers `buffers` chunks ahead; host threads drain them into `dst`."""
        chunks, staging, lead = self._chunks(nbytes), self._acquire(), self.config.threads
        count, drains = len(staging.buffers), dict[int, "Future[Any]"]()

        def dma(j: int) -> None:
            off, n = chunks[j]
            k = j % count
            self.transport.copy(staging.ready(k), src + off, n, stream)
            staging.events[k] = self.transport.record(stream)

        def retire_oldest() -> None:
            oldest = min(drains)
            drains.pop(oldest).result()
            if oldest + count < len(chunks):
                dma(oldest + count)

        try:
            for j in range(min(count, len(chunks))):
                dma(j)
            for i, (off, n) in enumerate(chunks):
                drains[i] = self._pool.submit(ctypes.memmove, dst + off, staging.ready(i % count), n)
                while len(drains) >= lead:
                    retire_oldest()
            while drains:
                retire_oldest()
        finally:
            self._settle(drains, staging)

    def _settle(self, futures: dict[int, Future[Any]], staging: _Staging) -> None:
        """Wait for host copies still running (after an error), then hand the staging set back."""
        for future in futures.values():
            future.result()
        self._release(staging)

    def _acquire(self) -> _Staging:
        """A staging set no other call is using (buffers may still wait on events of earlier async copies)."""
        with self._lock:
            if self._free:
                return self._free.pop()
        return _Staging(self.transport, self.config.threads + self.config.buffers, self.config.chunk_bytes)

    def _release(self, staging: _Staging) -> None:
        with self._lock:
            self._free.append(staging)
