"""ATen-mode device tensors: `torch.Tensor`s over device memory from the registered allocator.

- A backend without a real device (`capabilities.real_device` false): `SimulatedDeviceTensor`, a wrapper subclass
  labelled `cuda:i` (or `cpu` when it does not carry its device, like ExecuTorch's planned ATen tensors before the
  device-metadata change) over a `DevicePtr`. Only metadata queries work; any host read raises
  `DeviceMemoryAccessError` naming the missing D2H copy.
- A real device: a real CUDA tensor sharing the allocation through DLPack of the allocator's `device_array`, with
  its `DevicePtr` attached.
Resizing is metadata-only: the storage never grows (`resize_metadata`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.dlpack import from_dlpack

from ..devices.allocator import DeviceAllocator, DevicePtr
from ..devices.errors import DeviceMemoryAccessError
from ..names import device_string
from .tensor import contiguous_strides

_PTR_ATTR = "_devcopy_ptr"  # the DevicePtr attached to a real CUDA tensor made by `cuda_tensor`

# Metadata queries a wrapper answers itself (everything else would read device memory from the host).
_aten = torch.ops.aten
_METADATA: dict[Any, Callable[[SimulatedDeviceTensor], object]] = {
    _aten.sym_size.default: lambda t: t.held_sizes,
    _aten.sym_stride.default: lambda t: contiguous_strides(t.held_sizes, range(len(t.held_sizes))),
    _aten.sym_numel.default: lambda t: math.prod(t.held_sizes),
    _aten.sym_storage_offset.default: lambda t: 0,
    _aten.dim.default: lambda t: len(t.held_sizes),
    _aten.is_contiguous.default: lambda t: True,
    _aten.is_contiguous.memory_format: lambda t: True,
}


# Operator name -> kernel run when an eager call reaches a simulated device tensor. The kernels layer fills it (this
# layer stands below kernels and must not import them).
_EAGER_KERNELS: dict[str, Callable[..., torch.Tensor]] = {}


def register_eager_kernel(op: str, kernel: Callable[..., torch.Tensor]) -> None:
    """Let eager calls of `op` (e.g. `et_copy::_h2d_copy.out`) on simulated device tensors run `kernel`."""
    _EAGER_KERNELS[op] = kernel


class SimulatedDeviceTensor(torch.Tensor):
    """A torch.Tensor over simulated device memory: `ptr` (a DevicePtr) holds its bytes; host reads raise."""

    ptr: DevicePtr
    held_sizes: tuple[int, ...]  # the sizes torch is told (sym_size and the other metadata queries)

    @staticmethod
    def __new__(
        cls: type[SimulatedDeviceTensor],
        ptr: DevicePtr,
        dtype: torch.dtype,
        sizes: Sequence[int],
        carry_device: bool = True,
    ) -> SimulatedDeviceTensor:
        device = torch.device("cuda", ptr.index) if carry_device else torch.device("cpu")
        tensor = torch.Tensor._make_wrapper_subclass(
            cls, tuple(sizes), dtype=dtype, device=device, dispatch_sizes_strides_policy="sizes"
        )
        tensor.held_sizes = tuple(int(s) for s in sizes)
        tensor.ptr = ptr
        return tensor

    # torch's documented way to keep __torch_function__ out; its stub types the attribute as a classmethod
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]  # torch types the base as a plain attribute, not a classmethod
        cls,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """Answer metadata queries, run an eager et_copy kernel, refuse any other (host-reading) op."""
        if func in _METADATA:
            return _METADATA[func](args[0])
        kernel = _EAGER_KERNELS.get(func.name())  # type: ignore[no-untyped-call]  # OpOverload.name has no annotation
        if kernel is not None:  # eager et_copy calls run the kernel registered for them (kernels/registration.py)
            return kernel(*args, **(kwargs or {}))
        raise DeviceMemoryAccessError(
            f"{func} on a tensor in simulated device memory ({describe(args[0])}): host code cannot read device "
            "memory. A D2H copy is missing: copy it to a CPU tensor with et_copy::_d2h_copy.out first."
        )

    def __repr__(self) -> str:  # type: ignore[override]  # mypy refuses overrides of the untyped Tensor.__repr__
        return f"SimulatedDeviceTensor({describe(self)})"


def describe(tensor: torch.Tensor) -> str:
    """Where a device tensor's memory lives and what it holds, without reading it (for messages)."""
    ptr = getattr(tensor, "ptr", None) or getattr(tensor, _PTR_ATTR, None)
    where = device_string(ptr.index) if ptr is not None else str(tensor.device)
    return f"{where}, {tensor.dtype}, {list(tensor.shape)}, labelled {tensor.device}"


