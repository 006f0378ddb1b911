"""`PortableTensor`: the portable runtime's tensor, carrying its device, as ExecuTorch's TensorImpl does after the
device-metadata change: dtype, sizes, dim order, shape dynamism with a planned capacity, and storage that is host
memory (a NumPy uint8 buffer) on CPU or a `DevicePtr` from the registered allocator on a device.

Host code reads only CPU tensors (`host_view()`, zero-copy); a device tensor's contents reach the host only through
a D2H copy. Construct one over planned memory with `PortableTensor(dtype, sizes, storage, ...)` (a memory planner
passes `arena[offset:offset + n]` or `device_base + offset`), or with `from_torch` / `empty`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, NoReturn

import numpy as np
import torch

from ..devices.allocator import DevicePtr
from ..devices.device import CPU, Device
from ..devices.errors import DeviceMemoryAccessError
from ..devices.registry import get_device_allocator
from ..errors import InvalidArgumentError, InvalidArgumentTypeError
from .error import Error

Storage = np.ndarray | DevicePtr


class TensorShapeDynamism(IntEnum):
    """ExecuTorch's shape dynamism: STATIC sizes never change; DYNAMIC_BOUND may take any sizes within the planned
    capacity; DYNAMIC_UNBOUND may grow (devcopy keeps it within capacity too: planned memory never moves)."""

    STATIC = 0
    DYNAMIC_BOUND = 1
    DYNAMIC_UNBOUND = 2

    @classmethod
    def _missing_(cls, value: Any) -> NoReturn:
        """Refuse a value that names no dynamism, with devcopy's kind and the valid ones."""
        raise InvalidArgumentError(f"{value!r} is not a TensorShapeDynamism; pass one of {', '.join(cls.__members__)}")


def contiguous_strides(sizes: Sequence[int], dim_order: Sequence[int]) -> tuple[int, ...]:
    """Strides of a dense tensor laid out in `dim_order` (outermost first), in elements, as PyTorch computes them."""
    strides = [0] * len(sizes)
    step = 1
    for dim in reversed(dim_order):
        strides[dim] = step
        step *= max(sizes[dim], 1)
    return tuple(strides)


def _check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    """`sizes` as a tuple of ints >= 0, or an InvalidArgumentError naming them."""
    try:
        sizes = tuple(sizes)
    except TypeError:
        raise InvalidArgumentTypeError(f"sizes must be a sequence of ints >= 0 like [2, 3], got {sizes!r}") from None
    if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in sizes):
        raise InvalidArgumentError(f"sizes must be ints >= 0, got {sizes!r}")
    return tuple(int(s) for s in sizes)


def resize_problem(current: tuple[int, ...], sizes: tuple[int, ...], static: bool, capacity: int) -> str:
    """Why a tensor of sizes `current` (STATIC or not, `capacity` elements planned) cannot take `sizes`, in words;
    empty when it can. ExecuTorch's resize rules, for both modes: docs/semantics.md §3.1."""
    if sizes == current:
        return ""
    if len(sizes) != len(current):
        return f"rank {len(current)} cannot change to {len(sizes)} (sizes {current} -> {sizes})"
    if static:
        return f"a STATIC tensor of sizes {current} cannot take sizes {sizes}; plan it DYNAMIC_BOUND"
    if math.prod(sizes) > capacity:
        return f"sizes {sizes} ({math.prod(sizes)} elements) exceed the planned capacity of {capacity} elements"
    return ""


