"""Device code's view of device memory: a torch tensor over a DevicePtr (NumPy on the simulated device, CUDA via
DLPack with CuPy). Delegates compute on these views; host code never reads them."""

from __future__ import annotations

import functools

import numpy as np
import torch

from ..devices.allocator import DeviceAllocator, DevicePtr

_UINT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@functools.cache
def _numpy_dtype(dtype: torch.dtype) -> tuple[np.dtype, bool]:
    """The NumPy dtype to view `dtype`'s bytes with, and whether torch must reinterpret them (bfloat16)."""
    try:
        return torch.empty(0, dtype=dtype).numpy().dtype, False
    except TypeError:
        return torch.empty(0, dtype=_UINT_OF_SIZE[dtype.itemsize]).numpy().dtype, True


def device_view(allocator: DeviceAllocator, ptr: DevicePtr, dtype: torch.dtype, sizes: tuple[int, ...]) -> torch.Tensor:
    """A torch tensor over `ptr` with `dtype` and `sizes` (zero-copy), for device code only."""
    np_dtype, reinterpret = _numpy_dtype(dtype)
    array = allocator.device_array(ptr, np_dtype, sizes)
    tensor = torch.from_numpy(array) if isinstance(array, np.ndarray) else torch.utils.dlpack.from_dlpack(array)
    return tensor.view(dtype) if reinterpret else tensor
