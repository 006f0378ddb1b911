"""An ExecuTorch program as a devcopy `Program`: `pte_program` turns a `PteProgram`
that `open_pte` read into the `Program` devcopy's runtime loads (`runtime.method.load_program`, or `load_method`),
keeping ExecuTorch's own memory plan - its buffers, their devices and every tensor's (buffer, offset) - instead of
planning again.

What changes on the way: an ExecuTorch kernel call lists its schema's arguments and then its returns (the `out`
again), devcopy's lists the arguments only; a delegate call lists inputs then outputs, split here by the number of
outputs of the delegate's ExportedProgram; an IntList's value indices become the ints themselves. Delegates must be
devcopy's own (`backend.py`): their blob is loaded back with `torch.export.load`. Control flow runs (docs/semantics.md
§5c): a JumpFalseCall, MoveCall or FreeCall becomes devcopy's own (a move copies where ExecuTorch rebinds, a free
frees nothing); a primitive op (`aten::sym_size.int`, `executorch_prim::*`) keeps every argument, its value out
included, as devcopy's primitives take it; scan's `aten::copy_` (in place: self, src, non_blocking, and the return,
which is self) runs as `aten::copy.out` with the same four arguments. Another backend's delegates are refused with a
`PteUnsupportedError` naming them; the program's operators are resolved when it is loaded, so an operator no linked
lib has is a `MissingOperatorError` there, as in ExecuTorch.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.export.graph_signature import InputKind, OutputKind

from ..devices.device import CPU, Device
from ..kernels.prim_ops import PRIM_FUNCTIONS, PRIM_TENSOR_OPS
from ..names import ErrorKind
from ..runtime.memory_plan import Allocation, Buffer, MemoryPlan
from ..runtime.program import (
    BackendDelegate,
    DelegateCall,
    FreeCall,
    Instruction,
    JumpFalseCall,
    KernelCall,
    MoveCall,
    Program,
    ScalarValue,
    SymValue,
    TensorListValue,
    TensorSpec,
    TensorValue,
    Value,
)
from ..tensors.error import Error
from .backend import BACKEND_ID, load_delegate
from .reader import (
    PteDelegate,
    PteFree,
    PteJumpFalse,
    PteKernel,
    PteList,
    PteLoadError,
    PteMove,
    PteProgram,
    PteScalar,
    PteTensor,
)

# ExecuTorch operators devcopy runs as another: scan's in-place copy as its out form, the same four arguments
# (ExecuTorch's boxed `copy_` takes self, src, non_blocking and its return, self again; copy.out's out is self)
RUN_AS = {"aten::copy_": "aten::copy.out"}


class PteUnsupportedError(Exception):
    """A program devcopy can read but not run: another backend's delegate, an operator whose schema torch does not
    know, or control flow devcopy cannot follow (a jump out of the program)."""

    kind = ErrorKind.UNSUPPORTED_MODEL


def argument_count(name: str) -> int | None:
    """How many arguments (outs included, returns excluded) operator `name` (`ns::op.overload`) takes; None for a
    primitive op of the runtime, which takes every argument ExecuTorch lists (its value out is one)."""
    if name in PRIM_FUNCTIONS or name in PRIM_TENSOR_OPS:
        return None
    namespace, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), op)
        return len(getattr(packet, overload or "default")._schema.arguments)
    except (AttributeError, RuntimeError) as exc:
        raise PteUnsupportedError(
            f"operator {name}: torch knows no schema for it, so its arguments cannot be told from its returns. "
            "To fix: import the library that defines it (e.g. executorch.exir for dim_order_ops) before converting"
        ) from exc


def _value(p: PteProgram, v: Any) -> Value:
    if isinstance(v, PteTensor):
        data = None
        if v.constant:
            raw = bytearray(p.constants[v.constant][: v.nbytes])  # without the segment's padding
            data = torch.frombuffer(raw, dtype=v.dtype).reshape(v.sizes) if raw else torch.empty(v.sizes, dtype=v.dtype)
        return TensorValue(TensorSpec(v.dtype, v.sizes, v.device, v.dynamism != "STATIC"), v.mem_id is not None, data)
    if isinstance(v, PteScalar):
        return ScalarValue(v.value)
    assert isinstance(v, PteList)
    if v.kind == "IntList":  # value indices of Int values (a SymInt's value is not an Int: refused)
        items = [p.values[i] for i in v.items]
        if not all(isinstance(item, PteScalar) and isinstance(item.value, int) for item in items):
            raise PteUnsupportedError(f"an int list {list(v.items)} refers to values that are not ints")
        return ScalarValue(tuple(item.value for item in items if isinstance(item, PteScalar)))
    if v.items_are_values:
        return ScalarValue(tuple(v.items))
    return TensorListValue(tuple(None if i == -1 else i for i in v.items))


def _exported(index: int, blob: bytes) -> torch.export.ExportedProgram:
    """Delegate `index`'s blob read back; a blob torch.export cannot read is a PteLoadError naming the delegate."""
    try:
        return load_delegate(blob)
    except Exception as exc:  # a damaged archive makes torch.export.load raise anything
        raise PteLoadError(
            Error.InvalidProgram,
            f"delegate {index}'s blob ({len(blob)} bytes) is no {BACKEND_ID} program: {type(exc).__name__}: {exc}",
            "the file is corrupted; write it again with executorch_pte() or devcopy place MODEL --save-pte",
        ) from exc


