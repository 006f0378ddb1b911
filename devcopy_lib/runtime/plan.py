"""The precompiled execution plan: one prepared `Step` per instruction, built and validated once at load.

What the program fixes (operators, tensor objects and views over the arenas, copy descriptors with pre-checked
pointers and capacities, delegate input/output views) is built here; a step's `run()` re-checks only what a call can
change (the sizes of dynamic tensors). Instructions the plan cannot prepare (a kernel registered by the user, an
et_copy whose tensors are not planned where the op expects them) run their kernel generically, so its own error
reaches the caller, always naming the instruction (index, operator).
"""

from __future__ import annotations

import contextlib
import copy
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..devices.allocator import DeviceAllocator, DevicePtr
from ..devices.errors import DeviceCopyError
from ..devices.registry import scoped_allocators
from ..kernels.portable_cpu import aten_overload, host_args, split_arguments
from ..names import COPY_DIRECTIONS, CURRENT_DEVICE
from ..tensors.context import KernelRuntimeContext
from ..tensors.error import Error
from .device_views import device_view
from .failures import ExecutionError, LoadError
from .program import TensorSpec

PORTABLE_ATEN_KERNEL = "devcopy::portable::aten_out"  # portable CPU ops computed by torch.ops.aten (portable_cpu)


class Slot:
    """One tensor value at run time: the mode's tensor, the memory under it (host bytes `storage`, or a device
    pointer with its allocator), and the views device code computes on."""

    __slots__ = ("spec", "tensor", "ptr", "allocator", "storage")

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


class Step:
    """A prepared instruction: `run()` executes it; `kind` (copy / delegate / kernel), `op` and `moved` (bytes of
    the last copy) are what a profile reports; `allocator` is set for device work (timed on the device clock)."""

    __slots__ = ("index", "kind", "op", "run", "allocator", "direction", "moved", "host")

    def __init__(
        self,
        index: int,
        kind: str,
        op: str,
        run: Callable[[], None] = None,
        allocator: DeviceAllocator | None = None,
        direction: str | None = None,
    ) -> None:
        self.index, self.kind, self.op, self.run, self.allocator = index, kind, op, run, allocator
        self.direction, self.moved, self.host = direction, 0, None


def _numel(sizes) -> int:
    return math.prod(sizes)


# ---- views ----------------------------------------------------------------------------------------------------
def code_view(slot: Slot, tensors: Any) -> Callable[[], torch.Tensor]:
    """A getter of what device code computes on for `slot`: a view of device memory (built once when static) or
    the host tensor of a CPU value."""
    spec, sizes_of = slot.spec, tensors.sizes
    if slot.ptr is None:
        if tensors.mode == "aten" or not slot.static:
            host_tensor, tensor = tensors.host_tensor, slot.tensor
            return lambda: host_tensor(tensor)
        fixed = tensors.host_tensor(slot.tensor)
        return lambda: fixed
    flat = device_view(slot.allocator, slot.ptr, spec.dtype, (spec.numel,))
    if slot.static:
        fixed = flat.view(spec.sizes)
        return lambda: fixed
    tensor = slot.tensor

    def dynamic_view() -> torch.Tensor:
        sizes = sizes_of(tensor)
        return flat[: _numel(sizes)].view(sizes)

    return dynamic_view


