"""The checks the public allocator calls run before any native call: device indices, a copy's pointers and host
buffer (in ExecuTorch's order), device-code views, borrowed spans. Plain functions over public names: the live set
(`LiveBlocks`) and the backend's topology (`device_count`, `current_index`) are passed in.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..names import CURRENT_DEVICE, device_string
from .device import MAX_DEVICE_INDEX
from .errors import InvalidArgumentError, InvalidArgumentTypeError
from .host_buffers import check_count, host_address, quick_host_address
from .live_blocks import LiveBlocks
from .pointers import DeviceBlock, DevicePtr


class Topology(Protocol):
    """The device indices a backend sees (its public hooks)."""

    @property
    def backend(self) -> str: ...
    def device_count(self) -> int | None: ...
    def current_index(self) -> int: ...


def resolve_index(topology: Topology, index: int) -> int:
    """A valid device index for `index` (-1: the current one), or InvalidArgumentError naming the valid range."""
    if not isinstance(index, int) or isinstance(index, bool) or not CURRENT_DEVICE <= index <= MAX_DEVICE_INDEX:
        raise (InvalidArgumentError if isinstance(index, int) else InvalidArgumentTypeError)(
            f"device index must be an int in -1..{MAX_DEVICE_INDEX} (-1: the current device), got {index!r}"
        )
    if index == CURRENT_DEVICE:
        return topology.current_index()
    count = topology.device_count()
    if count is not None and index >= count:
        raise InvalidArgumentError(
            f"device index {index} is out of range: {topology.backend} sees {count} device(s), valid 0..{count - 1}"
        )
    return index


def check_index(ptr: DevicePtr, index: int, what: str) -> None:
    """An explicit device index must be the one `ptr` lives on (-1, the current device, is not checked: on CUDA a
    copy reaches any device's memory through the unified address space)."""
    if index != CURRENT_DEVICE and index != ptr.block.index:
        raise InvalidArgumentError(
            f"{what}: {ptr!r} lives on {device_string(ptr.block.index)} but index {index} was passed; pass "
            f"{ptr.block.index} (the pointer's device) or -1"
        )


def start_copy(
    topology: Topology,
    blocks: LiveBlocks,
    what: str,
    device: Any,
    host: Any,
    nbytes: int,
    index: int,
    *,
    writable: bool,
    count_name: str = "nbytes",
) -> tuple[int, int, int]:
    """The checks every copy starts with, in ExecuTorch's order: null pointers (before the zero-byte shortcut), the
    size, the index; then the device pointer (live, even for 0 bytes; the span fits; on device `index`) and the host
    buffer (it holds the bytes; writable for a destination). Returns (nbytes, the resolved index, the host address);
    the caller marks the buffer busy for the copy and counts the call once it succeeded."""
    if device is None or host is None or (isinstance(host, int) and not isinstance(host, bool) and host == 0):
        raise InvalidArgumentError(f"{what}: null pointer (device or host); pass a DevicePtr and a host buffer")
    nbytes = check_count(count_name, nbytes)
    resolved = resolve_index(topology, index)
    blocks.check_span(device, nbytes, what)
    check_index(device, index, what)
    return nbytes, resolved, host_address(host, nbytes, writable=writable, what=what)


def quick_copy_address(
    live: dict[int, DeviceBlock], device: Any, host: Any, nbytes: Any, index: Any, writable: bool
) -> int:
    """The host address of a copy when it is the common case that passes every check of `start_copy` - a DevicePtr
    live in `live` (`LiveBlocks.live`) with room for `nbytes` > 0, index -1 or its device, a plain NumPy array
    holding the bytes - found in well under a microsecond with no allocation; 0 for anything else (then `start_copy`
    checks in full and names what is wrong)."""
    if nbytes.__class__ is not int or device.__class__ is not DevicePtr or index.__class__ is not int:
        return 0
    block = device.block
    if (
        live.get(block.serial) is not block
        or nbytes > block.nbytes - device.offset
        or (index != CURRENT_DEVICE and index != block.index)
    ):
        return 0
    return quick_host_address(host, nbytes, writable)


def view_dtype(dtype: Any) -> np.dtype[Any]:
    """A NumPy dtype device code can view bytes as (numeric, with a size), or an InvalidArgumentTypeError."""
    resolved: np.dtype[Any] | None
    try:
        resolved = np.dtype(dtype)
    except (TypeError, ValueError):
        resolved = None
    if dtype is None or resolved is None or resolved.hasobject or resolved.itemsize == 0:
        raise InvalidArgumentTypeError(
            f"device_array: dtype {dtype!r} is not a NumPy dtype of plain data; pass one like np.float32 or 'uint8'"
        )
    return resolved


def view_shape(shape: Any) -> tuple[int, ...]:
    """`shape` as a tuple of ints >= 0 (an int is a 1-d shape), or an InvalidArgumentError naming it."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        items = tuple(dims)
    except TypeError:
        items = (None,)
    if any(not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 0 for d in items):
        raise InvalidArgumentError(
            f"device_array: shape must be ints >= 0, got {shape!r}; pass the view's sizes, like (4, 16)"
        )
    return tuple(int(d) for d in items)


def check_borrow_address(address: Any) -> int:
    """A borrowed span's start: an int > 0 (a device pointer), or an InvalidArgumentError."""
    if not isinstance(address, int) or isinstance(address, bool) or address <= 0:
        raise InvalidArgumentError(f"borrow: address must be an int > 0, got {address!r}; pass tensor.data_ptr()")
    return address


def check_inside_owner(address: int, nbytes: int, start: int, size: int) -> int:
    """The offset of a borrowed span `[address, address + nbytes)` inside its owner's `[start, start + size)`, or an
    InvalidArgumentError: borrowing never reaches memory the owner does not hold."""
    if not start <= address or address + nbytes > start + size:
        raise InvalidArgumentError(
            f"borrow: {nbytes} bytes at 0x{address:x} are not inside the owner's memory (0x{start:x}, {size} bytes); "
            "borrow a span of the owner's own memory (its data pointer, at most its size)"
        )
    return address - start


def borrowed_owner(address: int, nbytes: int, index: int, owner: Any) -> Any:
    """`owner` once `[address, address + nbytes)` is known to lie inside the device memory it holds on device
    `index`: a CUDA torch tensor or an object with `__cuda_array_interface__` (a CuPy array)."""
    start, size, where = _device_span(owner)
    if where is not None and where != index:
        raise InvalidArgumentError(
            f"borrow: owner lives on {device_string(where)} but index {index} was passed; pass {where}"
        )
    check_inside_owner(address, nbytes, start, size)
    return owner


def _device_span(owner: Any) -> tuple[int, int, int | None]:
    """(start, bytes, device index or None) of the device memory `owner` holds, or an InvalidArgumentTypeError."""
    if callable(getattr(owner, "untyped_storage", None)) and getattr(owner, "is_cuda", False):
        storage = owner.untyped_storage()
        return int(storage.data_ptr()), int(storage.nbytes()), owner.device.index
    try:
        interface = getattr(owner, "__cuda_array_interface__", None)
    except (TypeError, RuntimeError):  # a CPU torch tensor's property raises instead of being absent
        interface = None
    if isinstance(interface, dict) and isinstance(getattr(owner, "nbytes", None), int):
        device = getattr(getattr(owner, "device", None), "id", None)
        return int(interface["data"][0]), owner.nbytes, device if isinstance(device, int) else None
    raise InvalidArgumentTypeError(
        f"borrow: owner must hold the device memory (a CUDA torch tensor or a CuPy array), got "
        f"{type(owner).__name__}; pass the tensor whose memory you borrow"
    )
