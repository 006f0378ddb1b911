"""`Program`: what emit produces and a method loads: values, instructions, an operator table and delegates.

The shape follows ExecuTorch's serialized program: instructions index into a flat value table; an operator call
names its operator by index into the operator table (the `[i]` of `Missing operator: [i] name`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..devices.device import CPU, Device


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's static description: dtype, sizes (the upper bound when dynamic), device and dynamism;
    `dynamic_dims`: the dimensions that may vary (None: every dimension of a dynamic tensor); `ranges`: for a
    graph input, each dimension's torch.export.Dim as (name, min, max), None for a static one (empty: unknown)."""

    dtype: torch.dtype
    sizes: tuple[int, ...]
    device: Device = CPU
    dynamic: bool = False
    dynamic_dims: tuple[int, ...] | None = None
    ranges: tuple[tuple[str, int, int] | None, ...] = field(default=(), compare=False)

    def may_vary(self, dim: int) -> bool:
        """Whether dimension `dim` may take sizes below its planned bound."""
        return self.dynamic and (self.dynamic_dims is None or dim in self.dynamic_dims)

    @property
    def numel(self) -> int:
        count = 1
        for size in self.sizes:
            count *= size
        return count

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


@dataclass(frozen=True, eq=False)
class ConstantSource:
    """The model's tensor a constant was emitted from: `name` as the model calls it (`fc.weight`), the `tensor`
    itself and, when the model is known, the mapping that holds it (`owner[key]`: a module's `_parameters`,
    `_buffers` or attributes), so that a tensor the model replaced (`load_state_dict(..., assign=True)`) is seen
    too. A loaded method copies the live tensor at load and checks it before every call (runtime/constants.py)."""

    name: str
    tensor: torch.Tensor
    owner: Mapping[str, Any] | None = None
    key: str = ""


@dataclass(frozen=True)
class TensorValue:
    """A tensor slot. `planned`: gets arena memory; `data`: a constant's contents (a device constant is owned by a
    delegate). `source`: the model's tensor behind `data`, when it came from a model (a parameter, buffer or tensor
    constant). A loaded method computes on its own copy of every constant, taken at load (docs/reliability.md,
    "Constants"). `mutable`: a buffer the program writes back; each method starts from its own copy of `data`
    (ExecuTorch's mutable buffers). A mutable buffer that is `planned` lives in its device's arena for the whole
    program (a resident buffer, placement/resident.py), filled from `data` at load."""

    spec: TensorSpec
    planned: bool = True
    data: torch.Tensor | None = field(default=None, compare=False)
    mutable: bool = False
    source: ConstantSource | None = field(default=None, compare=False, repr=False)

    @property
    def is_constant(self) -> bool:
        return self.data is not None


@dataclass(frozen=True)
class ScalarValue:
    """A non-tensor argument: int, float, bool, None, str, dtype, or a tuple of those (an int list)."""

    value: Any


@dataclass(frozen=True)
class TensorListValue:
    """A `Tensor[]` / `Tensor?[]` argument: value indices of its items (None for an absent optional)."""

    items: tuple[int | None, ...]


@dataclass(frozen=True)
class SymValue:
    """A scalar a primitive instruction computes at run time (a symbolic size, or arithmetic on sizes: ExecuTorch's
    `aten::sym_size.int`, `executorch_prim::mul.Scalar`); `hint` is its value for the example inputs."""

    hint: Any = 0


@dataclass(frozen=True)
class SymListValue:
    """An int list with items computed at run time: value indices of its items (ScalarValue or SymValue)."""

    items: tuple[int, ...]


Value = TensorValue | ScalarValue | TensorListValue | SymValue | SymListValue


@dataclass(frozen=True)
class KernelCall:
    """Call operator `op` (an operator-table index) with `args`: value indices in schema order, outs last."""

    op: int
    args: tuple[int, ...]


@dataclass(frozen=True)
class DelegateCall:
    """Run delegate `delegate` on the device: `args` are its input value indices, `outputs` its results."""

    delegate: int
    args: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class JumpFalseCall:
    """Go to instruction `destination` when value `cond` is false, else to the next one (ExecuTorch's
    JumpFalseCall). `cond` is a bool tensor (false when any element is false: the predicate of `torch.cond`) or a
    bool scalar (a constant False: the unconditional jump over the other branch; a loop's run-time test)."""

    cond: int
    destination: int


@dataclass(frozen=True)
class MoveCall:
    """Make value `move_to` hold what `move_from` holds (ExecuTorch's MoveCall: a branch's result into the value the
    code after `torch.cond` reads). devcopy copies the contents (a tensor's sizes and bytes, a scalar's value) since
    its kernels are prepared on fixed memory; ExecuTorch rebinds the value (docs/differences.md)."""

    move_from: int
    move_to: int


@dataclass(frozen=True)
class FreeCall:
    """Release an unbounded tensor's memory (ExecuTorch's FreeCall); devcopy plans every tensor, so it frees
    nothing."""

    value: int


Instruction = KernelCall | DelegateCall | JumpFalseCall | MoveCall | FreeCall
ControlInstruction = JumpFalseCall | MoveCall | FreeCall


@dataclass(frozen=True)
class BackendDelegate:
    """A lowered partition: a GraphModule run on `device`, called with its inputs then its owned constants.
    `in_place`: output positions the GraphModule writes into an input's memory itself (its call's output value is
    that input's), so the runtime copies nothing for them."""

    name: str
    module: torch.fx.GraphModule = field(compare=False)
    device: Device
    constants: tuple[int, ...] = ()
    in_place: tuple[int, ...] = ()