# ---- copies ---------------------------------------------------------------------------------------------------
def copy_step(step: Step, kernel: Any, src: Slot, out: Slot, tensors: Any, counters: dict) -> bool:
    """Prepare an et_copy instruction on the allocator's pre-validated copy path; False when it cannot be (the
    generic kernel step then runs the kernel, which reports what is wrong)."""
    direction = step.direction
    rule = getattr(kernel.fn, "device_rule", None) if kernel.mode == "aten" else None
    device, host = (out, src) if direction == "h2d" else (src, out)
    if (
        direction not in ("h2d", "d2h")
        or device.ptr is None
        or host.ptr is not None
        or host.storage is None
        or src.spec.dtype != out.spec.dtype
        or kernel.kernel_name.rpartition("::")[2] != f"_{direction}_copy_out"
        or (kernel.mode == "aten" and rule is None)
    ):
        return False
    if device.spec.device.index != device.ptr.index or host.storage.nbytes < host.spec.nbytes:
        return False
    allocator, ptr = device.allocator, device.ptr
    seed = rule == "seed"  # ExecuTorch's rule: the current device, whatever the tensor says
    try:
        planned = allocator.planned_copy(
            direction, ptr, host.storage, device.spec.nbytes, CURRENT_DEVICE if seed else ptr.index
        )
    except ValueError:
        return False
    index = planned.index
    slow = allocator.copy_host_to_device if direction == "h2d" else allocator.copy_device_to_host
    itemsize, resize, sizes_of = src.spec.dtype.itemsize, tensors.resize, tensors.sizes
    what = f"instruction {step.index} ({step.op})"
    static = src.static and out.static and src.spec.sizes == out.spec.sizes
    fixed_bytes = src.spec.nbytes

    def run() -> None:
        if static:
            nbytes, old = fixed_bytes, None
        else:
            sizes, old = sizes_of(src.tensor), sizes_of(out.tensor)
            resize(out.tensor, out.spec, sizes, what)
            nbytes = _numel(sizes) * itemsize
        try:
            if seed and allocator.current_index() != index:  # the current device moved since load
                args = (
                    (ptr, host.storage, nbytes, CURRENT_DEVICE)
                    if direction == "h2d"
                    else (host.storage, ptr, nbytes, CURRENT_DEVICE)
                )
                slow(*args)
            else:
                planned(nbytes)
        except (DeviceCopyError, ValueError) as exc:
            if old is not None:  # out is left as it was on a failure, as the kernel leaves it
                resize(out.tensor, out.spec, old, what)
            raise ExecutionError(
                Error.Internal,
                f"{what} failed with Internal: {step.op}: device copy of {nbytes} "
                f"bytes on {device.spec.device} failed: {exc}",
            ) from exc
        step.moved = nbytes
        counters[direction] += 1

    step.run, step.allocator, step.host = run, allocator, host.storage
    return True


# ---- kernels --------------------------------------------------------------------------------------------------
def kernel_step(step: Step, kernel: Any, args: list, counters: dict, allocators: tuple = ()) -> None:
    """Any kernel, boxed: `kernel(ctx, args)`; portable failures come back on the context, ATen-mode ones raise. An
    et_copy kernel run this way finds the method's own `allocators` (those it was loaded with) in the registry."""
    direction, name = COPY_DIRECTIONS.get(step.op), step.op
    scope = (lambda: scoped_allocators(*allocators)) if direction and allocators else contextlib.nullcontext

    def run() -> None:
        ctx = KernelRuntimeContext()
        try:
            with scope():
                kernel(ctx, args)
        except Exception as exc:  # ATen-mode kernels raise instead of failing the context
            raise ExecutionError(Error.Internal, f"instruction {step.index} ({name}) raised: {exc}") from exc
        if not ctx.ok:
            raise ExecutionError(
                ctx.failure_state(),
                f"instruction {step.index} ({name}) failed with {ctx.failure_state().name}: {ctx.message}",
            )
        if direction:
            counters[direction] += 1

    step.run = run


def torch_op_step(step: Step, kernel: Any, args: list, slots: list[Slot | None], tensors: Any) -> bool:
    """A CPU op computed by torch.ops.aten (the portable lib's aten_out kernels, ATen mode's native lib) called
    directly on views built now; False when the op has dynamic portable tensors or device tensors (generic path)."""
    portable = tensors.mode == "portable"
    if kernel.lib != "native" if not portable else kernel.kernel_name != PORTABLE_ATEN_KERNEL:
        return False
    if any(slot is not None and (slot.ptr is not None or (portable and not slot.static)) for slot in slots):
        return False
    n_out = len(kernel.schema.arguments.out)
    values = [host_args(a) for a in args] if portable else list(args)
    positional, keywords = split_arguments(kernel.schema, values)
    overload = aten_overload(step.op)._op  # the C++ callable OpOverload.__call__ forwards to
    # ATen mode: a dynamic out is handed over empty, so PyTorch resizes it within its storage without warning
    reads = args[: len(args) - n_out]
    shrink = (
        [
            t
            for t, slot in zip(args[len(args) - n_out :], slots[len(slots) - n_out :])
            if slot is not None and not slot.static and not any(t is a for a in reads)
        ]
        if not portable
        else []
    )
    error = Error.InvalidArgument if portable else Error.Internal
    verb = f"failed with InvalidArgument: {step.op}:" if portable else "raised:"

    def run() -> None:
        for tensor in shrink:
            tensor.resize_(0)
        try:
            overload(*positional, **keywords)
        except Exception as exc:
            raise ExecutionError(error, f"instruction {step.index} ({step.op}) {verb} {exc}") from exc

    step.run = run
    return True


