"""The et_copy kernels: `_h2d_copy.out` / `_d2h_copy.out` in the portable runtime and in the ATen-mode runtime.

Portable (docs/semantics.md §3): `(ctx, self, out) -> out`; direction and device from tensor metadata; failures go on the context.
devcopy differences: `out` is left exactly as it was on every failure (the resize is validated at step 3, applied
once the allocator is found, undone if the copy fails), and a dtype check at step 3 (ExecuTorch copies the bytes).
ATen mode (docs/semantics.md §4): `(self, out) -> out`; raises. Device rule `seed`: direction from the op identity, the CUDA
allocator at index -1 (the current device), as ExecuTorch's ATen-mode kernel; `tensor`: honour the device the tensor carries (docs/semantics.md §8),
falling back to `seed` when it carries none. Every copy goes through the registered DeviceAllocator.
`_d2d_copy.out` (devcopy's addition): device -> device, both tensors on devices, through
`DeviceAllocator.copy_device_to_device` (direct peer copy, or a host hop without peer access); the same checks in
the same order; in ATen mode both devices come from the memory the tensors point to, under either device rule.
"""

from __future__ import annotations

import functools

import torch

from ..devices.device import DeviceType
from ..devices.errors import DeviceCopyError
from ..devices.registry import get_device_allocator
from ..names import COPY_OPS as _OPS
from ..names import CURRENT_DEVICE, DEVICE_RULES
from ..names import DIRECTION_WORDS as _WORDS
from ..tensors.aten_tensor import device_memory, resize_metadata, writable_nbytes
from ..tensors.context import KernelRuntimeContext
from ..tensors.error import Error
from ..tensors.tensor import PortableTensor


# ---- portable ---------------------------------------------------------------------------------------------------
def _placement_problem(self: PortableTensor, out: PortableTensor, direction: str) -> str:
    """Checks 1 and 2: which tensor is on the wrong side (empty when placement is right)."""
    words = _WORDS[direction]
    if direction == "h2d" and not self.is_cpu:
        return f"self must be on CPU for a {words} copy, it is on {self.device}"
    if direction != "h2d" and self.is_cpu:
        return f"self must be on a device (not CPU) for a {words} copy, it is on cpu"
    if direction != "d2h" and out.is_cpu:
        return f"out must be on a device (not CPU) for a {words} copy, it is on cpu"
    if direction == "d2h" and not out.is_cpu:
        return f"out must be on CPU for a {words} copy, it is on {out.device}"
    return ""


def _portable_copy(ctx: KernelRuntimeContext, self: PortableTensor, out: PortableTensor, direction: str):
    op = _OPS[direction]
    problem = _placement_problem(self, out, direction)
    if problem:
        ctx.fail(Error.InvalidArgument, f"{op}: {problem}")
        return out
    problem = out.resize_problem(self.sizes)
    if not problem and self.dtype != out.dtype:  # devcopy addition: ExecuTorch would copy the raw bytes
        problem = f"self/out dtype mismatch ({self.dtype} vs {out.dtype})"
    if problem:
        ctx.fail(Error.InvalidArgument, f"{op}: cannot resize out to {list(self.sizes)}: {problem}")
        return out
    device = self.device if direction == "d2h" else out.device
    allocator = get_device_allocator(device.type)
    if allocator is None:
        ctx.fail(Error.NotFound, f"{op}: no DeviceAllocator registered for {device.type.name}; register one first")
        return out
    old_sizes = out.sizes
    out.resize(self.sizes)
    try:
        if direction == "h2d":
            allocator.copy_host_to_device(out.storage, self.host_buffer(), self.nbytes, device.index)
        elif direction == "d2h":
            allocator.copy_device_to_host(out.host_buffer(), self.storage, self.nbytes, device.index)
        else:
            allocator.copy_device_to_device(out.storage, self.storage, self.nbytes)
    except (DeviceCopyError, ValueError) as exc:
        out.resize(old_sizes)
        where = f"{self.device} -> {device}" if direction == "d2d" else f"on {device}"
        ctx.fail(Error.Internal, f"{op}: device copy of {self.nbytes} bytes {where} failed: {exc}")
    return out


def _h2d_copy_out(ctx: KernelRuntimeContext, self: PortableTensor, out: PortableTensor) -> PortableTensor:
    """Portable host -> device copy; the device (and index) come from `out`."""
    return _portable_copy(ctx, self, out, "h2d")


def _d2h_copy_out(ctx: KernelRuntimeContext, self: PortableTensor, out: PortableTensor) -> PortableTensor:
    """Portable device -> host copy; the device (and index) come from `self`."""
    return _portable_copy(ctx, self, out, "d2h")


