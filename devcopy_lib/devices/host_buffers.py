"""The host side of a copy: byte counts and host buffers, checked once.

A host buffer is an object that owns its bytes - a NumPy array, a bytearray or another buffer-protocol object, or a
CPU torch tensor - never a bare int taken for an address: an int could point anywhere, and the copy would write
there (docs/reliability.md, "Allocators").
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import numpy as np

from .errors import InvalidArgumentError, InvalidArgumentTypeError

HostBuffer = memoryview | bytearray | np.ndarray | Any
MAX_COUNT = (1 << 63) - 1  # a byte count must fit CUDA's size_t and ctypes' ssize_t
_KINDS = "a NumPy array, a bytearray (any C-contiguous buffer-protocol object) or a CPU torch tensor"
_read_pointer = ctypes.c_void_p.from_address


def _data_offset() -> int:
    """Where an ndarray's data pointer sits in its C struct (right after the object header, NumPy's stable ABI:
    `PyArrayObject_fields.data`), checked against `ndarray.ctypes` here; 0 where it does not hold (then
    `array_address` asks NumPy)."""
    offset = object.__basicsize__
    probes = [np.empty(n, np.uint8) for n in (1, 4096, 1 << 20)]
    probes.append(probes[-1][7:])
    ok = all(_read_pointer(id(p) + offset).value == p.ctypes.data for p in probes)
    return offset if ok else 0


_DATA_OFFSET = _data_offset()


def array_address(buf: np.ndarray) -> int:
    """The data address of an ndarray: the struct field read directly (about 80 ns; NumPy's `__array_interface__`
    builds a dict each call, about 0.9 us, a tenth of a 4 KiB pinned copy)."""
    if _DATA_OFFSET:
        address = _read_pointer(id(buf) + _DATA_OFFSET).value
        if address:
            return address
    return int(buf.__array_interface__["data"][0])


def quick_host_address(buf: Any, nbytes: int, writable: bool) -> int:
    """`host_address` for the common case only - a plain C-contiguous NumPy array of data holding `nbytes` > 0
    (writable when `writable`) - else 0, and the caller takes `host_address` for the message."""
    if buf.__class__ is not np.ndarray or not 0 < nbytes <= buf.nbytes:
        return 0
    flags = buf.flags  # a new object on every read: read once (this is the small-copy path)
    if flags.c_contiguous and (not writable or flags.writeable) and not buf.dtype.hasobject:
        address: int | None = _read_pointer(id(buf) + _DATA_OFFSET).value if _DATA_OFFSET else 0
        return address or array_address(buf)  # `array_address` inlined: this is the small-copy path
    return 0


def check_count(name: str, value: int) -> int:
    """`value` as a Python int (NumPy ints would overflow address arithmetic), or an InvalidArgumentError."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise InvalidArgumentTypeError(
            f"{name} must be an int >= 0, got {value!r} ({type(value).__name__}); pass a whole number of bytes"
        )
    if not 0 <= value <= MAX_COUNT:
        raise InvalidArgumentError(f"{name} must be an int >= 0, got {value!r}; pass a byte count in 0..2**63-1")
    return int(value)


def check_alignment(alignment: int, most: int) -> int:
    """`alignment` when it is a power of two in 1..`most`, else an InvalidArgumentError naming it."""
    if (
        not isinstance(alignment, int)
        or isinstance(alignment, bool)
        or not 0 < alignment <= most
        or alignment & (alignment - 1)
    ):
        raise InvalidArgumentError(
            f"alignment must be a power of two no larger than {most}, got {alignment!r}; pass 1, 2, 4, ... {most}"
        )
    return alignment


def host_size(buf: HostBuffer, nbytes: int | None, what: str) -> tuple[int, int]:
    """(address, bytes) of `nbytes` of host buffer `buf` (None: all of it), checked as `host_address` checks."""
    if nbytes is None:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(buf, torch.Tensor):
            nbytes = buf.numel() * buf.element_size()
        else:
            nbytes = buf.nbytes if isinstance(buf, np.ndarray) else _buffer_bytes(buf)
    nbytes = check_count("nbytes", nbytes)
    return host_address(buf, nbytes, writable=False, what=what), nbytes