def device_tensor(
    ptr: DevicePtr,
    dtype: torch.dtype,
    sizes: Sequence[int],
    *,
    carry_device: bool = True,
    allocator: DeviceAllocator | None = None,
) -> torch.Tensor:
    """An ATen-mode tensor over device memory `ptr` from `allocator`: a real CUDA tensor where the allocator's
    `capabilities.real_device` says the memory is a real accelerator's, else a wrapper (also for `allocator=None`,
    tests' hand-made tensors). `carry_device=False` labels a wrapper `cpu` (an ATen planned tensor that does not
    carry its device); a real CUDA tensor always carries its device."""
    if allocator is None or not allocator.capabilities.real_device:
        return SimulatedDeviceTensor(ptr, dtype, sizes, carry_device)
    return cuda_tensor(ptr, dtype, sizes, allocator)


def cuda_tensor(ptr: DevicePtr, dtype: torch.dtype, sizes: Sequence[int], allocator: DeviceAllocator) -> torch.Tensor:
    """A real CUDA tensor sharing the device allocation behind `ptr`: the allocator's device view of its bytes,
    through DLPack (zero-copy)."""
    nbytes = ptr.nbytes
    if nbytes:
        flat = from_dlpack(allocator.device_array(ptr, np.uint8, (nbytes,)))
        tensor = flat[: math.prod(sizes) * dtype.itemsize].view(dtype).view(tuple(sizes))
    else:
        tensor = torch.empty(tuple(sizes), dtype=dtype, device=device_string(ptr.index))
    setattr(tensor, _PTR_ATTR, ptr)
    return tensor


def device_ptr(tensor: torch.Tensor) -> DevicePtr | None:
    """The DevicePtr behind an ATen-mode device tensor made here, or None for any other tensor."""
    if isinstance(tensor, SimulatedDeviceTensor):
        return tensor.ptr
    return getattr(tensor, _PTR_ATTR, None)


@contextlib.contextmanager
def device_memory(tensor: torch.Tensor, allocator: DeviceAllocator) -> Iterator[DevicePtr]:
    """The DevicePtr to copy to/from for an ATen-mode device tensor: its own, or, for a CUDA tensor PyTorch
    allocated (eager `torch.ops.et_copy` calls), its memory borrowed by `allocator` for the copy."""
    ptr = device_ptr(tensor)
    if ptr is not None:
        yield ptr
    elif tensor.device.type == "cuda" and not isinstance(tensor, SimulatedDeviceTensor):
        with allocator.borrow(tensor.data_ptr(), writable_nbytes(tensor), tensor.device.index or 0, tensor) as ptr:
            yield ptr
    else:
        raise RuntimeError(
            f"{describe(tensor)} is not backed by device memory: make ATen-mode device tensors with "
            "devcopy_lib.tensors.aten_tensor.device_tensor(ptr, dtype, sizes)"
        )


def writable_nbytes(tensor: torch.Tensor) -> int:
    """Bytes from the tensor's first element to the end of its storage (what a resize may use)."""
    if isinstance(tensor, SimulatedDeviceTensor):
        return tensor.ptr.nbytes
    return int(tensor.untyped_storage().nbytes() - tensor.storage_offset() * tensor.element_size())


def resize_metadata(tensor: torch.Tensor, sizes: Sequence[int]) -> None:
    """Resize without growing storage (the caller checked the bytes fit): sizes/strides only."""
    if isinstance(tensor, SimulatedDeviceTensor):
        tensor.held_sizes = tuple(int(s) for s in sizes)
    elif tuple(tensor.shape) != tuple(sizes):
        tensor.resize_(tuple(sizes))
