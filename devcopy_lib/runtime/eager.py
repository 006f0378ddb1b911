"""A placed Program run by torch eagerly: the reference a loaded Method is timed against ("the same placement, torch
doing the work"). Every value becomes a torch tensor where the program places it, CPU ops call their ATen overloads,
delegates call their graph module's forward, and each copy is a `copy_` between those tensors: no devcopy kernel,
allocator or plan is involved, so the difference to `load_method(program)` is devcopy's own runtime cost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch

from ..devices.device import Device
from ..errors import InvalidArgumentTypeError
from ..kernels.portable_cpu import aten_overload, split_arguments
from ..kernels.prim_ops import PRIM_FUNCTIONS, PRIM_TENSOR_OPS, SymBox, SymList, current, is_symbolic, prim_kernel
from .delegates import delegate_module
from .libs import native_lib
from .program import (
    DelegateCall,
    FreeCall,
    Instruction,
    JumpFalseCall,
    KernelCall,
    MoveCall,
    Program,
    SymListValue,
    SymValue,
    TensorListValue,
    TensorValue,
)
from .resolve import resolve_operators

COPY_NAMESPACE = "et_copy::"


def _delegate_step(
    forward: Callable[..., Sequence[torch.Tensor]], args: list[Any], outs: list[torch.Tensor]
) -> Callable[[], None]:
    """A delegate call as torch runs it: its graph module's forward (a size argument at its value now), results
    copied into the output tensors."""

    symbolic = any(is_symbolic(arg) for arg in args)

    def step() -> None:
        for out, value in zip(outs, forward(*([current(a) for a in args] if symbolic else args)), strict=True):
            out.copy_(value)

    return step


def _call_now(op: Callable[..., Any], positional: list[Any], keywords: dict[str, Any]) -> Callable[[], None]:
    """An op call whose arguments hold sizes computed at run time: their values are read at each call."""

    def step() -> None:
        op(*(current(a) for a in positional), **{k: current(v) for k, v in keywords.items()})

    return step


def _jump(cond: Any, after: int, destination: int) -> Callable[[], int]:
    """A JumpFalseCall as torch runs it: the next position (`destination` when `cond` is false)."""
    if isinstance(cond, torch.Tensor):
        return lambda: after if bool(cond.all()) else destination
    return lambda: after if bool(current(cond)) else destination


def _move(source: Any, target: Any) -> Callable[[], None]:
    """A MoveCall: the target takes the source's sizes and contents (a tensor) or value (a run-time scalar)."""

    def move() -> None:
        if isinstance(target, torch.Tensor):
            target.resize_(source.shape).copy_(source)
        else:
            target.value = current(source)

    return move


class _EagerValues:
    """The program's values as torch objects: a tensor per TensorValue (where `device_type` places it), a SymBox per
    run-time size; `lift` gives an instruction argument its torch form."""

    def __init__(self, program: Program, device_type: str) -> None:
        self.program, self.device_type = program, device_type
        self.on_device = device_type != "cpu"
        self.tensors = {i: self._make(v) for i, v in enumerate(program.values) if isinstance(v, TensorValue)}
        self.boxes = {i: SymBox(v.hint) for i, v in enumerate(program.values) if isinstance(v, SymValue)}

    def where(self, device: Device) -> torch.device:
        """The torch device a value or delegate placed on `device` uses here."""
        if self.on_device and not device.is_cpu:
            return torch.device(self.device_type, device.index)
        return torch.device("cpu")

    def _make(self, value: TensorValue) -> torch.Tensor:
        where = self.where(value.spec.device)
        if value.data is not None:  # its own copy: a snapshot of the model, as a loaded method holds
            return value.data.to(where, copy=True)
        pinned = self.on_device and where.type == "cpu"
        return torch.empty(value.spec.sizes, dtype=value.spec.dtype, device=where, pin_memory=pinned)

    def lift(self, index: int) -> Any:
        value = self.program.values[index]
        if isinstance(value, TensorValue):
            return self.tensors[index]
        if isinstance(value, TensorListValue):
            return [None if i is None else self.tensors[i] for i in value.items]
        if isinstance(value, SymValue):
            return self.boxes[index]
        if isinstance(value, SymListValue):
            return SymList([self.lift(i) for i in value.items])
        return value.value


