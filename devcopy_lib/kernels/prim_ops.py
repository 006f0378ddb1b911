"""Primitive ops: the sizes and size arithmetic of a dynamically shaped program, evaluated by the runtime.

ExecuTorch emits `aten.sym_size.int` and the Python arithmetic on sizes (`operator.mul`, `add`, ...) as operators
that write a scalar value at run time (`aten::sym_size.int`, `executorch_prim::mul.Scalar`, ...), registered by the
runtime itself in both modes rather than by a kernel lib. devcopy does the same (docs/semantics.md §5b): a
`SymBox` holds such a value while a method runs; a kernel given one (or a `SymList` of sizes) reads its current
value at every call through `current`.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch

from ..tensors.aten_tensor import resize_metadata
from ..tensors.error import Error
from ..tensors.tensor import PortableTensor
from .prepared import KernelFailure, PreparedKernel, Run


class SymBox:
    """A scalar value computed at run time by a primitive op (a size, or arithmetic on sizes)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"SymBox({self.value!r})"


class SymList:
    """An int list with items computed at run time (`view_copy(x, [s0, s1, 16])`): constants and `SymBox`es."""

    __slots__ = ("items",)

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = tuple(items)

    def __repr__(self) -> str:
        return f"SymList({list(self.items)!r})"


def current(value: Any) -> Any:
    """A kernel argument with every run-time scalar replaced by its value now."""
    if isinstance(value, SymBox):
        return value.value
    if isinstance(value, SymList):
        return [current(item) for item in value.items]
    return value


def is_symbolic(value: Any) -> bool:
    """Whether a kernel argument holds a value computed at run time."""
    return isinstance(value, (SymBox, SymList))


def _sizes(tensor: Any) -> tuple[int, ...]:
    return tensor.sizes if isinstance(tensor, PortableTensor) else tuple(tensor.shape)


# ExecuTorch's `executorch_prim::<name>.Scalar` ops, by name, with the Python function each computes.
_SCALAR_OPS: dict[str, Callable[..., Any]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "floordiv": operator.floordiv,
    "truediv": operator.truediv,
    "mod": operator.mod,
    "neg": operator.neg,
    "eq": operator.eq,
    "gt": operator.gt,
    "lt": operator.lt,
    "ge": operator.ge,
    "le": operator.le,
    "sym_float": float,
    "sym_int": int,
    "sym_max": max,
    "sym_min": min,
    "sym_not": operator.not_,
    "ceil": math.ceil,
    "trunc": math.trunc,
    "round": builtins.round,
}

# The traced Python callables an exported graph holds and the primitive op ExecuTorch emits for each.
_PYTHON_TARGETS: dict[Any, str] = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.floordiv: "floordiv",
    operator.truediv: "truediv",
    operator.mod: "mod",
    operator.neg: "neg",
    operator.eq: "eq",
    operator.gt: "gt",
    operator.lt: "lt",
    operator.ge: "ge",
    operator.le: "le",
    torch.sym_float: "sym_float",
    torch.sym_int: "sym_int",
    torch.sym_max: "sym_max",
    torch.sym_min: "sym_min",
    torch.sym_not: "sym_not",
    math.ceil: "ceil",
    math.trunc: "trunc",
    builtins.round: "round",
}


def _arity(fn: Callable[..., Any]) -> int:
    """How many operands a primitive takes (one for neg, not, casts and rounding; two otherwise)."""
    return 1 if fn in (operator.neg, operator.not_, float, int, math.ceil, math.trunc, builtins.round) else 2


def _resize(tensor: Any, sizes: tuple[int, ...], what: str) -> None:
    """Resize a mode's tensor (a PortableTensor by its own rule, an ATen-mode one by its metadata)."""
    if isinstance(tensor, PortableTensor):
        problem = tensor.resize_problem(sizes)
        if problem:
            raise KernelFailure(Error.InvalidArgument, f"{what}: {problem}")
        tensor.resize(sizes)
    elif _sizes(tensor) != sizes:
        if math.prod(sizes) * tensor.element_size() > tensor.untyped_storage().nbytes() - tensor.storage_offset():
            raise KernelFailure(Error.InvalidArgument, f"{what}: sizes {list(sizes)} exceed its planned memory")
        resize_metadata(tensor, sizes)