# ---- delegates ------------------------------------------------------------------------------------------------
_DIRECT: weakref.WeakKeyDictionary[torch.fx.GraphModule, torch.fx.GraphModule] = weakref.WeakKeyDictionary()


def _direct_caller(overload: torch._ops.OpOverload) -> Any:
    """An object that calls `overload`'s C++ operator directly (what OpOverload.__call__ forwards to, minus its
    Python frame); its name is a valid identifier, so fx binds it as a global of the generated code."""
    name = str(overload).replace("::", "_").replace(".", "_")
    return type(
        name, (), {"__call__": staticmethod(overload._op), "__slots__": (), "__name__": name, "__module__": __name__}
    )()


def direct_module(module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The delegate's GraphModule with every ATen operator resolved once, at load, to its C++ callable (cached
    per module, so methods loading one program share it); the computation is unchanged."""
    direct = _DIRECT.get(module)
    if direct is None:
        graph = copy.deepcopy(module.graph)
        for node in graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                node.target = _direct_caller(node.target)
        direct = _DIRECT[module] = torch.fx.GraphModule(module, graph)
    return direct


def check_delegate_devices(step: Step, delegate: Any, inputs: list[Slot], outputs: list[Slot]) -> None:
    """Every device tensor a delegate reads or writes must be on the delegate's device (type and index): its
    addresses are fixed at load, so a mismatch is refused here rather than computed on the wrong device."""
    for role, slots in (("input", inputs), ("output", outputs)):
        for position, slot in enumerate(slots):
            if slot.ptr is not None and (
                slot.spec.device != delegate.device or slot.ptr.index != delegate.device.index
            ):
                raise LoadError(
                    Error.InvalidProgram,
                    f"instruction {step.index} (delegate {delegate.name} on {delegate.device}): {role} "
                    f"{position} is in {slot.spec.device} memory (cuda:{slot.ptr.index}), not on "
                    f"{delegate.device}. Place a copy to {delegate.device} before the delegate "
                    "(place_devices inserts one), or target the delegate at the input's device.",
                )


def delegate_step(step: Step, delegate: Any, inputs: list[Slot], outputs: list[Slot], tensors: Any) -> None:
    """Run the delegate's GraphModule on views of its inputs; write each result into its planned output."""
    check_delegate_devices(step, delegate, inputs, outputs)
    forward = direct_module(delegate.module).forward
    getters = [code_view(slot, tensors) for slot in inputs]
    fixed = tuple(get() for get in getters) if all(slot.static for slot in inputs) else None
    writes = [(slot, code_view(slot, tensors)) for slot in outputs]
    resize, what = tensors.resize, f"instruction {step.index} (delegate {delegate.name} on {delegate.device})"
    gpu = next(
        (slot.allocator for slot in outputs if slot.allocator is not None and slot.allocator.backend == "cupy"), None
    )

    static_targets = [(slot, view, view()) for slot, view in writes] if all(s.static for s in outputs) else None

    def run() -> None:
        try:
            results = forward(*(fixed if fixed is not None else [get() for get in getters]))
        except Exception as exc:
            raise ExecutionError(Error.Internal, f"{what} raised: {exc}") from exc
        for (slot, view, target), result in zip(static_targets or [(s, v, None) for s, v in writes], results):
            if target is None:
                target = view()
            if target.shape != result.shape:
                resize(slot.tensor, slot.spec, tuple(result.shape), f"{what} output")
                target = view()
            target.copy_(result)
        if gpu is not None:  # the next copy may run on the copy engine's own stream
            torch.cuda.synchronize()

    step.run, step.allocator = run, next((s.allocator for s in (*inputs, *outputs) if s.allocator), None)
