"""Raw CUDA primitives through CuPy, unchecked and uncounted: the reference paths a benchmark times devcopy against.

They bypass the allocator on purpose (no validation, no statistics, no `cuda_status` wrapper in the timed call), so
only benchmarks use them; everything else copies through a `DeviceAllocator`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .cupy_cuda import MEMCPY_DEFAULT, import_cupy


class RawCuda:
    """cudaMemcpy, cudaMemcpyAsync, two streams joined by events, and CuPy's own H2D, at their bare cost."""

    def __init__(self) -> None:
        self._cupy = import_cupy()
        self._rt = self._cupy.cuda.runtime
        self.legacy_stream = self._cupy.cuda.Stream.null  # the stream a copy with no stream runs on
        self._side: Any = None

    def memcpy(self, dst: int, src: int, nbytes: int) -> None:
        """Blocking cudaMemcpy between two addresses."""
        self._rt.memcpy(dst, src, nbytes, MEMCPY_DEFAULT)

    def memcpy_async(self, dst: int, src: int, nbytes: int, stream: Any = None) -> None:
        """cudaMemcpyAsync on `stream` (None: the legacy stream)."""
        self._rt.memcpyAsync(dst, src, nbytes, MEMCPY_DEFAULT, 0 if stream is None else stream.ptr)

    def memcpy_async_sync(self, dst: int, src: int, nbytes: int) -> None:
        """cudaMemcpyAsync on the legacy stream, then cudaStreamSynchronize on it: the bare cost of a copy that has
        landed when the call returns, what `DeviceAllocator`'s synchronous copies do."""
        self._rt.memcpyAsync(dst, src, nbytes, MEMCPY_DEFAULT, 0)
        self._rt.streamSynchronize(0)

    def device_synchronize(self) -> None:
        """cudaDeviceSynchronize on the current device."""
        self._rt.deviceSynchronize()

    def cupy_upload(self, host: np.ndarray) -> Any:
        """CuPy's own H2D (`cupy.asarray`): a new device array holding `host`'s bytes."""
        return self._cupy.asarray(host)

    def fork_join(self, on_legacy: Callable[[], Any], on_side: Callable[[Any], Any]) -> Callable[[], None]:
        """A call running `on_legacy()` on the legacy stream and `on_side(stream)` on a non-blocking side stream at
        once, the legacy stream waiting for both (the events and the side stream are made here, outside timing)."""
        if self._side is None:
            self._side = self._cupy.cuda.Stream(non_blocking=True)
        legacy, side = self.legacy_stream, self._side
        fork, join = (self._cupy.cuda.Event(disable_timing=True) for _ in range(2))

        def both() -> None:
            fork.record(legacy)
            side.wait_event(fork)
            on_legacy()
            on_side(side)
            join.record(side)
            legacy.wait_event(join)

        return both
