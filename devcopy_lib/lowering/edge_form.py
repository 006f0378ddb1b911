"""What ExecuTorch 1.5.1's `to_edge` does to a decomposed program before partitioning that changes device copies,
done on a copy of its graph (docs/differences.md lists what devcopy leaves out):

- assertions removed (`_assert_tensor_metadata` from `.to(dtype)`, `_assert_scalar`, ...) and what only they read;
- no-op `slice` (whole dimension) and `_to_copy` (same dtype and layout) removed;
- empty inputs of `cat` dropped, and what only they read (a `(1, h, 7, 0)` rotary pass-through slice): no copy
  moves an empty tensor (`PruneEmptyTensorsPass`);
- a Python scalar where the schema wants a Tensor lifted into a 0-d tensor constant (`torch.tensor(1)`: int64 for an
  int), then, for the ops whose type promotion ExecuTorch fixes (add, sub, mul, div, minimum), every Tensor
  argument of another dtype cast with a `_to_copy` node right before the op: `x + 1` reads a cast of a constant,
  computed on the CPU on every run;
- each mutated buffer or user input written back at the end with `aten.copy_(target, new value)` instead of being
  returned (mutated buffers stay program state: never delegate-owned constants).
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import fx
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.experimental.symbolic_shapes import guard_or_true

aten = torch.ops.aten
ASSERTIONS = frozenset(
    {
        aten._assert_async.default,
        aten._assert_async.msg,
        aten._assert_scalar.default,
        aten.sym_constrain_range_for_size.default,
        aten.sym_constrain_range.default,
        aten._assert_tensor_metadata.default,
    }
)
# RemoveMixedTypeOperators: the ops whose arguments ExecuTorch casts to the promoted dtype
_PROMOTION = {
    aten.add.Tensor: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
    aten.sub.Tensor: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
    aten.mul.Tensor: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
    aten.div.Tensor: ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT,
    aten.div.Tensor_mode: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
    aten.minimum.default: ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT,
}
WRITE_BACK = aten.copy_.default


@dataclass
class EdgeForm:
    """A decomposed program's graph as to_edge leaves it: `constants` (placeholder name -> tensor: parameters,
    buffers, tensor constants, lifted scalars), `user_inputs` (placeholder names in call order), `mutable` (names of
    mutated buffers: program state, read and written on the CPU) and `written_back` (positions of mutated user
    inputs: the runtime writes their new value back to the caller's tensor)."""

    graph_module: fx.GraphModule
    constants: dict[str, torch.Tensor]
    user_inputs: list[str]
    mutable: frozenset[str] = frozenset()
    written_back: tuple[int, ...] = ()
    # each partition's delegate graph as lowering built it, by the partition's nodes (lowering/lower.py): one dict
    # per rewritten graph, shared by every EdgeForm of it and so by every delegate set lowered from it
    partitions: dict[tuple[fx.Node, ...], Any] = field(default_factory=dict, repr=False, compare=False)


# The rewritten graph per exported program: lowering one program with many delegate sets (the explorer's op
# toggles) copies and rewrites its graph once; 1.7 s of a 2.8 s lowering on a 96-layer GPT-2.
_GRAPHS: weakref.WeakKeyDictionary[ExportedProgram, EdgeForm] = weakref.WeakKeyDictionary()


def edge_form(exported: ExportedProgram) -> EdgeForm:
    """The graph of `exported` (read, never changed) after to_edge's copy-relevant rewrites. The graph is made once
    per program and shared (lowering only reads it); the constants are the program's own at each call, each mutated
    buffer a fresh copy, so no two lowerings share state."""
    made = _GRAPHS.get(exported)
    if made is None:
        made = _GRAPHS[exported] = _rewritten(exported)
    constants, _ = _inputs(exported)
    for name in made.mutable:
        constants[name] = constants[name].clone()
    return replace(made, constants={**made.constants, **constants})


def _rewritten(exported: ExportedProgram) -> EdgeForm:
    """The rewrites themselves, on a copy of the program's graph."""
    gm = _LazyGraphModule(exported.graph_module, copy.deepcopy(exported.graph_module.graph))
    for original, node in zip(exported.graph_module.graph.nodes, gm.graph.nodes, strict=True):
        node.name = (
            original.name
        )  # copying renames a placeholder that shadows a builtin (`input`); keep the signature's
    constants, user_inputs = _inputs(exported)
    mutable, written_back = _write_back(exported, gm.graph, constants, user_inputs)
    _remove_assertions(gm.graph)
    _lift_scalars(gm.graph, constants)
    _remove_noops(gm.graph)
    _prune_empty_cat_inputs(gm.graph)
    _cast_mixed_types(gm.graph)
    return EdgeForm(gm, constants, user_inputs, frozenset(mutable), tuple(written_back))


def _inputs(exported: ExportedProgram) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Placeholder name -> tensor for parameters, buffers and lifted constants; plus the user-input names."""
    constants, user_inputs = {}, []
    for spec in exported.graph_signature.input_specs:
        if spec.kind is InputKind.USER_INPUT:
            user_inputs.append(spec.arg.name)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            source = exported.state_dict if spec.target in exported.state_dict else exported.constants
            constants[spec.arg.name] = source[spec.target]
        else:
            raise ValueError(
                f"Input {spec.arg.name!r} is a {spec.kind.name}, which lowering does not support: "
                f"only user inputs, parameters, buffers and tensor constants."
            )
    return constants, user_inputs


def _write_back(
    exported: ExportedProgram, graph: fx.Graph, constants: dict[str, torch.Tensor], user_inputs: list[str]
) -> tuple[list[str], list[int]]:
    """Mutation outputs become `copy_(target, value)` nodes before the output (ExecuTorch's write-back); a mutated
    buffer's tensor is copied, so running the program never changes the model's own buffer."""
    signature = exported.graph_signature
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    buffer_placeholder = {target: name for name, target in signature.inputs_to_buffers.items()}
    output = graph.output_node()
    if not isinstance(output.args[0], (tuple, list)):
        raise TypeError(f"the exported graph's outputs {output.args[0]!r} are not a tuple")
    values, kept, mutable, written_back = list(output.args[0]), [], [], []
    for spec, value in zip(signature.output_specs, values, strict=True):
        if spec.kind is OutputKind.USER_OUTPUT:
            kept.append(value)
            continue
        if spec.kind is OutputKind.BUFFER_MUTATION:
            name = buffer_placeholder[spec.target]
            mutable.append(name)
            constants[name] = constants[name].clone()
        elif spec.kind is OutputKind.USER_INPUT_MUTATION:
            name = spec.target
            written_back.append(user_inputs.index(name))
        else:
            raise ValueError(
                f"Output {spec.arg.name!r} is a {spec.kind.name}, which lowering does not support: "
                f"only user outputs, buffer mutations and user-input mutations."
            )
        if value is not placeholders[name]:
            with graph.inserting_before(output):
                node = graph.call_function(WRITE_BACK, (placeholders[name], value))
            node.meta["val"] = placeholders[name].meta.get("val")
    output.args = (tuple(kept),)
    return mutable, written_back


def _remove_assertions(graph: fx.Graph) -> None:
    """Drop assertion nodes, then whatever only they read (a `sym_size`, a comparison)."""
    for node in [n for n in graph.nodes if n.op == "call_function" and n.target in ASSERTIONS]:
        graph.erase_node(node)
    graph.eliminate_dead_code()


def _lift_scalars(graph: fx.Graph, constants: dict[str, torch.Tensor]) -> None:
    """ScalarToTensorPass + lifting: a bool/int/float given for a `Tensor` argument becomes a constant placeholder."""
    first = next(iter(graph.nodes))
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        args, kwargs = list(node.args), dict(node.kwargs)
        for index, arg in enumerate(node.target._schema.arguments):
            positional = index < len(args)
            if not isinstance(arg.type, torch.TensorType) or not (positional or arg.name in kwargs):
                continue
            value = args[index] if positional else kwargs[arg.name]
            if isinstance(value, (bool, int, float)):
                with graph.inserting_before(first):
                    placeholder = graph.placeholder("_lifted_tensor_constant")  # fx suffixes _1, _2, ...
                constants[placeholder.name] = placeholder.meta["val"] = torch.tensor(value)
                if positional:
                    args[index] = placeholder
                else:
                    kwargs[arg.name] = placeholder
        node.args, node.kwargs = tuple(args), kwargs


def _remove_noops(graph: fx.Graph) -> None:
    """RemoveNoopPass / RemoveToCopyPass: a `slice` keeping the whole dimension and a `_to_copy` changing nothing."""
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in (aten.slice.Tensor, aten._to_copy.default):
            continue
        source, result = node.args[0].meta.get("val"), node.meta.get("val")
        if not isinstance(source, torch.Tensor) or not isinstance(result, torch.Tensor):
            continue
        if node.target is aten.slice.Tensor:
            static = all(isinstance(s, int) for s in (*source.shape, *result.shape))
            same = static and tuple(source.shape) == tuple(result.shape)
        else:
            same = (
                source.dtype == result.dtype
                and source.device == result.device
                and source.shape == result.shape
                and source.stride() == result.stride()
            )
        if same:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)


def _prune_empty_cat_inputs(graph: fx.Graph) -> None:
    """PruneEmptyTensorsPass: an input of `cat` with no elements adds nothing, so it is dropped from the list (a
    dynamic size counts as empty only when it is known to be 0), and what computed it goes too when nothing else
    reads it - no copy moves an empty tensor to a delegate. A `cat` of empty inputs only becomes a `full` of zeros
    of its shape and dtype."""
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.cat.default:
            continue
        kept = [item for item in node.args[0] if not _known_empty(item)]
        if len(kept) == len(node.args[0]):
            continue
        changed = True
        node.args = (kept, *node.args[1:])
        if kept:
            continue
        result = node.meta["val"]
        with graph.inserting_after(node):
            full = graph.call_function(aten.full.default, (tuple(result.shape), 0), {"dtype": result.dtype})
        full.meta = dict(node.meta)
        node.replace_all_uses_with(full)
        graph.erase_node(node)
    if changed:
        graph.eliminate_dead_code()


def _known_empty(item: object) -> bool:
    """Whether a `cat` input is a tensor known to have no elements (to_edge's `guard_or_true(numel != 0)`)."""
    value = item.meta.get("val") if isinstance(item, fx.Node) else None
    return isinstance(value, torch.Tensor) and not guard_or_true(value.numel() != 0)


def _cast_mixed_types(graph: fx.Graph) -> None:
    """RemoveMixedTypeOperators: cast each Tensor argument of another dtype to the op's promoted dtype."""
    for node in list(graph.nodes):
        kind = _PROMOTION.get(node.target) if node.op == "call_function" else None
        if kind is None or len(node.args) <= 1:
            continue
        if node.target is aten.div.Tensor_mode and node.kwargs.get("rounding_mode") is None:
            kind = ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT
        vals = [a.meta.get("val") if isinstance(a, fx.Node) else a for a in node.args]
        if not all(isinstance(v, (torch.Tensor, bool, int, float)) for v in vals):
            continue
        dtype = elementwise_dtypes(*vals, type_promotion_kind=kind)[1]
        args = list(node.args)
        for index, (arg, val) in enumerate(zip(args, vals, strict=True)):
            if isinstance(arg, fx.Node) and isinstance(val, torch.Tensor) and val.dtype != dtype:
                with graph.inserting_before(node):
                    cast = graph.call_function(aten._to_copy.default, (arg,), {"dtype": dtype})
                cast.meta["val"] = val.to(dtype)
                args[index] = cast
        node.args = tuple(args)
