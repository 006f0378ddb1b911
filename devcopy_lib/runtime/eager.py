"""A placed Program run by torch eagerly: the reference a loaded Method is timed against ("the same placement, torch
doing the work"). Every value becomes a torch tensor where the program places it, CPU ops call their ATen overloads,
delegates call their graph module's forward, and each copy is a `copy_` between those tensors: no devcopy kernel,
allocator or plan is involved, so the difference to `load_method(program)` is devcopy's own runtime cost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import torch

from ..devices.errors import InvalidArgumentTypeError
from ..kernels.portable_cpu import aten_overload, split_arguments
from ..kernels.prim_ops import PRIM_FUNCTIONS, PRIM_TENSOR_OPS, SymBox, SymList, current, is_symbolic, prim_kernel
from .libs import native_lib
from .program import (
    DelegateCall,
    FreeCall,
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
    on_device = device_type != "cpu"

    def where(value: TensorValue) -> torch.device:
        if on_device and not value.spec.device.is_cpu:
            return torch.device(device_type, value.spec.device.index)
        return torch.device("cpu")

    def make(value: TensorValue) -> torch.Tensor:
        if value.data is not None:  # its own copy: a snapshot of the model, as a loaded method holds
            return value.data.to(where(value), copy=True)
        pinned = on_device and where(value).type == "cpu"
        return torch.empty(value.spec.sizes, dtype=value.spec.dtype, device=where(value), pin_memory=pinned)

    tensors = {i: make(v) for i, v in enumerate(program.values) if isinstance(v, TensorValue)}
    boxes = {i: SymBox(v.hint) for i, v in enumerate(program.values) if isinstance(v, SymValue)}

    def lift(index: int) -> Any:
        value = program.values[index]
        if isinstance(value, TensorValue):
            return tensors[index]
        if isinstance(value, TensorListValue):
            return [None if i is None else tensors[i] for i in value.items]
        if isinstance(value, SymValue):
            return boxes[index]
        if isinstance(value, SymListValue):
            return SymList([lift(i) for i in value.items])
        return value.value

    steps: list[Callable[[], object]] = []
    gotos: dict[int, Callable[[], int]] = {}  # a jump's position -> where to go on
    for position, ins in enumerate(program.instructions):
        if isinstance(ins, JumpFalseCall):
            gotos[position] = _jump(lift(ins.cond), position + 1, ins.destination)
            steps.append(lambda: None)
            continue
        if isinstance(ins, MoveCall):
            steps.append(_move(lift(ins.move_from), lift(ins.move_to)))
            continue
        if isinstance(ins, FreeCall):
            steps.append(lambda: None)
            continue
        if isinstance(ins, DelegateCall):
            delegate = program.delegates[ins.delegate]
            args = [lift(i) for i in (*ins.args, *delegate.constants)]
            steps.append(_delegate_step(delegate.module.forward, args, [tensors[i] for i in ins.outputs]))
            continue
        assert isinstance(ins, KernelCall)
        name = program.operators[ins.op]
        if name.startswith(COPY_NAMESPACE):  # (src, ..., out): the copy torch itself would make
            steps.append(partial(tensors[ins.args[-1]].copy_, tensors[ins.args[0]]))
            continue
        if name in PRIM_FUNCTIONS or name in PRIM_TENSOR_OPS:  # a size, computed into its SymBox at each call
            steps.append(prim_kernel(name, portable=False).prepare([lift(i) for i in ins.args], ()))
            continue
        schema = resolve_operators([name], [native_lib()])[0].schema
        args = [lift(i) for i in ins.args]
        positional, keywords = split_arguments(schema, args)
        if any(is_symbolic(a) for a in args):
            steps.append(_call_now(aten_overload(name), positional, keywords))
        else:
            steps.append(partial(aten_overload(name), *positional, **keywords))
    for step in steps[: program.load_instructions]:
        step()
    per_call = steps[program.load_instructions :]
    inputs, outputs = [tensors[i] for i in program.inputs], [tensors[i] for i in program.outputs]

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
