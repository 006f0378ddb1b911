"""The one place CUDA statuses become exceptions: every CuPy/CUDA call of the backend runs in `cuda_status(what)`."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from types import TracebackType
from typing import Literal

from .errors import DeviceCopyError

OOM_NAMES = ("cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY")


class CudaError(DeviceCopyError):
    """A CUDA call failed; `name` is CUDA's error name (`cudaErrorInvalidValue`), `status` its number."""

    def __init__(self, message: str, name: str, status: int | None) -> None:
        super().__init__(message)
        self.name, self.status = name, status


def decode(exc: BaseException) -> tuple[str, str, int | None]:
    """(name, description, status) of a CuPy CUDA exception, e.g. ('cudaErrorInvalidValue', 'invalid argument', 1)."""
    status = getattr(exc, "status", None)
    text = str(exc)
    name, _, description = text.partition(": ")
    if not name.startswith(("cuda", "CUDA_")):
        name, description = type(exc).__name__, text
    return name, description or name, status


@functools.cache
def _last_error_readers() -> tuple[Callable[[], int], ...]:
    """`cudaGetLastError` of each CUDA runtime library mapped into this process (torch's and CuPy's may be one
    library or two), found in /proc/self/maps once the runtime is loaded; none where that file does not exist."""
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "libcudart" in line and "/" in line})
    except OSError:
        return ()
    readers = []
    for path in paths:
        reader = getattr(ctypes.CDLL(path), "cudaGetLastError", None)
        if reader is not None:
            reader.restype = ctypes.c_int
            readers.append(reader)
    return tuple(readers)


def reset_last_error() -> None:
    """Clear the thread's last CUDA error after a failure was handled here. A refused call (a host range already
    registered, say) leaves its status behind, and torch's next kernel-launch check would raise it as its own."""
    for read in _last_error_readers():
        read()


class cuda_status:  # noqa: N801 - used like a function: `with cuda_status("copy {} bytes", n):`
    """Context manager: a CUDA failure inside becomes MemoryError (out of memory) or CudaError naming what failed
    (`what.format(*args)`, formatted only on failure: this sits on the small-copy path)."""

    __slots__ = ("what", "args")

    def __init__(self, what: str, *args: object) -> None:
        self.what, self.args = what, args

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc is None or kind is None or isinstance(exc, (MemoryError, DeviceCopyError)) or not _is_cuda_error(kind):
            return False
        reset_last_error()
        name, description, status = decode(exc)
        what = self.what.format(*self.args)
        if name in OOM_NAMES or kind.__name__ == "OutOfMemoryError":
            raise MemoryError(f"{what}: CUDA is out of memory ({name}: {description})") from exc
        raise CudaError(
            f"{what} failed: {name} ({description}, status {status}). Check the pointers, sizes and device "
            "index passed; after a sticky error (cudaErrorIllegalAddress, ...) the process must restart.",
            name,
            status,
        ) from exc


def _is_cuda_error(kind: type) -> bool:
    return kind.__module__.startswith(("cupy", "cupy_backends", "cuda")) or kind.__name__ in (
        "CUDARuntimeError",
        "CUDADriverError",
        "OutOfMemoryError",
    )
