"""Control flow emitted as ExecuTorch's emitter emits it (exir/emit/_emitter.py: `_emit_cond`, `_emit_map`,
`_emit_scan`; docs/semantics.md §5c): the submodules of `torch.cond`, `control_flow.map` and `torch.scan` become
instruction chains inline in the one program, stitched together with conditional jumps.

- `cond(pred, true_fn, false_fn, operands)`: `jump_false(pred) -> F`, the true branch (its results moved into the
  cond's values), `jump_false(False) -> E`, at F the false branch (moved likewise), E.
- `map(f, xs, *args)`: `sym_size(xs, 0)`, then a loop: `select_copy(xs, 0, i) -> slice`, the body on the slice,
  `et_copy_index(out, body result, i)` (row i of the stacked result), `i += 1`, `done = i == n`, `jump_false(done)`
  back to the select, and `i -= n` after the loop so the next call starts at 0.
- `scan(f, init, xs, additional)`: like map, with the carries first copied from `init`, bound to the body's first
  inputs and copied from its new carries after each iteration.

The ops a loop needs besides the body's own are the runtime's primitives (`aten::sym_size.int`,
`executorch_prim::add/eq/sub.Scalar`, `executorch_prim::et_copy_index.tensor`) and two portable kernels
(`aten::select_copy.int_out`, `aten::copy.out`). Each construct's place is recorded (`Program.control_flow`) so a run
can say which branch it took and how many times a loop ran. What ExecuTorch's emitter refuses is refused here, by
name: map over several mapped inputs or with several results, scan over no input.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any, Protocol

import torch
from torch import fx

from ..lowering.user_model import UnsupportedModelError
from ..runtime.program import (
    ControlRegion,
    Instruction,
    JumpFalseCall,
    KernelCall,
    Program,
    ScalarValue,
    SymValue,
    TensorValue,
    Value,
)


class _Emitter(Protocol):
    """What control flow needs of the emitter (emit.py's `_Emitter`, which imports this module)."""

    gm: fx.GraphModule
    program: Program
    node_value: dict[fx.Node, Any]
    bound_inputs: list[int | None]
    concrete_outputs: list[int]

    def index(self, arg: object) -> int: ...
    def add(self, value: Value) -> int: ...
    def planned(self, val: torch.Tensor, node: fx.Node) -> int: ...
    def append(self, instruction: Instruction) -> int: ...
    def operator(self, name: str) -> int: ...
    def subgraph(
        self, graph_module: fx.GraphModule, inputs: list[int | None], outputs: list[int] | None
    ) -> _Emitter: ...


# How a user writes each construct, where the op's name differs
CONSTRUCT = {"cond": "torch.cond", "map_impl": "control_flow.map", "scan": "torch.scan"}
UNSET = -1  # a jump's destination before the instructions it jumps over are emitted


def construct_of(node: fx.Node) -> str:
    name = node.target.name()  # type: ignore[union-attr]  # a HigherOrderOperator
    return CONSTRUCT.get(name, f"torch.{name}")


def _refuse(node: fx.Node, why: str) -> UnsupportedModelError:
    return UnsupportedModelError(
        f"{node.name} is {construct_of(node)} (control flow over subgraphs): {why}. ExecuTorch 1.5.1's emitter "
        "refuses it too (exir/emit/_emitter.py); see docs/differences.md."
    )


def _submodule(em: _Emitter, arg: Any) -> fx.GraphModule:
    """The GraphModule a control-flow argument names (a `get_attr` of the enclosing module)."""
    if not isinstance(arg, fx.Node) or arg.op != "get_attr":
        raise TypeError(f"expected a submodule (get_attr), got {arg!r}")
    module = operator.attrgetter(str(arg.target))(em.gm)
    if not isinstance(module, fx.GraphModule):
        raise TypeError(f"{arg.target} is a {type(module).__name__}, not a GraphModule")
    return module


def _operand(em: _Emitter, arg: Any) -> int:
    return em.index(arg) if isinstance(arg, fx.Node) else em.add(ScalarValue(arg))


def _results(em: _Emitter, node: fx.Node, stacked: range = range(0)) -> list[int]:
    """A value per result of `node`; the `stacked` ones (a loop's collected rows) may change their first
    dimension at run time (ExecuTorch marks them DYNAMIC_BOUND: et_copy_index grows them a row at a time)."""
    vals = node.meta["val"]
    indices = []
    for position, val in enumerate(vals if isinstance(vals, (list, tuple)) else (vals,)):
        if not isinstance(val, torch.Tensor):
            indices.append(em.add(SymValue(0 if val is None else val)))
            continue
        index = em.planned(val, node)
        value = em.program.values[index]
        if position in stacked and isinstance(value, TensorValue):
            dims = tuple(
                sorted({0, *(value.spec.dynamic_dims or range(len(value.spec.sizes)) if value.spec.dynamic else ())})
            )
            spec = dataclasses.replace(value.spec, dynamic=True, dynamic_dims=dims)
            em.program.values[index] = dataclasses.replace(value, spec=spec)
        indices.append(index)
    return indices


def _kernel(em: _Emitter, name: str, *args: int) -> int:
    return em.append(KernelCall(em.operator(name), args))


def _patch(em: _Emitter, position: int, **changes: Any) -> None:
    em.program.instructions[position] = dataclasses.replace(em.program.instructions[position], **changes)


def emit_cond(em: _Emitter, node: fx.Node) -> None:
    """`jump_false(pred)` over the true branch, an unconditional jump over the false one: ExecuTorch's `_emit_cond`."""
    pred, true_arg, false_arg, operands = node.args
    outs = _results(em, node)
    inputs: list[int | None] = [_operand(em, a) for a in operands]  # type: ignore[union-attr]
    choose = em.append(JumpFalseCall(_operand(em, pred), UNSET))
    true = em.subgraph(_submodule(em, true_arg), inputs, outs)
    skip = em.append(JumpFalseCall(em.add(ScalarValue(False)), UNSET))
    false = em.subgraph(_submodule(em, false_arg), inputs, outs)
    end = len(em.program.instructions)
    _patch(em, choose, destination=skip + 1)
    _patch(em, skip, destination=end)
    for branch in (true, false):
        if len(branch.concrete_outputs) != len(outs):
            raise ValueError(f"{node.name}: a branch returns {len(branch.concrete_outputs)} values, cond {len(outs)}")
    em.node_value[node] = tuple(outs)
    em.program.control_flow.append(
        ControlRegion(node.name, construct_of(node), (("true", choose + 1, skip + 1), ("false", skip + 1, end)), skip)
    )


def _loop_end(em: _Emitter, counter: int, count: int, head: int) -> int:
    """`i += 1; done = i == n; jump_false(done) -> head; i -= n`: the back edge of ExecuTorch's map and scan loops.
    Returns the jump's position."""
    _kernel(em, "executorch_prim::add.Scalar", counter, em.add(ScalarValue(1)), counter)
    done = em.add(SymValue(False))
    _kernel(em, "executorch_prim::eq.Scalar", counter, count, done)
    back = em.append(JumpFalseCall(done, head))
    _kernel(em, "executorch_prim::sub.Scalar", counter, count, counter)  # the next call starts at 0 again
    return back


def emit_map(em: _Emitter, node: fx.Node) -> None:
    """A loop over the first dimension of the mapped input: ExecuTorch's `_emit_map`."""
    body_arg, mapped, operands = node.args
    if len(mapped) != 1:  # type: ignore[arg-type]
        raise _refuse(node, f"it maps over {len(mapped)} inputs; ExecuTorch emits map over exactly one")  # type: ignore[arg-type]
    outs = _results(em, node, stacked=range(1))
    if len(outs) != 1:
        raise _refuse(node, f"its function returns {len(outs)} values; ExecuTorch emits map with one result")
    xs = em.index(mapped[0])  # type: ignore[index]
    counter, count, zero = em.add(SymValue(0)), em.add(SymValue(0)), em.add(ScalarValue(0))
    _kernel(em, "aten::sym_size.int", xs, zero, count)
    head = _kernel(em, "aten::select_copy.int_out", xs, zero, counter, UNSET)
    body = em.subgraph(_submodule(em, body_arg), [None, *(_operand(em, a) for a in operands)], None)  # type: ignore[union-attr]
    _patch(em, head, args=(xs, zero, counter, body.bound_inputs[0]))
    _kernel(em, "executorch_prim::et_copy_index.tensor", outs[0], body.concrete_outputs[0], counter)
    back = _loop_end(em, counter, count, head)
    em.node_value[node] = tuple(outs)
    em.program.control_flow.append(ControlRegion(node.name, construct_of(node), (("body", head, back + 1),), back))


def emit_scan(em: _Emitter, node: fx.Node) -> None:
    """A loop over the first dimension of `xs` carrying state: ExecuTorch's `_emit_scan` (which copies with
    `aten::copy_`; devcopy's out form `aten::copy.out(carry, new, False, out=carry)` does the same)."""
    combine_arg, init, xs, additional = node.args
    init, xs, additional = (list(a) for a in (init, xs, additional))  # type: ignore[arg-type]  # lists of nodes
    if not xs:
        raise _refuse(node, "it scans over no input; ExecuTorch emits scan over at least one")
    outs = _results(em, node, stacked=range(len(init), len(node.meta["val"])))
    carries, stacked = outs[: len(init)], outs[len(init) :]
    counter, count, zero = em.add(SymValue(0)), em.add(SymValue(0)), em.add(ScalarValue(0))
    scanned = [em.index(x) for x in xs]
    _kernel(em, "aten::sym_size.int", scanned[0], zero, count)
    for start, carry in zip(init, carries, strict=True):
        _kernel(em, "aten::copy.out", carry, _operand(em, start), em.add(ScalarValue(False)), carry)
    head = len(em.program.instructions)
    selects = [_kernel(em, "aten::select_copy.int_out", x, zero, counter, UNSET) for x in scanned]
    inputs: list[int | None] = [*carries, *([None] * len(scanned)), *(_operand(em, a) for a in additional)]
    body = em.subgraph(_submodule(em, combine_arg), inputs, None)
    for position, x, index in zip(selects, scanned, body.bound_inputs[len(carries) :], strict=False):
        _patch(em, position, args=(x, zero, counter, index))
    if len(body.concrete_outputs) != len(outs):
        raise ValueError(
            f"{node.name}: the combine function returns {len(body.concrete_outputs)} values, scan {len(outs)}"
        )
    for new, carry in zip(body.concrete_outputs, carries, strict=False):
        _kernel(em, "aten::copy.out", carry, new, em.add(ScalarValue(False)), carry)
    for row, out in zip(body.concrete_outputs[len(carries) :], stacked, strict=True):
        _kernel(em, "executorch_prim::et_copy_index.tensor", out, row, counter)
    back = _loop_end(em, counter, count, head)
    em.node_value[node] = tuple(outs)
    em.program.control_flow.append(ControlRegion(node.name, construct_of(node), (("body", head, back + 1),), back))


_EMIT = {"cond": emit_cond, "map_impl": emit_map, "scan": emit_scan}


def emit_control_flow(em: _Emitter, node: fx.Node) -> None:
    """Emit a control-flow node; one ExecuTorch does not emit (`while_loop`) is refused naming it."""
    emit = _EMIT.get(node.target.name())  # type: ignore[union-attr]  # a HigherOrderOperator
    if emit is None:
        raise _refuse(node, "devcopy emits torch.cond, control_flow.map and torch.scan only")
    emit(em, node)
