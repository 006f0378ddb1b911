"""The form two programs are compared in (docs/pte.md, "The artifact as the measure"): devcopy's emitted `Program`
and ExecuTorch's `.pte` (`PteProgram`) reduced to the same `Artifact` - operator table, instruction steps, copies,
memory plan per buffer.

Value indices differ between the two (ExecuTorch numbers a kernel's scalar arguments after its out), so a tensor is
named by its origin: `input k`, `constant <dtype>[sizes]#<digest of its bytes>`, or `<op>[n]#<digest>`, the n-th
tensor an instruction writes, where the digest covers the op and the names of the tensors it reads - two values have
one name exactly when the same computation made them. A static `view_copy` whose result is no program output is
elided by ExecuTorch (its result shares the base's memory, docs/differences.md "view_elided"); both sides name such a
value `view(<base>)`, and devcopy's instruction is kept aside in `Artifact.elided`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from ..devices.device import CPU, Device
from ..names import COPY_OP_BY_NAME, Direction
from ..runtime.memory_plan import CONSTANT_BUFFER, DEFAULT_ALIGNMENT, plan, plan_program
from ..runtime.program import DelegateCall, KernelCall, Program, TensorValue
from .convert import argument_count
from .reader import PteDelegate, PteKernel, PteProgram, PteTensor

VIEW_COPY = "aten::view_copy.out"
# to_edge's dim-order ops (exir/passes/memory_format_ops_pass.py) in devcopy's spelling (docs/differences.md
# "edge_spelling"): the same computation, told apart by how a tensor's layout is named
EDGE_SPELLING = {
    "dim_order_ops::_to_dim_order_copy.out": "aten::_to_copy.out",
    "dim_order_ops::_clone_dim_order.out": "aten::clone.out",
}
# ExecuTorch's primitive ops write a scalar they return: no out argument to tell from the returns
_NO_SCHEMA = frozenset({"aten::sym_size.int", "aten::sym_numel"})
EXECUTORCH_ALIGNMENT = 16  # exir/tensor.py ALIGNMENT: what ExecuTorch's MemoryPlanningPass aligns every tensor to


@dataclass(frozen=True)
class Step:
    """One instruction: its `position`, `kind` (kernel, delegate, move, jump, free), `name` (the operator, or
    `delegate_<i>@<device>`), and the names of the tensors it reads and writes."""

    position: int
    kind: str
    name: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
        """What the step computes, without where it stands, which delegate index it calls or, for a delegate, the
        order of its arguments and results (each side's own calling convention)."""
        if self.kind == "delegate":
            return self.kind, _op(self.name), tuple(sorted(self.reads)), tuple(sorted(self.writes))
        return self.kind, self.name, self.reads, self.writes

    def __str__(self) -> str:
        return f"{self.position}: {self.name}({', '.join(self.reads)}) -> ({', '.join(self.writes)})"


@dataclass(frozen=True)
class Copy:
    """An et_copy call: its instruction position, direction, the value it copies (by name), that value's dtype and
    sizes, and the device on the other side."""

    position: int
    direction: str
    source: str
    dtype: str
    sizes: tuple[int, ...]
    device: str

    @property
    def key(self) -> tuple[str, str, str, tuple[int, ...], str]:
        return self.direction, self.source, self.dtype, self.sizes, self.device

    def __str__(self) -> str:
        return f"{self.position}: {self.direction} {self.source} {self.dtype}{list(self.sizes)} ({self.device})"


@dataclass(frozen=True)
class BufferPlan:
    """One non-constant buffer: its index, bytes, device, and `extent`, the end of the last tensor planned in it
    (each rounded up to the planner's alignment): what a planner that wastes nothing at the end makes the size.
    `realigned`: the size devcopy's planner gives at ExecuTorch's alignment (None for ExecuTorch's own plan)."""

    index: int
    nbytes: int
    device: str
    extent: int
    realigned: int | None = None

    def __str__(self) -> str:
        return f"buffer {self.index}: {self.nbytes} bytes on {self.device}"


@dataclass(frozen=True)
class Artifact:
    """One program in the compared form; `elided`: devcopy's view_copy steps ExecuTorch would elide."""

    operators: tuple[str, ...]
    steps: tuple[Step, ...]
    copies: tuple[Copy, ...]
    buffers: tuple[BufferPlan, ...]
    elided: tuple[Step, ...] = field(default=())
    respelled: tuple[str, ...] = field(default=())  # ExecuTorch's operators named here by EDGE_SPELLING


def _op(name: str) -> str:
    """A step's name without its delegate index (`delegate_2@cuda:0` -> `delegate@cuda:0`): each side numbers its
    delegates in the order it emits them."""
    if name.startswith("delegate_"):
        return "delegate@" + name.partition("@")[2]
    return name


def _digest(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:8]


def _dtype(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _spec(dtype: torch.dtype, sizes: Iterable[int]) -> str:
    return f"{_dtype(dtype)}{list(sizes)}"


def _constant_name(dtype: torch.dtype, sizes: Iterable[int], data: bytes) -> str:
    sizes = list(sizes)
    return f"constant {_dtype(dtype)}{sizes}#{_digest(data)}"


def _aligned(nbytes: int, alignment: int) -> int:
    return -(-nbytes // alignment) * alignment


class _Names:
    """The name of every tensor value, given as the instructions are walked in order."""

    def __init__(self, inputs: list[int], constants: dict[int, str]) -> None:
        self.of: dict[int, str] = {v: f"input {k}" for k, v in enumerate(inputs)}
        self.of.update(constants)

    def written(self, name: str, reads: tuple[str, ...], outs: list[int], specs: list[str]) -> tuple[str, ...]:
        """Name the tensors `outs` (of dtype and sizes `specs`) that op `name` writes from tensors named `reads`: a
        kernel's by position, a delegate's by spec and rank among its results of that spec, from its reads in any
        order (the two sides order a delegate's arguments and results each its own way)."""
        op = _op(name)
        delegate = op.startswith("delegate@")
        seen: Counter[str] = Counter()
        for n, (index, spec) in enumerate(zip(outs, specs, strict=True)):
            place = f"{spec}:{seen[spec]}" if delegate else n
            seen[spec] += 1
            digest = _digest(op, place, sorted(reads) if delegate else reads, spec)
            self.of[index] = f"{op}#{digest}" if delegate else f"{op}[{n}]#{digest}"
        return tuple(self.of[i] for i in outs)


def _copy(
    position: int, name: str, source: str, dtype: torch.dtype, sizes: tuple[int, ...], devices: tuple[Device, Device]
) -> Copy:
    direction = COPY_OP_BY_NAME[name].direction.value
    device = devices[1] if direction == Direction.H2D else devices[0]
    return Copy(position, direction, source, _dtype(dtype), sizes, str(device))


def program_artifact(program: Program) -> Artifact:
    """devcopy's emitted `program` in the compared form (planned with `plan_program` when it carries no plan)."""
    memory_plan = program.memory_plan or plan_program(program)
    names = _Names(
        program.inputs,
        {
            i: _constant_name(v.spec.dtype, v.spec.sizes, v.data.numpy().tobytes() if v.data is not None else b"")
            for i, v in enumerate(program.values)
            if isinstance(v, TensorValue) and v.is_constant
        },
    )
    steps, copies, elided = [], [], []
    for position, ins in enumerate(program.instructions):
        tensors = list(dict.fromkeys(program.tensor_indices(ins)))
        outs = [t for t in tensors if t not in names.of]
        reads = tuple(names.of[t] for t in tensors if t in names.of)
        if isinstance(ins, KernelCall):
            kind, name = "kernel", program.operators[ins.op]
        elif isinstance(ins, DelegateCall):
            kind, name = "delegate", f"delegate_{ins.delegate}@{program.delegates[ins.delegate].device}"
            outs = list(ins.outputs)
        else:  # a jump, move or free: named by its kind, as the .pte reader names them
            kind = name = program.instruction_name(position)
        if name == VIEW_COPY and not set(outs) & set(program.outputs):
            # a view of a view is one of the base (ExecuTorch's NormalizeViewCopyBasePass)
            names.of[outs[0]] = reads[0] if reads[0].startswith("view(") else f"view({reads[0]})"
            elided.append(Step(position, kind, name, reads, (names.of[outs[0]],)))
            continue
        specs = [_spec(program.tensor(t).spec.dtype, program.tensor(t).spec.sizes) for t in outs]
        steps.append(Step(position, kind, name, reads, names.written(name, reads, outs, specs)))
        if name in COPY_OP_BY_NAME and isinstance(ins, KernelCall):
            source, out = program.tensor(ins.args[0]).spec, program.tensor(ins.args[-1]).spec
            copies.append(_copy(position, name, reads[0], source.dtype, source.sizes, (source.device, out.device)))
    realigned = plan(memory_plan.requests, EXECUTORCH_ALIGNMENT).buffers
    extents: dict[int, int] = {}
    for request in memory_plan.requests:
        allocation = memory_plan.allocations[request.key]
        end = allocation.offset + _aligned(request.nbytes, DEFAULT_ALIGNMENT)
        extents[allocation.buffer] = max(extents.get(allocation.buffer, 0), end)
    buffers = tuple(
        BufferPlan(i, b.nbytes, str(b.device), extents.get(i, 0), realigned[i].nbytes if i < len(realigned) else None)
        for i, b in enumerate(memory_plan.buffers)
        if i != CONSTANT_BUFFER
    )
    return Artifact(tuple(program.operators), tuple(steps), tuple(copies), buffers, tuple(elided))


class _PteWalk:
    """ExecuTorch's instructions in order, naming a value it reads before any instruction wrote it (an elided view,
    which shares its base's memory) after the latest written tensor at the same place of the same size."""

    def __init__(self, p: PteProgram) -> None:
        self.p = p
        constants = {
            i: _constant_name(v.dtype, v.sizes, p.constants[v.constant][: v.nbytes])
            for i, v in enumerate(p.values)
            if isinstance(v, PteTensor) and v.constant
        }
        self.names = _Names(p.inputs, constants)
        self.places: dict[tuple[int | None, int | None, int], int] = {}  # (buffer, offset, bytes) -> latest writer
        for index in p.inputs:  # a view of an input shares the input's memory too
            if isinstance(p.values[index], PteTensor):
                self.places[self.place(index)] = index

    def place(self, index: int) -> tuple[int | None, int | None, int]:
        t = self.p.tensor(index)
        return t.mem_id, t.offset, t.nbytes

    def read(self, index: int) -> str:
        if index not in self.names.of:
            base = self.places.get(self.place(index))
            self.names.of[index] = f"view({self.names.of[base]})" if base is not None else f"unwritten value {index}"
        return self.names.of[index]

    def step(self, position: int, kind: str, name: str, ins: PteKernel | PteDelegate) -> Step:
        spelled = self.p.operators[ins.op] if isinstance(ins, PteKernel) else name
        count = None if spelled in _NO_SCHEMA or not isinstance(ins, PteKernel) else argument_count(spelled)
        if isinstance(ins, PteKernel) and count is not None:  # a primitive keeps every argument (count None)
            # ExecuTorch lists the schema's arguments, then the returns (the outs again)
            returns = len(ins.args) - count
            outs = self.p.tensors_of(ins.args[len(ins.args) - returns :])
            inputs = [t for t in self.p.tensors_of(ins.args[: len(ins.args) - returns]) if t not in outs]
        else:  # a delegate's inputs, then its outputs: the trailing values nothing wrote yet
            tensors = self.p.tensors_of(ins.args)
            split = len(tensors)
            while split and tensors[split - 1] not in self.names.of:
                split -= 1
            inputs, outs = tensors[:split], tensors[split:]
        reads = tuple(self.read(t) for t in inputs)
        specs = [_spec(self.p.tensor(t).dtype, self.p.tensor(t).sizes) for t in outs]
        writes = self.names.written(name, reads, outs, specs)
        for t in outs:
            self.places[self.place(t)] = t
        return Step(position, kind, name, reads, writes)


def pte_artifact(p: PteProgram) -> Artifact:
    """ExecuTorch's program `p` (as `open_pte` reads it) in the compared form, its dim-order ops spelled as
    devcopy spells them (EDGE_SPELLING)."""
    walk = _PteWalk(p)
    steps, copies = [], []
    for position, ins in enumerate(p.instructions):
        if isinstance(ins, PteKernel):
            step = walk.step(position, "kernel", EDGE_SPELLING.get(p.operators[ins.op], p.operators[ins.op]), ins)
        elif isinstance(ins, PteDelegate):
            device = p.delegates[ins.delegate].device or CPU
            step = walk.step(position, "delegate", f"delegate_{ins.delegate}@{device}", ins)
        else:
            step = Step(position, ins.kind, ins.kind)
        steps.append(step)
        if isinstance(ins, PteKernel) and step.name in COPY_OP_BY_NAME:
            source, out = p.tensor(ins.args[0]), p.tensor(ins.args[1])
            copies.append(
                _copy(position, step.name, step.reads[0], source.dtype, source.sizes, (source.device, out.device))
            )
    extents: dict[int, int] = {}
    for v in p.values:
        if isinstance(v, PteTensor) and v.mem_id is not None and v.offset is not None:
            end = v.offset + _aligned(v.nbytes, EXECUTORCH_ALIGNMENT)
            extents[v.mem_id] = max(extents.get(v.mem_id, 0), end)
    buffers = tuple(
        BufferPlan(i, size, str(p.buffer_devices.get(i, CPU)), extents.get(i, 0))
        for i, size in enumerate(p.buffer_sizes)
        if i != CONSTANT_BUFFER
    )
    operators = tuple(EDGE_SPELLING.get(o, o) for o in p.operators)
    respelled = tuple(o for o in p.operators if o in EDGE_SPELLING)
    return Artifact(operators, tuple(steps), tuple(copies), buffers, respelled=respelled)


__all__ = ["Artifact", "BufferPlan", "Copy", "EXECUTORCH_ALIGNMENT", "Step", "pte_artifact", "program_artifact"]
