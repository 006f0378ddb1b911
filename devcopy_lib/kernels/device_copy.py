"""The et_copy kernels: `_h2d_copy.out` / `_d2h_copy.out` in the portable runtime and in the ATen-mode runtime.

Portable (docs/semantics.md §3): `(ctx, self, out) -> out`; direction and device from tensor metadata; failures go
on the context. devcopy differences: `out` is left exactly as it was on every failure (the resize is validated at
step 3, applied once the allocator is found, undone if the copy fails), and a dtype check at step 3 (ExecuTorch
copies the bytes). ATen mode (docs/semantics.md §4): `(self, out) -> out`; raises. Device rule `seed`: direction from
the op identity, the CUDA allocator at index -1 (the current device), as ExecuTorch's ATen-mode kernel; `tensor`:
honour the device the tensor carries (docs/semantics.md §8), falling back to `seed` when it carries none. Every copy
goes through the registered DeviceAllocator.
`_d2d_copy.out` (devcopy's addition): device -> device, both tensors on devices, through
`DeviceAllocator.copy_device_to_device` (direct peer copy, or a host hop without peer access); the same checks in
the same order; in ATen mode both devices come from the memory the tensors point to, under either device rule.

Each kernel follows kernels/prepared.py: `prepare` checks what the tensors fix (placement, dtype, the allocator) once
and, when they pass, returns a run on the allocator's pre-validated copy (`planned_copy`) that re-checks only the
resize; when they do not, the run repeats every check in the documented order, so a call fails as the semantics say.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import torch

from ..devices.allocator import DeviceAllocator, DevicePtr, HostBuffer
from ..devices.device import DeviceType
from ..devices.errors import DeviceCopyError
from ..devices.registry import get_device_allocator
from ..names import COPY_OP, COPY_OP_BY_NAME, CURRENT_DEVICE, DEVICE_RULES, DeviceRule, Direction
from ..names import COPY_OPS as _OPS
from ..names import DIRECTION_WORDS as _WORDS
from ..tensors.aten_tensor import device_memory, device_ptr, resize_metadata, writable_nbytes
from ..tensors.context import KernelRuntimeContext
from ..tensors.error import Error
from ..tensors.tensor import PortableTensor, TensorShapeDynamism
from .prepared import KernelFailure, PreparedKernel, Run

Copier = Callable[[int], None]
H2D, D2H, D2D = Direction.H2D, Direction.D2H, Direction.D2D
_COPY_FAILURES = (DeviceCopyError, ValueError)


# ---- the allocator call, shared by both modes -----------------------------------------------------------------
@dataclass(frozen=True)
class _Transfer:
    """A prepared host<->device copy: `planned` (pre-validated at load; the allocator's public copy when it would not
    plan this one) runs while `current_index()` still returns `index`; once the current device moved since load
    (a copy on `CURRENT_DEVICE`), `public`, the allocator's checked copy, runs instead. `current_index` is None when
    the copy names its device index, so `planned` always runs."""

    planned: Copier
    public: Copier
    current_index: Callable[[], int] | None
    index: int

    def pick(self) -> Copier:
        """The copier for this call."""
        current = self.current_index
        return self.planned if current is None or current() == self.index else self.public


def _transfer(
    allocator: DeviceAllocator, direction: Direction, ptr: DevicePtr, host: HostBuffer, capacity: int, index: int
) -> _Transfer:
    """`nbytes` between `host` and device `ptr` on `index`, planned once when the allocator accepts the buffers."""
    if direction == H2D:

        def public(nbytes: int) -> None:
            allocator.copy_host_to_device(ptr, host, nbytes, index)
    else:

        def public(nbytes: int) -> None:
            allocator.copy_device_to_host(host, ptr, nbytes, index)

    try:
        made = allocator.planned_copy(direction, ptr, host, capacity, index)
    except ValueError:
        return _Transfer(public, public, None, index)
    follows = index == CURRENT_DEVICE
    planned_index: int = made.index  # the device that was current at load
    return _Transfer(made, public, allocator.current_index if follows else None, planned_index)


def _portable_run(copy: Copier, self: PortableTensor, out: PortableTensor, op: str, where: str) -> Run:
    """One portable copy per call: resize `out` to `self` (check 3, per call), copy, restore `out` on a failure."""
    if self.dynamism is TensorShapeDynamism.STATIC and out.dynamism is TensorShapeDynamism.STATIC:
        if self.sizes == out.sizes:  # nothing a call can change: the bytes are fixed
            nbytes = self.nbytes

            def run_static() -> PortableTensor:
                try:
                    copy(nbytes)
                except _COPY_FAILURES as exc:
                    raise KernelFailure(
                        Error.Internal, f"{op}: device copy of {nbytes} bytes {where} failed: {exc}"
                    ) from exc
                return out

            return run_static

    def run() -> PortableTensor:
        sizes, old = self.sizes, out.sizes
        if sizes != old:
            problem = out.resize_problem(sizes)
            if problem:
                raise KernelFailure(Error.InvalidArgument, f"{op}: cannot resize out to {list(sizes)}: {problem}")
            out.resize(sizes)
        nbytes = self.nbytes
        try:
            copy(nbytes)
        except _COPY_FAILURES as exc:
            out.resize(old)  # out is left as it was on a failure
            raise KernelFailure(Error.Internal, f"{op}: device copy of {nbytes} bytes {where} failed: {exc}") from exc
        return out

    return run


# ---- portable ---------------------------------------------------------------------------------------------------
def _placement_problem(self: PortableTensor, out: PortableTensor, direction: Direction) -> str:
    """Checks 1 and 2: which tensor is on the wrong side (empty when placement is right)."""
    words = _WORDS[direction]
    if direction == H2D and not self.is_cpu:
        return f"self must be on CPU for a {words} copy, it is on {self.device}"
    if direction != H2D and self.is_cpu:
        return f"self must be on a device (not CPU) for a {words} copy, it is on cpu"
    if direction != D2H and out.is_cpu:
        return f"out must be on a device (not CPU) for a {words} copy, it is on cpu"
    if direction == D2H and not out.is_cpu:
        return f"out must be on CPU for a {words} copy, it is on {out.device}"
    return ""


def _checked_portable_run(self: PortableTensor, out: PortableTensor, direction: Direction, problem: str) -> Run:
    """A call that fails at the first of checks 1-4 that fails, in the documented order (`problem`: 1-2)."""
    op = _OPS[direction]

    def run() -> PortableTensor:
        if problem:
            raise KernelFailure(Error.InvalidArgument, f"{op}: {problem}")
        resize = out.resize_problem(self.sizes)
        if not resize and self.dtype != out.dtype:  # devcopy addition: ExecuTorch would copy the raw bytes
            resize = f"self/out dtype mismatch ({self.dtype} vs {out.dtype})"
        if resize:
            raise KernelFailure(Error.InvalidArgument, f"{op}: cannot resize out to {list(self.sizes)}: {resize}")
        device = self.device if direction == D2H else out.device
        raise KernelFailure(
            Error.NotFound, f"{op}: no DeviceAllocator registered for {device.type.name}; register one first"
        )

    return run


def _prepare_portable(args: list[Any], direction: Direction) -> Run:
    """Checks 1, 2, the dtype and 4 once; then a run that resizes (check 3) and copies through the allocator."""
    self, out = args
    device = self.device if direction == D2H else out.device
    allocator = get_device_allocator(device.type)
    problem = _placement_problem(self, out, direction)
    if problem or self.dtype != out.dtype or allocator is None:
        return _checked_portable_run(self, out, direction, problem)
    op = _OPS[direction]
    if direction == D2D:
        src, dst = self.storage, out.storage

        def peer(nbytes: int) -> None:
            allocator.copy_device_to_device(dst, src, nbytes)

        return _portable_run(peer, self, out, op, f"{self.device} -> {device}")
    device_side, host = (out, self) if direction == H2D else (self, out)
    capacity = min(self.capacity_nbytes, out.capacity_nbytes)
    transfer = _transfer(allocator, direction, device_side.storage, host.storage, capacity, device.index)
    return _portable_run(transfer.planned, self, out, op, f"on {device}")  # the tensor names its index


def portable_kernel(direction: Direction) -> PreparedKernel:
    """The portable boxed kernel `(ctx, [self, out]) -> out` for one direction, with its prepare step."""
    return PreparedKernel(
        lambda args, dynamic: _prepare_portable(args, direction), portable=True, n_out=1, name=f"_{direction}_copy_out"
    )


_PORTABLE_BOXED = {op.kernel_name: portable_kernel(direction) for direction, op in COPY_OP.items()}


def portable_boxed_kernel(kernel_name: str) -> PreparedKernel:
    """The portable boxed kernel named `kernel_name` (`_h2d_copy_out`, `_d2h_copy_out`, `_d2d_copy_out`)."""
    return _PORTABLE_BOXED[kernel_name]


def _h2d_copy_out(ctx: KernelRuntimeContext, self: PortableTensor, out: PortableTensor) -> PortableTensor:
    """Portable host -> device copy; the device (and index) come from `out`."""
    result: PortableTensor = _PORTABLE_BOXED[COPY_OP[H2D].kernel_name](ctx, [self, out])
    return result


def _d2h_copy_out(ctx: KernelRuntimeContext, self: PortableTensor, out: PortableTensor) -> PortableTensor:
    """Portable device -> host copy; the device (and index) come from `self`."""
    result: PortableTensor = _PORTABLE_BOXED[COPY_OP[D2H].kernel_name](ctx, [self, out])
    return result


def _d2d_copy_out(ctx: KernelRuntimeContext, self: PortableTensor, out: PortableTensor) -> PortableTensor:
    """Portable device -> device copy (devcopy's addition); the source from `self`, the destination from `out`."""
    result: PortableTensor = _PORTABLE_BOXED[COPY_OP[D2D].kernel_name](ctx, [self, out])
    return result


PORTABLE_KERNELS = {
    COPY_OP[H2D].kernel_name: _h2d_copy_out,
    COPY_OP[D2H].kernel_name: _d2h_copy_out,
    COPY_OP[D2D].kernel_name: _d2d_copy_out,
}


# ---- ATen mode --------------------------------------------------------------------------------------------------
def _carried_index(tensor: torch.Tensor) -> int | None:
    """The device index a tensor carries (rule `tensor`), or None when it is labelled CPU."""
    return (tensor.device.index or 0) if tensor.device.type == "cuda" else None


def _aten_room(self: torch.Tensor, out: torch.Tensor, op: str) -> int:
    """Step 3: the bytes of `self`, refused when they do not fit in `out`'s writable storage."""
    nbytes = self.numel() * self.element_size()
    room = writable_nbytes(out)
    if nbytes > room:
        raise KernelFailure(
            Error.Internal,
            f"{op}: self needs {nbytes} bytes ({list(self.shape)}) but out's storage has {room} writable bytes; "
            "plan out with at least self's size",
        )
    return nbytes


def _aten_fixed_checks(self: torch.Tensor, out: torch.Tensor, op: str) -> None:
    """Steps 1 and 2: one dtype, both contiguous."""
    if self.dtype != out.dtype:
        raise KernelFailure(Error.Internal, f"{op}: self/out dtype mismatch ({self.dtype} vs {out.dtype})")
    if not (self.is_contiguous() and out.is_contiguous()):
        raise KernelFailure(
            Error.Internal, f"{op}: self and out must be contiguous; call .contiguous() on the input first"
        )


def _aten_copy(self: torch.Tensor, out: torch.Tensor, direction: Direction, rule: str) -> torch.Tensor:
    """Steps 1-7 in order, every call (eager tensors, or what the prepared path cannot pre-validate)."""
    op = _OPS[direction]
    _aten_fixed_checks(self, out, op)
    nbytes = _aten_room(self, out, op)
    old_shape = tuple(out.shape)
    resize_metadata(out, self.shape)
    if nbytes == 0:
        return out
    allocator = get_device_allocator(DeviceType.CUDA)
    try:
        if allocator is None:
            raise KernelFailure(
                Error.NotFound, f"{op}: no device allocator registered for device_type={int(DeviceType.CUDA)}"
            )
        try:
            _aten_transfer(allocator, self, out, nbytes, direction, rule)
        except _COPY_FAILURES as exc:
            raise KernelFailure(
                Error.Internal, f"{op}: device copy failed ({nbytes} bytes, {_WORDS[direction]}): {exc}"
            ) from exc
    except KernelFailure:
        resize_metadata(out, old_shape)  # devcopy: out is left as it was on every failure (docs/differences.md)
        raise
    return out


def _copy_index(device_side: torch.Tensor, rule: str) -> int:
    """The index an H2D/D2H copy names: the one the tensor carries under rule `tensor`, else the current device."""
    carried = _carried_index(device_side) if rule == DeviceRule.TENSOR else None
    return CURRENT_DEVICE if carried is None else carried


def _aten_transfer(
    allocator: DeviceAllocator, self: torch.Tensor, out: torch.Tensor, nbytes: int, direction: Direction, rule: str
) -> None:
    """Step 7: the allocator call. H2D/D2H: the device index by the rule; D2D: each pointer names its device."""
    if direction == D2D:
        with device_memory(self, allocator) as src, device_memory(out, allocator) as dst:
            allocator.copy_device_to_device(dst, src, nbytes)
        return
    device_side, host = (out, self) if direction == H2D else (self, out)
    index = _copy_index(device_side, rule)
    with device_memory(device_side, allocator) as ptr:
        if direction == H2D:
            allocator.copy_host_to_device(ptr, host, nbytes, index)
        else:
            allocator.copy_device_to_host(host, ptr, nbytes, index)


def _aten_run(transfer: _Transfer, self: torch.Tensor, out: torch.Tensor, op: str, words: str, fixed: bool) -> Run:
    """One ATen-mode copy per call on a prepared copier; `fixed`: neither tensor's sizes change between calls."""
    if fixed and tuple(self.shape) == tuple(out.shape):
        nbytes = self.numel() * self.element_size()
        planned, public, current, index = transfer.planned, transfer.public, transfer.current_index, transfer.index

        def run_fixed() -> torch.Tensor:
            try:
                if nbytes:  # step 5: zero bytes never reach the allocator; the copier is `transfer.pick()`, inlined
                    (planned if current is None or current() == index else public)(nbytes)
            except _COPY_FAILURES as exc:
                raise KernelFailure(
                    Error.Internal, f"{op}: device copy failed ({nbytes} bytes, {words}): {exc}"
                ) from exc
            return out

        return run_fixed

    def run() -> torch.Tensor:
        nbytes = _aten_room(self, out, op)
        old_shape = tuple(out.shape)
        resize_metadata(out, self.shape)
        if nbytes == 0:  # step 5
            return out
        try:
            transfer.pick()(nbytes)
        except _COPY_FAILURES as exc:
            resize_metadata(out, old_shape)  # out is left as it was on a failure
            raise KernelFailure(Error.Internal, f"{op}: device copy failed ({nbytes} bytes, {words}): {exc}") from exc
        return out

    return run


def _prepare_aten(args: list[Any], dynamic: Collection[int], direction: Direction, rule: str) -> Run:
    """Steps 1, 2 and 6 once for planned tensors; then a run that checks room (3), resizes (4) and copies (7)."""
    self, out = args
    allocator = get_device_allocator(DeviceType.CUDA)
    device_side, host = (out, self) if direction == H2D else (self, out)
    ptr = device_ptr(device_side)
    if (
        direction == D2D
        or allocator is None
        or ptr is None
        or host.device.type != "cpu"
        or self.dtype != out.dtype
        or not (self.is_contiguous() and out.is_contiguous())
    ):
        return functools.partial(_aten_copy, self, out, direction, rule)
    capacity = min(writable_nbytes(self), writable_nbytes(out))
    transfer = _transfer(allocator, direction, ptr, host, capacity, _copy_index(device_side, rule))
    return _aten_run(transfer, self, out, _OPS[direction], _WORDS[direction], not dynamic)


def is_device_copy_kernel(fn: object) -> bool:
    """Whether `fn` is one of this module's et_copy kernels (portable or ATen mode), whose planned run is one copy
    between fixed buffers; a kernel registered by the user may do anything at a call."""
    return isinstance(fn, PreparedKernel) and getattr(fn.prepare, "__module__", None) == __name__


@functools.cache
def aten_boxed_kernel(op: str, rule: str = DeviceRule.SEED) -> PreparedKernel:
    """The ATen-mode boxed kernel `(ctx, [self, out]) -> out` for `_h2d_copy.out` / `_d2h_copy.out` /
    `_d2d_copy.out` under a device rule, with its prepare step."""
    if rule not in DEVICE_RULES:
        raise ValueError(f"device_rule must be one of {DEVICE_RULES}, got {rule!r}")
    short = op.split("::")[-1]
    copy_op = COPY_OP_BY_NAME.get(f"et_copy::{short}")
    if copy_op is None:
        raise ValueError(f"no ATen-mode device-copy kernel for {op!r}; valid: {', '.join(_OPS.values())}")
    direction = copy_op.direction

    def prepare(args: list[Any], dynamic: Collection[int]) -> Run:
        return _prepare_aten(args, dynamic, direction, rule)

    return PreparedKernel(prepare, portable=False, n_out=1, name=f"{short.replace('.', '_')}_{rule}")


@functools.cache
def aten_kernel_for(op: str, rule: str = DeviceRule.SEED) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The ATen-mode kernel `(self, out) -> out` for `_h2d_copy.out` / `_d2h_copy.out` / `_d2d_copy.out` under a
    device rule: prepare-then-run of `aten_boxed_kernel`."""
    boxed = aten_boxed_kernel(op, rule)

    def kernel(self: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        result: torch.Tensor = boxed.prepare([self, out], ())()
        return result

    kernel.__name__ = kernel.__qualname__ = boxed.__name__
    return kernel


def h2d_copy_out(self: torch.Tensor, out: torch.Tensor, device_rule: str = DeviceRule.SEED) -> torch.Tensor:
    """ATen-mode host -> device copy (docs/semantics.md §4's seven checks, raising)."""
    return aten_kernel_for(COPY_OP[H2D].schema_name, device_rule)(self, out)


def d2h_copy_out(self: torch.Tensor, out: torch.Tensor, device_rule: str = DeviceRule.SEED) -> torch.Tensor:
    """ATen-mode device -> host copy (docs/semantics.md §4's seven checks, raising)."""
    return aten_kernel_for(COPY_OP[D2H].schema_name, device_rule)(self, out)


def d2d_copy_out(self: torch.Tensor, out: torch.Tensor, device_rule: str = DeviceRule.SEED) -> torch.Tensor:
    """ATen-mode device -> device copy (devcopy's addition: docs/semantics.md §4's checks, raising)."""
    return aten_kernel_for(COPY_OP[D2D].schema_name, device_rule)(self, out)