def _host(tensor: Any) -> torch.Tensor:
    return tensor.host_view() if isinstance(tensor, PortableTensor) else tensor


def et_copy_index(copy_to: Any, copy_from: Any, index: Any) -> None:
    """`executorch_prim::et_copy_index.tensor`: row `index` of `copy_to` <- `copy_from`, `copy_to` resized to
    `index + 1` rows (concatenation's sizes over stacked memory). The loops of `map` and `scan` collect each
    iteration's result with it (ExecuTorch's kernels/prim_ops/et_copy_index.cpp, registered by the runtime)."""
    row = int(current(index))
    to_sizes, from_sizes = _sizes(copy_to), _sizes(copy_from)
    what = "executorch_prim::et_copy_index.tensor"
    if len(to_sizes) - len(from_sizes) != 1:
        raise KernelFailure(
            Error.InvalidArgument,
            f"{what}: copy_to (sizes {list(to_sizes)}) must have one dimension more than copy_from (sizes "
            f"{list(from_sizes)})",
        )
    if row > 0 and tuple(to_sizes[1:]) != tuple(from_sizes):
        raise KernelFailure(
            Error.InvalidArgument,
            f"{what}: row {row} of sizes {list(from_sizes)} does not match the rows before it ({list(to_sizes[1:])})",
        )
    _resize(copy_to, (row + 1, *from_sizes), what)
    _host(copy_to)[row].copy_(_host(copy_from))


PRIM_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "aten::sym_size.int": lambda tensor, dim: _sizes(tensor)[dim],
    "aten::sym_numel.default": lambda tensor: math.prod(_sizes(tensor)),
    **{f"executorch_prim::{name}.Scalar": fn for name, fn in _SCALAR_OPS.items()},
}
# Primitive ops that write a tensor rather than a run-time scalar: they have no value out.
PRIM_TENSOR_OPS: dict[str, Callable[..., None]] = {"executorch_prim::et_copy_index.tensor": et_copy_index}

# The schema each primitive op is called with (its value out last, as every boxed kernel takes it).
PRIM_SCHEMAS: dict[str, str] = {
    "aten::sym_size.int": "sym_size.int(Tensor self, int dim) -> SymInt",
    "aten::sym_numel.default": "sym_numel(Tensor self) -> SymInt",
    **{
        f"executorch_prim::{name}.Scalar": f"{name}.Scalar(Scalar a{'' if _arity(fn) == 1 else ', Scalar b'}) -> Scalar"
        for name, fn in _SCALAR_OPS.items()
    },
    "executorch_prim::et_copy_index.tensor": (
        "et_copy_index.tensor(Tensor(a!) copy_to, Tensor copy_from, SymInt index) -> ()"
    ),
}


def prim_name(target: Any) -> str | None:
    """The runtime operator name of a graph node's target when it is a primitive op; None otherwise."""
    if isinstance(target, torch._ops.OpOverload):
        name = f"{target._schema.name}.{target._overloadname}"
        return name if name in PRIM_FUNCTIONS else None
    try:
        short = _PYTHON_TARGETS.get(target)
    except TypeError:  # an unhashable target is no primitive
        return None
    return None if short is None else f"executorch_prim::{short}.Scalar"


def prim_kernel(name: str, portable: bool) -> PreparedKernel:
    """The kernel of primitive op `name`: `(operands..., out)` writes the operation's value into the out SymBox;
    a tensor primitive (`et_copy_index`) writes into its first argument."""
    if name in PRIM_TENSOR_OPS:
        tensor_op = PRIM_TENSOR_OPS[name]

        def prepare_tensor_op(args: list[Any], dynamic: Collection[int]) -> Run:
            return lambda: tensor_op(*args)

        short = name.replace("::", "_").replace(".", "_")
        return PreparedKernel(prepare_tensor_op, portable=portable, n_out=1, name=short)
    fn = PRIM_FUNCTIONS[name]

    def prepare(args: list[Any], dynamic: Collection[int]) -> Run:
        *operands, out = args
        if not isinstance(out, SymBox):
            raise TypeError(f"{name}: its out is {out!r}, not a run-time scalar (SymBox)")

        def run() -> SymBox:
            out.value = fn(*(current(a) for a in operands))
            return out

        return run

    return PreparedKernel(prepare, portable=portable, n_out=1, name=name.replace("::", "_").replace(".", "_"))
