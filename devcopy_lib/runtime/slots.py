"""`Slot`: one planned tensor value of a loaded method, and the views device code computes on.

A slot holds the mode's tensor and the memory under it: host bytes (`storage`) or a device pointer with its
allocator. `code_view` gives what a delegate or a setter computes on: a view of device memory (built once when the
tensor is static) or the host tensor of a CPU value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..devices.allocator import DeviceAllocator, DevicePtr
from ..names import Mode
from .device_views import device_view
from .program import TensorSpec


class Slot:
    """One tensor value at run time: the mode's tensor, the memory under it (host bytes `storage`, or a device
    pointer with its allocator), and the views device code computes on."""

    __slots__ = ("spec", "tensor", "ptr", "allocator", "storage")  # names: attributes, not a device rule

    def __init__(
        self,
        spec: TensorSpec,
        tensor: Any,
        ptr: DevicePtr | None = None,
        allocator: DeviceAllocator | None = None,
        storage: np.ndarray | None = None,
    ) -> None:
        self.spec, self.tensor, self.ptr, self.allocator, self.storage = spec, tensor, ptr, allocator, storage

    @property
    def static(self) -> bool:
        return not self.spec.dynamic


def code_view(slot: Slot, tensors: Any) -> Callable[[], torch.Tensor]:
    """A getter of what device code computes on for `slot`: a view of device memory (built once when static) or
    the host tensor of a CPU value."""
    spec, sizes_of, ptr, allocator = slot.spec, tensors.sizes, slot.ptr, slot.allocator
    if ptr is None or allocator is None:
        if tensors.mode == Mode.ATEN or not slot.static:
            host_tensor, tensor = tensors.host_tensor, slot.tensor
            return lambda: host_tensor(tensor)
        fixed = tensors.host_tensor(slot.tensor)
        return lambda: fixed
    flat = device_view(allocator, ptr, spec.dtype, (spec.numel,))
    if slot.static:
        fixed = flat.view(spec.sizes)
        return lambda: fixed
    tensor = slot.tensor

    def dynamic_view() -> torch.Tensor:
        sizes = sizes_of(tensor)
        return flat[: math.prod(sizes)].view(sizes)

    return dynamic_view
