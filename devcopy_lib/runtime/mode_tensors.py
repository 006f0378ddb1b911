"""How each runtime mode represents a planned tensor: `PortableTensor` (portable) or `torch.Tensor` (ATen mode).

A method builds every tensor once at load over planned memory (a host arena slice or a device pointer); the
executor loop then only resizes them and hands them to kernels.

Both modes resize by one rule, `tensors.tensor.resize_problem` (docs/semantics.md §3.1, ExecuTorch's
`resize_tensor`): the rank never changes, a STATIC tensor keeps its sizes, a DYNAMIC_BOUND one takes any sizes whose
element count fits its planned capacity, so (4, 4) -> (2, 8) is accepted. ExecuTorch checks the element count, not
each dimension (TensorImpl::internal_resize_contiguous); the per-dimension limits torch.export states for a graph
input are checked where inputs are set (runtime/plan.py), not in the tensor rule.
"""

from __future__ import annotations

import numpy as np
import torch

from ..devices.allocator import DeviceAllocator, DevicePtr
from ..names import Mode
from ..tensors.aten_tensor import device_tensor, resize_metadata
from ..tensors.error import Error
from ..tensors.tensor import PortableTensor, TensorShapeDynamism, resize_problem
from .failures import ExecutionError
from .program import TensorSpec


def _dynamism(spec: TensorSpec) -> TensorShapeDynamism:
    return TensorShapeDynamism.DYNAMIC_BOUND if spec.dynamic else TensorShapeDynamism.STATIC


def _refuse(problem: str, what: str) -> None:
    """A resize the tensor rule refuses, as the call's InvalidArgument naming what was resized."""
    if problem:
        raise ExecutionError(Error.InvalidArgument, f"{what}: {problem}")


class PortableTensors:
    """Portable mode: PortableTensors over arena bytes or device pointers."""

    mode = Mode.PORTABLE

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
        if tensor.sizes != sizes:
            _refuse(tensor.resize_problem(sizes), what)
            tensor.resize(sizes)

    @staticmethod
    def host_tensor(tensor: PortableTensor) -> torch.Tensor:
        return tensor.host_view()


class AtenTensors:
    """ATen mode: CPU torch tensors over arena bytes; device tensors from `aten_tensor` (wrapper or real CUDA)."""

    mode = Mode.ATEN

    def host(self, spec: TensorSpec, storage: np.ndarray) -> torch.Tensor:
        if spec.nbytes == 0:
            return torch.empty(spec.sizes, dtype=spec.dtype)
        return torch.from_numpy(storage[: spec.nbytes]).view(spec.dtype).view(spec.sizes)

    def device(self, spec: TensorSpec, ptr: DevicePtr, allocator: DeviceAllocator) -> torch.Tensor:
        return device_tensor(ptr, spec.dtype, spec.sizes, allocator=allocator)

    def constant(self, data: torch.Tensor) -> torch.Tensor:
        return data

    @staticmethod
    def sizes(tensor: torch.Tensor) -> tuple[int, ...]:
        return tuple(tensor.shape)

    @staticmethod
    def resize(tensor: torch.Tensor, spec: TensorSpec, sizes: tuple[int, ...], what: str) -> None:
        current = tuple(tensor.shape)
        if current != sizes:
            _refuse(resize_problem(current, sizes, not spec.dynamic, spec.numel), what)
            resize_metadata(tensor, sizes)

    @staticmethod
    def host_tensor(tensor: torch.Tensor) -> torch.Tensor:
        return tensor


ModeTensors = PortableTensors | AtenTensors  # what a method builds its tensors with
TENSORS_BY_MODE: dict[str, type[PortableTensors] | type[AtenTensors]] = {
    Mode.PORTABLE: PortableTensors,
    Mode.ATEN: AtenTensors,
}