class PortableTensor:
    """A tensor over planned (or owned) memory. `capacity` is in elements: the most this tensor may ever hold."""

    def __init__(
        self,
        dtype: torch.dtype,
        sizes: Sequence[int],
        storage: Storage,
        *,
        device: Device | str = CPU,
        dynamism: TensorShapeDynamism = TensorShapeDynamism.STATIC,
        capacity: int | None = None,
        dim_order: Sequence[int] | None = None,
    ) -> None:
        if not isinstance(dtype, torch.dtype):
            raise InvalidArgumentTypeError(f"dtype must be a torch.dtype (torch.float32, ...), got {dtype!r}")
        self.dtype = dtype
        self.sizes = _check_sizes(sizes)
        self.device = Device.parse(device)
        self.dynamism = TensorShapeDynamism(dynamism)
        self.dim_order = tuple(range(len(self.sizes))) if dim_order is None else tuple(dim_order)
        if sorted(self.dim_order) != list(range(len(self.sizes))):
            raise InvalidArgumentError(f"dim_order {self.dim_order} is not a permutation of 0..{len(self.sizes) - 1}")
        if capacity is not None and (not isinstance(capacity, (int, np.integer)) or isinstance(capacity, bool)):
            raise InvalidArgumentTypeError(f"capacity is a number of elements (an int), got {capacity!r}")
        self.capacity = self.numel if capacity is None else int(capacity)
        if self.capacity < self.numel:
            raise InvalidArgumentError(
                f"capacity {self.capacity} elements is below the {self.numel} elements of {self.sizes}"
            )
        self.storage = self._check_storage(storage)
        self.owner: torch.Tensor | None = None  # the torch tensor whose memory `storage` shares (from_torch)

    def _check_storage(self, storage: Storage) -> Storage:
        need = self.capacity_nbytes
        if self.device.is_cpu:
            if not (
                isinstance(storage, np.ndarray)
                and storage.dtype == np.uint8
                and storage.ndim == 1
                and storage.flags.c_contiguous
            ):
                raise InvalidArgumentTypeError(
                    f"a CPU tensor's storage is a contiguous 1-D np.uint8 array, got {storage!r:.80}"
                )
            if not storage.flags.writeable:
                raise InvalidArgumentError(
                    "a CPU tensor's storage must be writable (kernels write outputs and resizes in "
                    "place), got a read-only array; pass a copy: np.array(storage)"
                )
            have = storage.nbytes
        else:
            if not isinstance(storage, DevicePtr):
                raise InvalidArgumentTypeError(
                    f"a {self.device} tensor's storage is a DevicePtr from the registered allocator, got "
                    f"{type(storage).__name__}. Host memory cannot back a device tensor."
                )
            if storage.index != self.device.index:
                raise InvalidArgumentError(
                    f"storage {storage!r} is on index {storage.index}, the tensor on {self.device}"
                )
            have = storage.nbytes
        if have < need:
            raise InvalidArgumentError(
                f"storage holds {have} bytes but the tensor needs {need} ({self.capacity} x {self.dtype} elements)"
            )
        return storage

    # ---- constructors ---------------------------------------------------------------------------------------
    @classmethod
    def from_torch(
        cls,
        tensor: torch.Tensor,
        *,
        dynamism: TensorShapeDynamism = TensorShapeDynamism.STATIC,
        capacity: int | None = None,
    ) -> PortableTensor:
        """A CPU PortableTensor over `tensor`'s memory (zero-copy when it is contiguous and no extra capacity is
        asked for; otherwise over a copy)."""
        if tensor.device.type != "cpu":
            raise ValueError(f"from_torch takes a CPU tensor, got one on {tensor.device}; copy it with .cpu() first")
        numel = tensor.numel()
        capacity = numel if capacity is None else capacity
        if tensor.is_contiguous() and capacity == numel and not tensor.requires_grad:
            storage = tensor.reshape(-1).view(torch.uint8).numpy() if numel else np.zeros(0, np.uint8)
            result = cls(tensor.dtype, tensor.shape, storage, dynamism=dynamism)
            result.owner = tensor  # keep the torch storage alive
            return result
        result = cls.empty(tensor.dtype, tensor.shape, dynamism=dynamism, capacity=capacity)
        result.host_view().copy_(tensor.detach())
        return result

    @classmethod
    def empty(
        cls,
        dtype: torch.dtype,
        sizes: Sequence[int],
        device: Device | str = CPU,
        *,
        dynamism: TensorShapeDynamism = TensorShapeDynamism.STATIC,
        capacity: int | None = None,
        alignment: int = 64,
    ) -> PortableTensor:
        """A tensor with its own zeroed host memory, or device memory from the registered allocator."""
        device = Device.parse(device)
        sizes = _check_sizes(sizes)
        capacity = math.prod(sizes) if capacity is None else capacity
        nbytes = capacity * dtype.itemsize
        if device.is_cpu:
            storage: Storage = np.zeros(nbytes, dtype=np.uint8)
        else:
            allocator = get_device_allocator(device.type)
            if allocator is None:
                raise LookupError(
                    f"no DeviceAllocator registered for {device.type.name}: cannot allocate a {device} tensor. "
                    "Register one (register_device_allocator(SimulatedCudaAllocator()) or CupyCudaAllocator())."
                )
            storage = allocator.allocate(nbytes, index=device.index, alignment=alignment)
        return cls(dtype, sizes, storage, device=device, dynamism=dynamism, capacity=capacity)

    # ---- metadata -------------------------------------------------------------------------------------------
    @property
    def numel(self) -> int:
        return math.prod(self.sizes)

    @property
    def dim(self) -> int:
        return len(self.sizes)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    @property
    def capacity_nbytes(self) -> int:
        return self.capacity * self.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        return contiguous_strides(self.sizes, self.dim_order)

    @property
    def is_cpu(self) -> bool:
        return self.device.is_cpu

    def resize(self, sizes: Sequence[int], *, validate_only: bool = False) -> Error:
        """ExecuTorch's resize rules: the rank never changes; STATIC keeps its sizes; DYNAMIC_* take any sizes within
        the planned capacity. Returns Ok or InvalidArgument; `validate_only` checks without changing the tensor."""
        sizes = _check_sizes(sizes)
        if resize_problem(self.sizes, sizes, self.dynamism is TensorShapeDynamism.STATIC, self.capacity):
            return Error.InvalidArgument
        if not validate_only:
            self.sizes = sizes
        return Error.Ok

    def resize_problem(self, sizes: Sequence[int]) -> str:
        """Why `resize(sizes)` is refused, in words (empty when it is allowed)."""
        return resize_problem(
            self.sizes, _check_sizes(sizes), self.dynamism is TensorShapeDynamism.STATIC, self.capacity
        )

    # ---- host access ----------------------------------------------------------------------------------------
    def host_view(self) -> torch.Tensor:
        """A zero-copy torch view of this CPU tensor (over the whole capacity, so PyTorch may resize it in place)."""
        storage = self._host_storage("host_view")
        if self.capacity == 0:  # no bytes to share; PyTorch cannot reinterpret an empty byte tensor
            return torch.empty(self.sizes, dtype=self.dtype)
        flat = torch.from_numpy(storage[: self.capacity_nbytes]).view(self.dtype)
        return flat.as_strided(self.sizes, self.strides)

    def _host_storage(self, what: str) -> np.ndarray:
        """This CPU tensor's host bytes; DeviceMemoryAccessError for a device tensor (host code cannot read it)."""
        if not isinstance(self.storage, np.ndarray):
            raise DeviceMemoryAccessError(
                f"{what}() on a {self.device} tensor {self.sizes}: host code cannot read device memory. "
                "A D2H copy is missing: copy it to a CPU tensor with et_copy::_d2h_copy.out first."
            )
        return self.storage

    def __repr__(self) -> str:
        extra = "" if self.dynamism is TensorShapeDynamism.STATIC else f", {self.dynamism.name}({self.capacity})"
        return f"PortableTensor({self.device}, {self.dtype}, {list(self.sizes)}{extra})"