@dataclass(frozen=True)
class ControlRegion:
    """Where one control-flow construct of the graph lies among the instructions, so a run can say what it did:
    `node` (the graph node), `construct` (`torch.cond`, `control_flow.map`, `torch.scan`), `branches` (label ->
    the instruction positions start..stop-1 that only it runs: `true` and `false` for a cond, `body` for a loop)
    and `probe`: the instruction whose visits tell what ran (the jump that ends the true branch; a loop's
    backward jump, visited once per iteration)."""

    node: str
    construct: str
    branches: tuple[tuple[str, int, int], ...]
    probe: int

    def outcome(self, visits: Sequence[int]) -> dict[str, Any]:
        """What the last call did here, from each instruction's visits: `branch` (a cond: `true`, `false`, or
        None when the construct did not run) and `iterations` (a loop's count; 1 or 0 for a cond)."""
        probe = visits[self.probe] if 0 <= self.probe < len(visits) else 0
        if self.construct == "torch.cond":
            start = self.branches[0][1] - 1  # the jump that picks the branch
            ran = 0 <= start < len(visits) and visits[start] > 0
            branch = None if not ran else ("true" if probe else "false")
            return {"node": self.node, "construct": self.construct, "branch": branch, "iterations": int(ran)}
        return {
            "node": self.node,
            "construct": self.construct,
            "branch": "body" if probe else None,
            "iterations": probe,
        }


@dataclass
class Program:
    """An emitted program. `memory_plan` is filled by `runtime.memory_plan.plan_program`."""

    values: list[Value]
    instructions: list[Instruction]
    operators: list[str]
    inputs: list[int]
    outputs: list[int]
    delegates: list[BackendDelegate] = field(default_factory=list)
    memory_plan: Any = None
    written_back_inputs: list[int] = field(
        default_factory=list
    )  # input positions whose new value goes back to the caller
    load_instructions: int = 0  # the first N instructions run once, at load (hoisted constants), not on every call
    value_nodes: dict[int, str] = field(default_factory=dict)  # value index -> the graph node it was emitted for
    control_flow: list[ControlRegion] = field(default_factory=list)  # where each cond / map / scan was emitted
    # mutable buffers (program state) by the model's name for them -> value index; a resident one is device memory
    buffers: dict[str, int] = field(default_factory=dict)

    def tensor(self, index: int) -> TensorValue:
        value = self.values[index]
        if not isinstance(value, TensorValue):
            raise TypeError(f"value {index} is a {type(value).__name__}, not a tensor")
        return value

    def tensor_indices(self, instruction: Instruction) -> list[int]:
        """The tensor value indices an instruction reads or writes (tensor-list items included)."""
        args = instruction_args(instruction)
        found = []
        for index in args:
            value = self.values[index]
            if isinstance(value, TensorValue):
                found.append(index)
            elif isinstance(value, TensorListValue):
                found.extend(item for item in value.items if item is not None)
        return found

    def operator_of(self, call: KernelCall) -> str:
        return self.operators[call.op]

    def instruction_name(self, position: int) -> str:
        """What instruction `position` runs: its operator, its delegate's name, or its kind (`jump`, `move`,
        `free`), as ExecuTorch's program reader names them."""
        ins = self.instructions[position]
        if isinstance(ins, KernelCall):
            return self.operators[ins.op]
        if isinstance(ins, DelegateCall):
            return self.delegates[ins.delegate].name
        return CONTROL_KIND[type(ins)]

    def branch_of(self, position: int) -> str:
        """The innermost control-flow branch instruction `position` runs in, as `node.label` (`cond.true`,
        `map_impl.body`); empty outside every branch."""
        found, width = "", len(self.instructions) + 1
        for region in self.control_flow:
            for label, start, stop in region.branches:
                if start <= position < stop and stop - start < width:
                    found, width = f"{region.node}.{label}", stop - start
        return found

    @property
    def has_jumps(self) -> bool:
        """Whether control flow makes the instructions run other than once each, in order."""
        return any(isinstance(ins, JumpFalseCall) for ins in self.instructions)

    def __str__(self) -> str:
        lines = [
            f"Program: {len(self.values)} values, {len(self.instructions)} instructions, "
            f"operators {self.operators}, inputs {self.inputs}, outputs {self.outputs}"
        ]
        for i, ins in enumerate(self.instructions):
            if isinstance(ins, KernelCall):
                lines.append(f"  {i}: {self.operators[ins.op]}{list(ins.args)}")
            elif isinstance(ins, JumpFalseCall):
                lines.append(f"  {i}: jump to {ins.destination} if not [{ins.cond}]")
            elif isinstance(ins, MoveCall):
                lines.append(f"  {i}: move [{ins.move_from}] -> [{ins.move_to}]")
            elif isinstance(ins, FreeCall):
                lines.append(f"  {i}: free [{ins.value}]")
            else:
                lines.append(
                    f"  {i}: delegate {self.delegates[ins.delegate].name}{list(ins.args)} -> {list(ins.outputs)}"
                )
        return "\n".join(lines)


# The kind each control instruction is named by (`jump`, `move`, `free`: the names of the .pte reader's kinds)
CONTROL_KIND: dict[type, str] = {JumpFalseCall: "jump", MoveCall: "move", FreeCall: "free"}


def instruction_args(instruction: Instruction) -> tuple[int, ...]:
    """Every value index an instruction reads or writes, in order (a delegate's outputs after its inputs)."""
    if isinstance(instruction, KernelCall):
        return instruction.args
    if isinstance(instruction, DelegateCall):
        return instruction.args + instruction.outputs
    if isinstance(instruction, JumpFalseCall):
        return (instruction.cond,)
    if isinstance(instruction, MoveCall):
        return (instruction.move_from, instruction.move_to)
    return (instruction.value,)
