"""`Program`: what emit produces and a method loads: values, instructions, an operator table and delegates.

The shape follows ExecuTorch's serialized program: instructions index into a flat value table; an operator call
names its operator by index into the operator table (the `[i]` of `Missing operator: [i] name`).
"""

from __future__ import annotations

from collections.abc import Mapping
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


Instruction = KernelCall | DelegateCall


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
    # mutable buffers (program state) by the model's name for them -> value index; a resident one is device memory
    buffers: dict[str, int] = field(default_factory=dict)

    def tensor(self, index: int) -> TensorValue:
        value = self.values[index]
        if not isinstance(value, TensorValue):
            raise TypeError(f"value {index} is a {type(value).__name__}, not a tensor")
        return value

    def tensor_indices(self, instruction: Instruction) -> list[int]:
        """The tensor value indices an instruction reads or writes (tensor-list items included)."""
        args = instruction.args + (instruction.outputs if isinstance(instruction, DelegateCall) else ())
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

    def __str__(self) -> str:
        lines = [
            f"Program: {len(self.values)} values, {len(self.instructions)} instructions, "
            f"operators {self.operators}, inputs {self.inputs}, outputs {self.outputs}"
        ]
        for i, ins in enumerate(self.instructions):
            if isinstance(ins, KernelCall):
                lines.append(f"  {i}: {self.operators[ins.op]}{list(ins.args)}")
            else:
                lines.append(
                    f"  {i}: delegate {self.delegates[ins.delegate].name}{list(ins.args)} -> {list(ins.outputs)}"
                )
        return "\n".join(lines)