def delegate_module(ep: torch.export.ExportedProgram, what: str) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    """A delegate's ExportedProgram as devcopy runs a delegate: a GraphModule called with the user inputs followed by
    the delegate's own constants (its weights, buffers and lifted tensors, returned in that order), so that loading
    copies them to the delegate's device once - a delegate never reads host memory. A delegate that writes a buffer
    is refused (its state would need a home across calls)."""
    signature = ep.graph_signature
    written = [spec.target for spec in signature.output_specs if spec.kind != OutputKind.USER_OUTPUT]
    if written:
        raise PteUnsupportedError(
            f"{what} writes its own state ({', '.join(map(str, written))}): devcopy runs stateless delegates only. "
            "To fix: keep mutated buffers outside the delegated ops, or run the program in ExecuTorch"
        )
    graph = copy.deepcopy(ep.graph_module.graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    lifted = [
        (node, spec)
        for node, spec in zip(placeholders, signature.input_specs, strict=True)
        if spec.kind != InputKind.USER_INPUT
    ]
    last = placeholders[-1] if placeholders else None
    for node, _ in lifted:  # placeholders run in order: the constants move after the user inputs
        if last is not None and node is not last:
            last.append(node)
            last = node
    state = {**ep.state_dict, **ep.constants}
    weights = [state[str(spec.target)].detach().to("cpu").contiguous() for _, spec in lifted]
    return torch.fx.GraphModule(ep.graph_module, graph), weights


def _spec(tensor: torch.Tensor, device: Device) -> TensorSpec:
    return TensorSpec(tensor.dtype, tuple(tensor.shape), device)


def _add(values: list[Value], value: Value) -> int:
    values.append(value)
    return len(values) - 1


def pte_program(p: PteProgram) -> Program:
    """A devcopy `Program` running `p` with ExecuTorch's memory plan (see the module docstring for what changes and
    what is refused)."""
    foreign = [f"{i}: {d.backend_id}" for i, d in enumerate(p.delegates) if d.backend_id != BACKEND_ID]
    if foreign:
        raise PteUnsupportedError(
            f"delegates of another backend ({', '.join(foreign)}): devcopy runs only {BACKEND_ID}'s blobs. "
            "To fix: lower with devcopy's partitioner (executorch_pte), or run the program in ExecuTorch"
        )
    exported = [_exported(i, d.blob) for i, d in enumerate(p.delegates)]
    values = [_value(p, v) for v in p.values]
    delegates = []
    for i, (d, ep) in enumerate(zip(p.delegates, exported, strict=True)):
        device = d.device or CPU
        module, weights = delegate_module(ep, f"delegate {i}")
        constants = tuple(_add(values, TensorValue(_spec(t, device), planned=False, data=t)) for t in weights)
        delegates.append(BackendDelegate(f"delegate_{i}", module, device, constants))
    operators = [RUN_AS.get(op, op) for op in p.operators]
    counts = {op: argument_count(op) for op in operators}
    instructions: list[Instruction] = []
    for position, ins in enumerate(p.instructions):
        if isinstance(ins, PteKernel):
            instructions.append(KernelCall(ins.op, ins.args[: counts[operators[ins.op]]]))
        elif isinstance(ins, PteDelegate):
            outputs = len(exported[ins.delegate].graph_signature.user_outputs)
            split = len(ins.args) - outputs
            instructions.append(DelegateCall(ins.delegate, ins.args[:split], ins.args[split:]))
        elif isinstance(ins, PteJumpFalse):
            if not 0 <= ins.destination <= len(p.instructions):
                raise PteUnsupportedError(
                    f"instruction {position} jumps to {ins.destination}, outside the program's "
                    f"{len(p.instructions)} instructions"
                )
            instructions.append(JumpFalseCall(ins.cond, ins.destination))
        elif isinstance(ins, PteMove):
            instructions.append(MoveCall(ins.source, ins.target))
        else:
            assert isinstance(ins, PteFree)
            instructions.append(FreeCall(ins.value))
    _scalars_written_at_run_time(values, instructions, counts, operators)
    program = Program(
        values=values,
        instructions=instructions,
        operators=operators,
        inputs=list(p.inputs),
        outputs=list(p.outputs),
        delegates=delegates,
    )
    program.memory_plan = MemoryPlan(
        tuple(Buffer(p.buffer_devices.get(i, CPU), size) for i, size in enumerate(p.buffer_sizes)),
        {
            i: Allocation(v.mem_id, v.offset)
            for i, v in enumerate(p.values)
            if isinstance(v, PteTensor) and v.mem_id is not None and v.offset is not None
        },
    )
    return program


def _scalars_written_at_run_time(
    values: list[Value], instructions: list[Instruction], counts: dict[str, int | None], operators: list[str]
) -> None:
    """Every scalar EValue of ExecuTorch is mutable; devcopy's constants are not, so a scalar a primitive op writes
    (a size, a loop's counter, its done flag) or a move targets becomes a run-time scalar (a SymValue holding the
    value the program starts with)."""
    written = {
        ins.args[-1] for ins in instructions if isinstance(ins, KernelCall) and counts[operators[ins.op]] is None
    } | {ins.move_to for ins in instructions if isinstance(ins, MoveCall)}
    for index in written:
        value = values[index]
        if isinstance(value, ScalarValue):
            values[index] = SymValue(value.value)


def pte_inputs(p: PteProgram, seed: int = 0) -> list[Any]:
    """Inputs for a run of `p`, made from its input values (a `.pte` keeps no example inputs): a tensor input gets
    seeded random data of its dtype and sizes (floats normal, integers 0..9, bools either), a scalar its value."""
    generator = torch.Generator().manual_seed(seed)
    inputs: list[Any] = []
    for index in p.inputs:
        v = p.values[index]
        if not isinstance(v, PteTensor):
            inputs.append(v.value if isinstance(v, PteScalar) else list(v.items))
        elif v.dtype.is_floating_point or v.dtype.is_complex:
            inputs.append(torch.randn(v.sizes, generator=generator, dtype=v.dtype))
        elif v.dtype == torch.bool:
            inputs.append(torch.randint(0, 2, v.sizes, generator=generator).bool())
        else:
            inputs.append(torch.randint(0, 10, v.sizes, generator=generator, dtype=v.dtype))
    return inputs


__all__ = ["PteUnsupportedError", "argument_count", "pte_inputs", "pte_program"]