def _d2d_copy_out(ctx: KernelRuntimeContext, self: PortableTensor, out: PortableTensor) -> PortableTensor:
    """Portable device -> device copy (devcopy's addition); the source from `self`, the destination from `out`."""
    return _portable_copy(ctx, self, out, "d2d")


PORTABLE_KERNELS = {"_h2d_copy_out": _h2d_copy_out, "_d2h_copy_out": _d2h_copy_out, "_d2d_copy_out": _d2d_copy_out}


# ---- ATen mode --------------------------------------------------------------------------------------------------
def _carried_index(tensor: torch.Tensor) -> int | None:
    """The device index a tensor carries (rule `tensor`), or None when it is labelled CPU."""
    return (tensor.device.index or 0) if tensor.device.type == "cuda" else None


def _aten_copy(self: torch.Tensor, out: torch.Tensor, direction: str, rule: str) -> torch.Tensor:
    op = _OPS[direction]
    if self.dtype != out.dtype:
        raise RuntimeError(f"{op}: self/out dtype mismatch ({self.dtype} vs {out.dtype})")
    if not (self.is_contiguous() and out.is_contiguous()):
        raise RuntimeError(f"{op}: self and out must be contiguous; call .contiguous() on the input first")
    nbytes = self.numel() * self.element_size()
    room = writable_nbytes(out)
    if nbytes > room:
        raise RuntimeError(
            f"{op}: self needs {nbytes} bytes ({list(self.shape)}) but out's storage has {room} writable bytes; "
            "plan out with at least self's size"
        )
    old_shape = tuple(out.shape)
    resize_metadata(out, self.shape)
    if nbytes == 0:
        return out
    allocator = get_device_allocator(DeviceType.CUDA)
    try:
        if allocator is None:
            raise RuntimeError(f"{op}: no device allocator registered for device_type={int(DeviceType.CUDA)}")
        try:
            _aten_transfer(allocator, self, out, nbytes, direction, rule)
        except (DeviceCopyError, ValueError) as exc:
            raise RuntimeError(f"{op}: device copy failed ({nbytes} bytes, {_WORDS[direction]}): {exc}") from exc
    except RuntimeError:
        resize_metadata(out, old_shape)  # devcopy: out is left as it was on every failure (docs/differences.md)
        raise
    return out


def _aten_transfer(allocator, self: torch.Tensor, out: torch.Tensor, nbytes: int, direction: str, rule: str) -> None:
    """Step 7: the allocator call. H2D/D2H: the device index by the rule; D2D: each pointer names its device."""
    if direction == "d2d":
        with device_memory(self, allocator) as src, device_memory(out, allocator) as dst:
            allocator.copy_device_to_device(dst, src, nbytes)
        return
    device_side, host = (out, self) if direction == "h2d" else (self, out)
    carried = _carried_index(device_side) if rule == "tensor" else None
    index = CURRENT_DEVICE if carried is None else carried
    with device_memory(device_side, allocator) as ptr:
        if direction == "h2d":
            allocator.copy_host_to_device(ptr, host.data_ptr(), nbytes, index)
        else:
            allocator.copy_device_to_host(host.data_ptr(), ptr, nbytes, index)


@functools.cache
def aten_kernel_for(op: str, rule: str = "seed"):
    """The ATen-mode kernel `(self, out) -> out` for `_h2d_copy.out` / `_d2h_copy.out` / `_d2d_copy.out` under a
    device rule."""
    if rule not in DEVICE_RULES:
        raise ValueError(f"device_rule must be one of {DEVICE_RULES}, got {rule!r}")
    short = op.split("::")[-1]
    direction = short[1:4]
    if _OPS.get(direction) != f"et_copy::{short}":
        raise ValueError(f"no ATen-mode device-copy kernel for {op!r}; valid: {', '.join(_OPS.values())}")

    def kernel(self: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return _aten_copy(self, out, direction, rule)

    kernel.__name__ = kernel.__qualname__ = f"{short.replace('.', '_')}_{rule}"
    return kernel


def h2d_copy_out(self: torch.Tensor, out: torch.Tensor, device_rule: str = "seed") -> torch.Tensor:
    """ATen-mode host -> device copy (docs/semantics.md §4's seven checks, raising)."""
    return aten_kernel_for("_h2d_copy.out", device_rule)(self, out)


def d2h_copy_out(self: torch.Tensor, out: torch.Tensor, device_rule: str = "seed") -> torch.Tensor:
    """ATen-mode device -> host copy (docs/semantics.md §4's seven checks, raising)."""
    return aten_kernel_for("_d2h_copy.out", device_rule)(self, out)


def d2d_copy_out(self: torch.Tensor, out: torch.Tensor, device_rule: str = "seed") -> torch.Tensor:
    """ATen-mode device -> device copy (devcopy's addition: docs/semantics.md §4's checks, raising)."""
    return aten_kernel_for("_d2d_copy.out", device_rule)(self, out)
