"""What each copy of a placed graph moves, by role (names.CopyRole), so that a report can say what keeping a KV cache
on the host costs per call:

- `cache`: program state, carried from one call to the next - a buffer the program writes back (a KV cache updated
  in place), an input written back, or an input the program returns updated (the functional form: the cache comes in
  and goes out, with positions written, in the same shape and dtype) - and every value whose elements are the
  state's own elements: a view, a copy in another layout, the state with a few positions written (`index_put`,
  `index_copy`, `slice_scatter`), also through device copies and delegates;
- `weights`: parameters, constants and values computed only from them (on the CPU or by a delegate);
- `activations`: everything else.

A copy is classed by its source value, state first: a cache view moved to the device is cache even where the op that
made it (`expand`) reads nothing else.
"""

from __future__ import annotations

import operator

import torch
from torch import fx

from ..lowering.delegate import delegate_of, graph_fact
from ..lowering.edge_form import WRITE_BACK
from ..lowering.nodes import COPY_KINDS, node_arg
from ..names import CopyRole
from .hoist import constant_derived, mutable

aten = torch.ops.aten
# Ops whose result holds the elements of their first argument, rearranged or cast: what carries the cache's bytes from
# one value to the next.
CARRIES = frozenset(
    {
        aten.view,
        aten._unsafe_view,
        aten.reshape,
        aten.alias,
        aten.detach,
        aten.clone,
        aten._to_copy,
        aten.permute,
        aten.transpose,
        aten.t,
        aten.expand,
        aten.unsqueeze,
        aten.squeeze,
        aten.slice,
        aten.select,
    }
)
# Ops whose result is their first argument with a few positions written: a cache update.
WRITES = frozenset({aten.index_put, aten.index_copy, aten.slice_scatter, aten.select_scatter})

# A value's lineage: the input, constant or (inside a delegate) placeholder whose elements it holds, and whether some
# positions were written on the way; None for a value computed anew.
Lineage = tuple[fx.Node, bool] | None


def _step(node: fx.Node) -> bool | None:
    """Whether `node` carries its first argument's elements: False as they are, True with positions written (an
    update, or the write-back of one); None when it computes a new value."""
    if node.op != "call_function" or not node.args or not isinstance(node.args[0], fx.Node):
        return None
    if node.target is WRITE_BACK:
        return True
    packet = getattr(node.target, "overloadpacket", None)
    if node.target in COPY_KINDS or packet in CARRIES:
        return False
    return True if packet in WRITES else None


def _lineages(graph: fx.Graph) -> dict[fx.Node, Lineage]:
    """Each node's lineage, by `_step` chains and through delegate outputs."""
    lineage: dict[fx.Node, Lineage] = {}
    inside: dict[fx.Node, tuple[tuple[int, bool] | None, ...]] = {}  # delegate call -> per output: argument, written
    for node in graph.nodes:
        step = _step(node)
        if node.op in ("placeholder", "get_attr"):
            lineage[node] = (node, False)
        elif step is not None:
            source = lineage[node_arg(node)]
            lineage[node] = None if source is None else (source[0], source[1] or step)
        elif node.op == "call_function" and node.target is operator.getitem and delegate_of(node_arg(node)) is not None:
            call = node_arg(node)
            if call not in inside:
                inside[call] = _delegate_outputs(call)
            found = inside[call][node.args[1]] if isinstance(node.args[1], int) else None
            argument = call.args[found[0]] if found is not None else None
            source = lineage[argument] if isinstance(argument, fx.Node) else None
            lineage[node] = None if source is None or found is None else (source[0], source[1] or found[1])
        else:
            lineage[node] = None  # computed anew (a multi-output CPU op's item included)
    return lineage


def _delegate_outputs(call: fx.Node) -> tuple[tuple[int, bool] | None, ...]:
    """Per output of a delegate call, the index of the call argument whose elements it holds and whether positions
    were written inside; None when computed inside, or one of the delegate's owned constants (weights)."""
    delegate = delegate_of(call)
    assert delegate is not None  # _lineages asks only for delegate calls
    arguments = len(call.args)  # a delegate graph's calls all pass its inputs, so one count per graph
    return graph_fact(delegate.graph_module.graph, "outputs", lambda inner: _outputs_of(inner, arguments))


def _outputs_of(inner: fx.Graph, arguments_count: int) -> tuple[tuple[int, bool] | None, ...]:
    """`_delegate_outputs` for a delegate graph whose first `arguments_count` placeholders are call arguments."""
    inner_lineage = _lineages(inner)
    arguments = [n for n in inner.nodes if n.op == "placeholder"][:arguments_count]
    outputs = inner.output_node().args[0]
    assert isinstance(outputs, (tuple, list))  # a delegate returns a tuple (lowering/lower.py)
    found: list[tuple[int, bool] | None] = []
    for item in outputs:
        source = inner_lineage.get(item) if isinstance(item, fx.Node) else None
        found.append((arguments.index(source[0]), source[1]) if source and source[0] in arguments else None)
    return tuple(found)


def _same_form(a: fx.Node, b: fx.Node) -> bool:
    va, vb = a.meta.get("val"), b.meta.get("val")
    return (
        isinstance(va, torch.Tensor)
        and isinstance(vb, torch.Tensor)
        and va.dtype == vb.dtype
        and tuple(va.shape) == tuple(vb.shape)
    )


def state_nodes(gm: fx.GraphModule, lineage: dict[fx.Node, Lineage] | None = None) -> set[fx.Node]:
    """The program's state: buffers and inputs it writes back, and inputs it returns updated (an output that is an
    input with positions written, in the input's shape and dtype)."""
    lineage = _lineages(gm.graph) if lineage is None else lineage
    state = {n for n in gm.graph.nodes if n.op in ("placeholder", "get_attr") and mutable(n)}
    outputs: list[fx.Node] = []
    fx.map_arg(gm.graph.output_node().args, outputs.append)
    for item in outputs:
        found = lineage[item]
        if found is not None and found[1] and found[0].op == "placeholder" and _same_form(item, found[0]):
            state.add(found[0])
    return state


def copy_roles(gm: fx.GraphModule) -> dict[fx.Node, CopyRole]:
    """Each copy node of a placed graph -> the role of the value it moves."""
    lineage = _lineages(gm.graph)
    state = state_nodes(gm, lineage)
    weights = constant_derived(gm, delegates=True)
    roles = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in COPY_KINDS:
            source, found = node_arg(node), lineage[node]
            if found is not None and found[0] in state:
                roles[node] = CopyRole.CACHE
            elif source in weights:
                roles[node] = CopyRole.WEIGHTS
            else:
                roles[node] = CopyRole.ACTIVATIONS
    return roles
