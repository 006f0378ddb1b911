"""How each runtime mode represents a planned tensor: `PortableTensor` (portable) or `torch.Tensor` (ATen mode).

A method builds every tensor once at load over planned memory (a host arena slice or a device pointer); the
executor loop then only resizes them and hands them to kernels.
"""

from __future__ import annotations

import numpy as np
import torch

from ..devices.allocator import DeviceAllocator, DevicePtr
from ..tensors.aten_tensor import device_tensor, resize_metadata
from ..tensors.error import Error
from ..tensors.tensor import PortableTensor, TensorShapeDynamism
from .failures import ExecutionError
from .program import TensorSpec


def _dynamism(spec: TensorSpec) -> TensorShapeDynamism:
    return TensorShapeDynamism.DYNAMIC_BOUND if spec.dynamic else TensorShapeDynamism.STATIC


def _resize_problem(spec: TensorSpec, sizes: tuple[int, ...]) -> str:
    """Why a tensor planned as `spec` cannot take `sizes` (empty when it can)."""
    if len(sizes) != len(spec.sizes):
        return f"rank {len(spec.sizes)} cannot change to {len(sizes)} (sizes {spec.sizes} -> {sizes})"
    if not spec.dynamic and sizes != spec.sizes:
        return f"a STATIC tensor of sizes {spec.sizes} cannot take sizes {sizes}"
    for dim, (size, bound) in enumerate(zip(sizes, spec.sizes)):
        if size > bound:
            return f"sizes {sizes} exceed the planned upper bound {spec.sizes} in dimension {dim} ({size} > {bound})"
        if size != bound and not spec.may_vary(dim):
            return (
                f"dimension {dim} is static in the plan (size {bound}) and cannot take {size} (sizes {sizes}, "
                f"plan {spec.sizes}); export with a torch.export.Dim for it to vary"
            )
    return ""


class PortableTensors:
    """Portable mode: PortableTensors over arena bytes or device pointers."""

    mode = "portable"

    def host(self, spec: TensorSpec, storage: np.ndarray) -> PortableTensor:
        return PortableTensor(spec.dtype, spec.sizes, storage, dynamism=_dynamism(spec), capacity=spec.numel)

    def device(self, spec: TensorSpec, ptr: DevicePtr, allocator: DeviceAllocator) -> PortableTensor:
        return PortableTensor(
            spec.dtype, spec.sizes, ptr, device=spec.device, dynamism=_dynamism(spec), capacity=spec.numel
        )

    def constant(self, data: torch.Tensor) -> PortableTensor:
        return PortableTensor.from_torch(data)

    @staticmethod
    def sizes(tensor: PortableTensor) -> tuple[int, ...]:
        return tensor.sizes

    @staticmethod
    def resize(tensor: PortableTensor, spec: TensorSpec, sizes: tuple[int, ...], what: str) -> None:
        if tensor.sizes == sizes:
            return
        problem = _resize_problem(spec, sizes)
        if problem or tensor.resize(sizes) is not Error.Ok:
            raise ExecutionError(Error.InvalidArgument, f"{what}: {problem or tensor.resize_problem(sizes)}")

    @staticmethod
    def host_tensor(tensor: PortableTensor) -> torch.Tensor:
        return tensor.host_view()


class AtenTensors:
    """ATen mode: CPU torch tensors over arena bytes; device tensors from `aten_tensor` (wrapper or real CUDA)."""

    mode = "aten"

    def host(self, spec: TensorSpec, storage: np.ndarray) -> torch.Tensor:
        if spec.nbytes == 0:
            return torch.empty(spec.sizes, dtype=spec.dtype)
        return torch.from_numpy(storage[: spec.nbytes]).view(spec.dtype).view(spec.sizes)

    def device(self, spec: TensorSpec, ptr: DevicePtr, allocator: DeviceAllocator) -> torch.Tensor:
        return device_tensor(ptr, spec.dtype, spec.sizes, backend=allocator.backend)

    def constant(self, data: torch.Tensor) -> torch.Tensor:
        return data

    @staticmethod
    def sizes(tensor: torch.Tensor) -> tuple[int, ...]:
        return tuple(tensor.shape)

    @staticmethod
    def resize(tensor: torch.Tensor, spec: TensorSpec, sizes: tuple[int, ...], what: str) -> None:
        if tuple(tensor.shape) == sizes:
            return
        problem = _resize_problem(spec, sizes)
        if problem:
            raise ExecutionError(Error.InvalidArgument, f"{what}: {problem}")
        resize_metadata(tensor, sizes)

    @staticmethod
    def host_tensor(tensor: torch.Tensor) -> torch.Tensor:
        return tensor


MODES = {"portable": PortableTensors, "aten": AtenTensors}