def _eager_step(program: Program, values: _EagerValues, ins: Instruction) -> Callable[[], object]:
    """One instruction as torch runs it: a move, nothing (a jump, whose target `eager_program` follows, or a free), a
    delegate's forward, a `copy_`, a size computed into its SymBox, or the ATen overload of a CPU op."""
    if isinstance(ins, MoveCall):
        return _move(values.lift(ins.move_from), values.lift(ins.move_to))
    if isinstance(ins, (JumpFalseCall, FreeCall)):
        return lambda: None
    if isinstance(ins, DelegateCall):
        delegate = program.delegates[ins.delegate]
        args = [values.lift(i) for i in (*ins.args, *delegate.constants)]
        module = delegate_module(delegate.module, values.where(delegate.device), direct=False)
        return _delegate_step(module.forward, args, [values.tensors[i] for i in ins.outputs])
    assert isinstance(ins, KernelCall)
    name = program.operators[ins.op]
    if name.startswith(COPY_NAMESPACE):  # (src, ..., out): the copy torch itself would make
        return partial(values.tensors[ins.args[-1]].copy_, values.tensors[ins.args[0]])
    if name in PRIM_FUNCTIONS or name in PRIM_TENSOR_OPS:  # a size: computed into its SymBox at each call
        return prim_kernel(name, portable=False).prepare([values.lift(i) for i in ins.args], ())
    schema = resolve_operators([name], [native_lib()])[0].schema
    args = [values.lift(i) for i in ins.args]
    positional, keywords = split_arguments(schema, args)
    if any(is_symbolic(a) for a in args):
        return _call_now(aten_overload(name), positional, keywords)
    return partial(aten_overload(name), *positional, **keywords)


def eager_program(program: Program, device_type: str = "cpu") -> Callable[..., list[torch.Tensor]]:
    """`run(*inputs) -> outputs` running `program` with torch eager. Values the program places on a device live on
    torch's `device_type` device of the same index (`"cuda"` on a real device; `"cpu"` when the device is simulated,
    where they are ordinary CPU tensors), host values on the CPU, pinned when a device is real. Instructions run at
    load (hoisted constants) run once here; constants are copied when it is built (docs/reliability.md); outputs come
    back as CPU tensors the caller owns."""
    if not isinstance(program, Program):
        raise InvalidArgumentTypeError(
            f"eager_program takes an emitted Program, got {type(program).__name__}; pass emit(placed)"
        )
    values = _EagerValues(program, device_type)
    steps = [_eager_step(program, values, ins) for ins in program.instructions]
    gotos = {  # a jump's position -> where to go on
        position: _jump(values.lift(ins.cond), position + 1, ins.destination)
        for position, ins in enumerate(program.instructions)
        if isinstance(ins, JumpFalseCall)
    }
    for step in steps[: program.load_instructions]:
        step()
    per_call = steps[program.load_instructions :]
    inputs = [values.tensors[i] for i in program.inputs]
    outputs = [values.tensors[i] for i in program.outputs]

    def run(*xs: torch.Tensor) -> list[torch.Tensor]:
        for slot, x in zip(inputs, xs, strict=True):
            slot.copy_(x)
        if gotos:  # control flow: by a program counter
            position, end = program.load_instructions, len(steps)
            while position < end:
                steps[position]()
                goto = gotos.get(position)
                position = position + 1 if goto is None else goto()
        else:
            for step in per_call:
                step()
        return [out.cpu() if out.device.type != "cpu" else out.clone() for out in outputs]

    return run
