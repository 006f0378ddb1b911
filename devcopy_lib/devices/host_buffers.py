"""The host side of a copy: byte counts and host buffers (buffer-protocol objects or int addresses), checked once."""

from __future__ import annotations

from typing import Any

import numpy as np

HostBuffer = int | memoryview | bytearray | np.ndarray | Any


def check_count(name: str, value: int) -> int:
    """`value` as a Python int (NumPy ints would overflow address arithmetic), or ValueError."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return int(value)


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
        return int(buf.__array_interface__["data"][0])  # fast path (small copies): the checks below all pass
    try:
        view = memoryview(buf)  # type: ignore[arg-type]  # numpy declares ndarray.__buffer__ for Python >= 3.12 only
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
    return int(np.frombuffer(view.cast("B"), dtype=np.uint8).ctypes.data)
