"""The capture-safe form of a planned host<->device copy on CUDA: one cudaMemcpyAsync on a given stream and no
synchronisation, so a CUDA graph can record it (the planned copy synchronises, which a stream capture refuses).
Used by runtime/capture.py only where `allocator.capabilities.graphs` holds; CuPy is imported at the first copy."""

from __future__ import annotations

from collections.abc import Callable

from .cuda_status import cuda_status
from .cupy_cuda import MEMCPY_DEFAULT, import_cupy

StreamCopy = Callable[[int], None]


def stream_copy(dst: int, src: int, nbytes: int) -> StreamCopy:
    """`copy(stream)` enqueues `nbytes` from address `src` to `dst` (pinned host or device memory, the direction
    from the unified address space) on CUDA stream `stream` (a raw cudaStream_t) and returns at once."""
    runtime = import_cupy().cuda.runtime

    def copy(stream: int) -> None:
        with cuda_status("captured cudaMemcpyAsync of {} bytes (0x{:x} -> 0x{:x})", nbytes, src, dst):
            runtime.memcpyAsync(dst, src, nbytes, MEMCPY_DEFAULT, stream)

    return copy
