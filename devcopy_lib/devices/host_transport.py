"""Copy primitives on host threads: a stream is a FIFO worker thread, so the copy engine's pipeline (events, buffer
reuse, ordering) runs and is tested without CUDA. `delay_s` makes every copy run late, exposing early buffer reuse."""

from __future__ import annotations

import ctypes
import queue
import threading
import time
from collections.abc import Callable

import numpy as np

from .pinned import PinnedRegistry, tracked_array


class HostEvent:
    """Set by its stream's worker when the work enqueued before it has run."""

    def __init__(self) -> None:
        self._flag = threading.Event()

    @property
    def done(self) -> bool:
        return self._flag.is_set()

    def set(self) -> None:
        self._flag.set()

    def synchronize(self) -> None:
        self._flag.wait()


class HostStream:
    """Work enqueued here runs later, in order, on one daemon thread."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        threading.Thread(target=self._work, daemon=True, name="devcopy-host-stream").start()

    def submit(self, fn: Callable[[], None]) -> None:
        """Run `fn` after the work enqueued before it."""
        self._queue.put(fn)

    def _work(self) -> None:
        while True:
            self._queue.get()()


class HostTransport:
    """The `Transport` primitives over host memory; "pinned" memory is whatever `host_alloc` returned."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.registry = PinnedRegistry()
        self.copies = 0
        self._default = HostStream()

    def current_stream(self) -> HostStream:
        return self._default

    def copy(self, dst: int, src: int, nbytes: int, stream: HostStream) -> None:
        self.copies += 1

        def run() -> None:
            if self.delay_s:
                time.sleep(self.delay_s)
            ctypes.memmove(dst, src, nbytes)

        stream.submit(run)

    def copy_sync(self, dst: int, src: int, nbytes: int, stream: HostStream) -> None:
        self.copy(dst, src, nbytes, stream)
        self.synchronize(stream)

    def record(self, stream: HostStream) -> HostEvent:
        event = HostEvent()
        stream.submit(event.set)
        return event

    def wait(self, stream: HostStream, event: HostEvent) -> None:
        stream.submit(event.synchronize)

    def synchronize(self, stream: HostStream) -> None:
        self.record(stream).synchronize()

    def host_alloc(self, nbytes: int, alignment: int = 64) -> np.ndarray:
        return tracked_array(bytearray, _address, nbytes, alignment, self.registry)

    def is_pinned(self, address: int, nbytes: int) -> bool:
        return self.registry.contains(address, nbytes)


def _address(memory: bytearray) -> int:
    return np.frombuffer(memory, dtype=np.uint8).ctypes.data
