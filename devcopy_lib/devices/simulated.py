"""The simulated accelerator: host memory standing in for CUDA memory, opaque to host code.

It plays ExecuTorch's mock CUDA allocator (counters and last-call records live in `stats`) and more: any number of
device indices, a current index for index -1, and device buffers that host code cannot read without a D2H copy.
"""
from __future__ import annotations

import ctypes
import itertools

import numpy as np

from .allocator import DeviceAllocator, DeviceBlock, DevicePtr
from .device import DeviceType

# Fake device addresses: distinct per index, never dereferenceable from the host.
_ADDRESS_SPACE = 1 << 40


class SimulatedCudaAllocator(DeviceAllocator):
    """A stand-in CUDA device on host memory. It says so: `backend == "simulated"`."""

    def __init__(self) -> None:
        super().__init__()
        self._current = 0
        self._next_address = {}
        self._ids = itertools.count()

    backend = "simulated"  # type: ignore[assignment]

    def device_type(self) -> DeviceType:
        return DeviceType.CUDA

    def device_count(self) -> None:
        return None

    def current_index(self) -> int:
        return self._current

    def describe_devices(self) -> list[dict]:
        used = sorted({0, self._current, *self._next_address})
        return [{"device": f"cuda:{i}", "name": "simulated accelerator (host memory, not a GPU)"} for i in used]

    def set_current_index(self, index: int) -> None:
        """Make `index` the current device (what index -1 resolves to), like cudaSetDevice."""
        self._current = self._resolve_index(index)

    def _allocate(self, nbytes: int, index: int, alignment: int) -> DeviceBlock:
        base = self._next_address.get(index, (index + 1) * _ADDRESS_SPACE)
        address = -(-base // alignment) * alignment
        self._next_address[index] = address + max(nbytes, 1)
        return DeviceBlock(index, nbytes, address, np.zeros(max(nbytes, 1), dtype=np.uint8))

    def _free(self, block: DeviceBlock) -> None:
        block.handle = None

    def _copy_in(self, dst: DevicePtr, src_address: int, nbytes: int, index: int) -> None:
        ctypes.memmove(dst.block.handle.ctypes.data + dst.offset, src_address, nbytes)

    def _copy_out(self, dst_address: int, src: DevicePtr, nbytes: int, index: int) -> None:
        ctypes.memmove(dst_address, src.block.handle.ctypes.data + src.offset, nbytes)

    def device_array(self, ptr: DevicePtr, dtype, shape) -> np.ndarray:
        """Device code's view of device memory (a delegate kernel's input/output); never for host code."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        self._check_span(ptr, count * dtype.itemsize, "device_array")
        raw = ptr.block.handle[ptr.offset : ptr.offset + count * dtype.itemsize]
        return raw.view(dtype).reshape(shape)
