"""The delegate "kernel": a lowered GraphModule run on views of planned memory, prepared once at load.

`prepare_delegate` checks that every device tensor is on the delegate's device, resolves the GraphModule's ATen
operators to their C++ callables once, builds the input views (once when static) and returns the run: compute, write
each result into its planned output (resizing a dynamic one by the tensor rule), and, on a real device, wait for the
device so that the next copy (which may run on the copy engine's own stream) sees the results.
"""

from __future__ import annotations

import copy
import operator
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..kernels.prepared import Run
from ..kernels.prim_ops import SymBox
from ..names import device_string
from ..tensors.error import Error
from .failures import LoadError
from .slots import Slot, code_view

_MODULES: weakref.WeakKeyDictionary[torch.fx.GraphModule, dict[tuple[torch.device, bool], torch.fx.GraphModule]] = (
    weakref.WeakKeyDictionary()
)


def _direct_caller(overload: torch._ops.OpOverload) -> Any:
    """An object that calls `overload`'s C++ operator directly (what OpOverload.__call__ forwards to, minus its
    Python frame); its name is a valid identifier, so fx binds it as a global of the generated code."""
    name = str(overload).replace("::", "_").replace(".", "_")
    return type(
        name, (), {"__call__": staticmethod(overload._op), "__slots__": (), "__name__": name, "__module__": __name__}
    )()


def delegate_module(module: torch.fx.GraphModule, where: torch.device, direct: bool = True) -> torch.fx.GraphModule:
    """The delegate's GraphModule as it runs on torch device `where`: every op that creates a tensor (`arange`,
    `scalar_tensor`, `full`, ...) creates it on `where`, beside the delegate's inputs, instead of on the device the
    program was traced on; with `direct`, every ATen operator is also resolved once, at load, to its C++ callable.
    Cached per module, so methods loading one program share it; the program's own module is not changed."""
    variants = _MODULES.setdefault(module, {})
    built = variants.get((where, direct))
    if built is None:
        graph = copy.deepcopy(module.graph)
        for node in graph.nodes:
            if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
                if isinstance(node.kwargs.get("device"), torch.device):
                    node.kwargs = {**node.kwargs, "device": where}
                if direct:
                    node.target = _direct_caller(node.target)
        built = variants[where, direct] = torch.fx.GraphModule(module, graph)
    return built


def check_delegate_devices(what: str, delegate: Any, inputs: list[Slot | SymBox], outputs: list[Slot]) -> None:
    """Every device tensor a delegate reads or writes must be on the delegate's device (type and index): its
    addresses are fixed at load, so a mismatch is refused here rather than computed on the wrong device."""
    for role, slots in (("input", inputs), ("output", outputs)):
        for position, slot in enumerate(slots):
            if (
                isinstance(slot, Slot)
                and slot.ptr is not None
                and (slot.spec.device != delegate.device or slot.ptr.index != delegate.device.index)
            ):
                raise LoadError(
                    Error.InvalidProgram,
                    f"{what}: {role} {position} is in {slot.spec.device} memory "
                    f"({device_string(slot.ptr.index)}), not on {delegate.device}. Place a copy to "
                    f"{delegate.device} before the delegate (place_devices inserts one), or target the delegate at "
                    "the input's device.",
                )


def check_delegate_holds_no_tensors(what: str, delegate: Any) -> None:
    """A delegate on a device gets its constants as inputs, copied to the device at load; a tensor its GraphModule
    held itself would be read from host memory. Refused at load on every backend (the simulated one included), where
    CUDA would fail only at the call with "Expected all tensors to be on the same device"."""
    if delegate.device.is_cpu:
        return
    module = delegate.module
    held = sorted(
        {
            str(node.target)
            for node in module.graph.nodes
            if node.op == "get_attr" and isinstance(operator.attrgetter(str(node.target))(module), torch.Tensor)
        }
    )
    if held:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        raise LoadError(
            Error.InvalidProgram,
            f"{what} runs on {delegate.device} but its GraphModule holds tensors of its own ({shown}), which would "
            "be read from host memory. Pass a delegate's constants as its inputs after the user inputs "
            "(BackendDelegate.constants), so that loading copies them to the device.",
        )


def _input_getter(value: Slot | SymBox, tensors: Any) -> Callable[[], Any]:
    """What a delegate reads for one input: a view of a tensor, or a symbolic size's current value."""
    if isinstance(value, Slot):
        return code_view(value, tensors)
    return lambda: value.value


def prepare_delegate(
    what: str, delegate: Any, inputs: list[Slot | SymBox], outputs: list[Slot], tensors: Any
) -> tuple[Run, Run | None]:
    """The run of one delegate call: its GraphModule on views of its inputs (a symbolic size as its value at the
    call), each result into its planned output; and, when every shape is static, its device work alone (the same
    computation without the wait for the device, which a CUDA graph records: runtime/capture.py)."""
    check_delegate_devices(what, delegate, inputs, outputs)
    check_delegate_holds_no_tensors(what, delegate)
    real = next(
        (s.allocator for s in outputs if s.allocator is not None and s.allocator.capabilities.real_device), None
    )
    where = torch.device(str(delegate.device)) if real is not None else torch.device("cpu")  # simulated: the host
    forward = delegate_module(delegate.module, where).forward
    getters = [_input_getter(value, tensors) for value in inputs]
    fixed = tuple(get() for get in getters) if all(isinstance(v, Slot) and v.static for v in inputs) else None
    in_place = set(getattr(delegate, "in_place", ()))  # outputs the graph wrote into an input's memory itself
    writes = [(slot, code_view(slot, tensors)) for position, slot in enumerate(outputs) if position not in in_place]
    resize = tensors.resize
    synchronize = real.synchronize if real is not None else None
    static = all(s.static for s in outputs)  # then each output's view is built once, here
    targets: list[tuple[Slot, Callable[[], torch.Tensor], torch.Tensor | None]] = [
        (slot, view, view() if static else None) for slot, view in writes
    ]

    def written(results: Any) -> Any:
        """The results the runtime writes into their outputs (not those the graph wrote in place)."""
        return [r for position, r in enumerate(results) if position not in in_place] if in_place else results

    def compute_static() -> None:
        assert fixed is not None  # offered only then
        for (_, _, target), result in zip(targets, written(forward(*fixed)), strict=True):  # while recording only
            assert target is not None  # static outputs
            target.copy_(result)

    def run() -> None:
        results = written(forward(*(fixed if fixed is not None else [get() for get in getters])))
        # one result per output (the GraphModule's signature); zip's strict keyword would cost ~0.1 us per call
        for (slot, view, target), result in zip(targets, results):  # noqa: B905
            if target is None:
                target = view()
            if target.shape != result.shape:
                resize(slot.tensor, slot.spec, tuple(result.shape), f"{what} output")
                target = view()
            target.copy_(result)
        if synchronize is not None:  # the next copy may run on the copy engine's own stream
            synchronize()

    return run, compute_static if fixed is not None and static else None
