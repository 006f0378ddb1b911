"""The simulated accelerator: host memory standing in for CUDA memory, opaque to host code.

It plays ExecuTorch's mock CUDA allocator (counters and last-call records live in `stats`) and more: any number of
device indices, a current index for index -1, device buffers that host code cannot read without a D2H copy, and
configurable peer access between indices for direct device-to-device copies.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..names import Backend, Direction, device_string
from .allocator import DeviceAllocator
from .capabilities import Capabilities
from .device import MAX_DEVICE_INDEX
from .errors import InvalidArgumentError, InvalidArgumentTypeError
from .host_registration import HostRegistrations
from .planned_copy import Transfer
from .pointers import DeviceBlock, DevicePtr
from .validation import check_inside_owner, resolve_index

# Fake device addresses: index i owns [(i + 1) * _ADDRESS_SPACE, (i + 2) * _ADDRESS_SPACE), so addresses never
# collide across indices; never dereferenceable from the host.
_ADDRESS_SPACE = 1 << 40


class SimulatedCudaAllocator(DeviceAllocator):
    """A stand-in CUDA device on host memory. It says so: `backend` is `Backend.SIMULATED`.

    `peer_access`: True (every pair of indices copies directly, like NVLink), False (none: every cross-device copy
    hops through host memory), or pairs `{(0, 1), ...}`, each granting both directions. `registrations`: a
    registration cache for reused pageable buffers (the CUDA backend's; here, to test it without CUDA)."""

    def __init__(
        self, peer_access: bool | Iterable[tuple[int, int]] = True, registrations: HostRegistrations | None = None
    ) -> None:
        super().__init__(registrations)
        self._peers = _peer_pairs(peer_access)
        self._current = 0
        self._next_address: dict[int, int] = {}
        self._address_lock = threading.Lock()  # threads allocating at once get distinct addresses

    backend = Backend.SIMULATED
    capabilities = Capabilities(real_device=False, device_clock=False, pinned_host=False, peer_copy=True)
    _memmove_planned = True  # planned copies memmove directly; a subclass's own copy hooks (fault injection) run

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if {"_copy_in", "_copy_out"} & set(vars(cls)):
            cls._memmove_planned = False

    def device_count(self) -> None:
        """Any number of indices: the simulated accelerator has as many devices as a test asks for."""
        return None

    def current_index(self) -> int:
        """The index set by `set_current_index` (0 at first)."""
        return self._current

    def describe_devices(self) -> list[dict[str, str]]:
        used = sorted({0, self._current, *self._next_address})
        return [{"device": device_string(i), "name": "simulated accelerator (host memory, not a GPU)"} for i in used]

    def set_current_index(self, index: int) -> None:
        """Make `index` the current device (what index -1 resolves to), like cudaSetDevice."""
        self._current = resolve_index(self, index)

    def _allocate(self, nbytes: int, index: int, alignment: int) -> DeviceBlock:
        if nbytes >= _ADDRESS_SPACE:
            raise MemoryError(f"the simulated {device_string(index)} has {_ADDRESS_SPACE} bytes of address space")
        memory = np.zeros(max(nbytes, 1), dtype=np.uint8)  # may raise MemoryError: the counter stays as it was
        with self._address_lock:
            base = self._next_address.get(index, (index + 1) * _ADDRESS_SPACE)
            address = -(-base // alignment) * alignment
            end = address + max(nbytes, 1)
            if end > (index + 2) * _ADDRESS_SPACE:
                raise MemoryError(
                    f"the simulated {device_string(index)} has used up its {_ADDRESS_SPACE} bytes of address space"
                )
            self._next_address[index] = end
        return DeviceBlock(index, nbytes, address, memory)

    def _free(self, block: DeviceBlock) -> None:
        block.drop_handle()

    def _borrowed_handle(self, address: int, nbytes: int, index: int, owner: Any) -> np.ndarray:
        """The simulated device's memory is NumPy's: `owner` is a writable C-contiguous array and the span lies
        inside it; the block keeps a uint8 view of exactly that span."""
        if not isinstance(owner, np.ndarray) or owner.dtype.hasobject or not owner.flags.c_contiguous:
            raise InvalidArgumentTypeError(
                f"borrow: the simulated device's memory is a C-contiguous NumPy array of plain data, got owner "
                f"{type(owner).__name__}; pass the array whose memory you borrow"
            )
        if not owner.flags.writeable:
            raise InvalidArgumentError("borrow: owner is read-only; device memory is written by copies")
        start = check_inside_owner(address, nbytes, owner.ctypes.data, owner.nbytes)
        return owner.reshape(-1).view(np.uint8)[start : start + nbytes]

    def _copy_in(self, dst: DevicePtr, src_address: int, nbytes: int, index: int) -> None:
        ctypes.memmove(dst.block.handle.ctypes.data + dst.offset, src_address, nbytes)

    def _copy_out(self, dst_address: int, src: DevicePtr, nbytes: int, index: int) -> None:
        ctypes.memmove(dst_address, src.block.handle.ctypes.data + src.offset, nbytes)

    def _planned_transfer(self, direction: str, ptr: DevicePtr, address: int, capacity: int, index: int) -> Transfer:
        """A planned copy on the buffer's own index: one memmove between addresses resolved now (the buffer stays
        alive with its method; PlannedCopy refuses it once freed)."""
        if ptr.index != index or not capacity or not self._memmove_planned:
            return super()._planned_transfer(direction, ptr, address, capacity, index)
        device, memmove = ptr.block.handle.ctypes.data + ptr.offset, ctypes.memmove
        if direction == Direction.H2D:
            return lambda nbytes: memmove(device, address, nbytes)
        return lambda nbytes: memmove(address, device, nbytes)

    def _peer_access(self, src_index: int, dst_index: int) -> bool:
        return self._peers if isinstance(self._peers, bool) else (src_index, dst_index) in self._peers

    def _copy_peer(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> None:
        ctypes.memmove(dst.block.handle.ctypes.data + dst.offset, src.block.handle.ctypes.data + src.offset, nbytes)

    def _device_view(self, ptr: DevicePtr, dtype: np.dtype[Any], shape: tuple[int, ...]) -> np.ndarray:
        """A NumPy view of the block's bytes (a delegate kernel's input/output); never for host code."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        raw: np.ndarray = ptr.block.handle[ptr.offset : ptr.offset + nbytes]
        return raw.view(dtype).reshape(shape)


def _peer_pairs(peer_access: Any) -> bool | frozenset[tuple[int, int]]:
    """`peer_access` as True / False or the set of index pairs (both directions), or an InvalidArgumentError."""
    if isinstance(peer_access, bool):
        return peer_access
    fix = "Pass True, False, or pairs like {(0, 1)}."
    try:
        pairs = [tuple(p) for p in peer_access]
    except TypeError:
        raise InvalidArgumentTypeError(
            f"peer_access must be True, False or index pairs, got {peer_access!r}. {fix}"
        ) from None
    bad = [p for p in pairs if len(p) != 2 or not all(_is_index(i) for i in p)]
    if bad:
        raise InvalidArgumentError(
            f"peer_access pairs must be (index, index) with indices in 0..{MAX_DEVICE_INDEX}, got {bad!r}. {fix}"
        )
    return frozenset((a, b) for a, b in pairs) | frozenset((b, a) for a, b in pairs)


def _is_index(value: Any) -> bool:
    """Whether `value` is a device index 0..MAX_DEVICE_INDEX (an int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_DEVICE_INDEX