def _buffer_bytes(buf: Any) -> int:
    """The size of a buffer-protocol object (0 for anything else: `host_address` then names the problem)."""
    try:
        return memoryview(buf).nbytes
    except (TypeError, ValueError):
        return 0


def host_address(buf: HostBuffer, nbytes: int, *, writable: bool, what: str) -> int:
    """The address of host buffer `buf` once it is known to hold `nbytes` contiguous bytes (writable ones for a
    destination); an InvalidArgumentError naming the problem otherwise."""
    address = quick_host_address(buf, nbytes, writable)
    if address:
        return address  # fast path (small copies): the checks below all pass
    if buf is None or (isinstance(buf, int) and not isinstance(buf, bool) and buf == 0):
        raise InvalidArgumentError(f"{what}: null host pointer; pass {_KINDS}")
    torch = sys.modules.get("torch")  # a tensor exists only once torch was imported: no import here
    if torch is not None and isinstance(buf, torch.Tensor):
        return _tensor_address(buf, nbytes, what)
    if isinstance(buf, np.ndarray) and buf.dtype.hasobject:
        raise InvalidArgumentTypeError(
            f"{what}: host buffer has dtype {buf.dtype} (Python object references, not data); pass a numeric array"
        )
    try:
        view = memoryview(buf)  # type: ignore[arg-type]  # numpy declares ndarray.__buffer__ for Python >= 3.12 only
    except (TypeError, ValueError):
        raise InvalidArgumentTypeError(
            f"{what}: host memory must be {_KINDS}, got {_describe(buf)}"
            + ("; a bare int is never taken as an address: pass the array itself" if isinstance(buf, int) else "")
        ) from None
    if not view.c_contiguous:
        raise InvalidArgumentError(f"{what}: host buffer is not contiguous; copy it into a contiguous array first")
    if writable and view.readonly:
        raise InvalidArgumentError(f"{what}: host destination is read-only; pass a writable buffer")
    if nbytes > view.nbytes:
        raise InvalidArgumentError(
            f"{what}: {nbytes} bytes requested but the host buffer holds {view.nbytes} bytes; pass a larger buffer"
        )
    if view.nbytes == 0:
        return 1  # a valid, never-dereferenced address for an empty buffer
    return int(np.frombuffer(view.cast("B"), dtype=np.uint8).ctypes.data)


def _tensor_address(tensor: Any, nbytes: int, what: str) -> int:
    """The address of a dense CPU torch tensor that holds `nbytes` from its first element to the end of its storage."""
    torch = sys.modules["torch"]
    if tensor.device.type != "cpu" or tensor.layout != torch.strided:
        raise InvalidArgumentTypeError(
            f"{what}: host memory must be a dense CPU tensor, got a {tensor.layout} tensor on {tensor.device}; "
            "pass tensor.to_dense().cpu()"
        )
    try:
        contiguous, address = tensor.is_contiguous(), int(tensor.data_ptr())
        room = tensor.untyped_storage().nbytes() - tensor.storage_offset() * tensor.element_size()
    except RuntimeError as exc:  # a wrapper subclass (a simulated device tensor) has no host storage
        raise InvalidArgumentTypeError(
            f"{what}: host memory must be a CPU tensor with storage, got {type(tensor).__name__} ({exc})"
        ) from None
    if not contiguous:
        raise InvalidArgumentError(f"{what}: host tensor is not contiguous; pass tensor.contiguous()")
    if nbytes > room:
        raise InvalidArgumentError(
            f"{what}: {nbytes} bytes requested but the host tensor holds {room} bytes; pass a larger tensor"
        )
    if room and not address:
        raise InvalidArgumentTypeError(f"{what}: {type(tensor).__name__} has no host memory; pass a CPU tensor")
    return address if room else 1


def _describe(value: Any) -> str:
    """A value for a message: its type and a short repr."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
