"""Constant hoisting (beyond ExecuTorch, docs/differences.md): a value computed on the CPU from parameters, buffers
and constants alone (GPT-2's transposed tied lm_head weight, a lifted scalar's cast) is the same on every run, yet
ExecuTorch computes it and copies it host -> device on every call. With `hoist_constants=True` the placement moves
those computations and their H2D copies to the front of the graph, tagged `meta["hoisted"]`: emit makes them the
program's load-time part (`Program.load_instructions`), run once when the method is loaded, with results kept in
memory of their own (never arena memory another value reuses), so no call copies them again.

Never hoisted: anything that reads a mutated buffer (its value changes between runs), a user input, a delegate
output, or a nondeterministic op.
"""

from __future__ import annotations

from torch import Tag, fx

from ..lowering.delegate import delegate_of, delegate_source
from ..lowering.edge_form import WRITE_BACK
from ..lowering.nodes import is_h2d

HOISTED = "hoisted"  # node.meta key: computed once at load


def mutable(node: fx.Node) -> bool:
    """Whether the program writes `node` (a buffer or an input) back: state that changes from call to call."""
    return any(u.target is WRITE_BACK and u.args[0] is node for u in node.users)


def constant_derived(gm: fx.GraphModule, delegates: bool = False) -> set[fx.Node]:
    """CPU nodes (constants, ops, H2D copies) whose value depends only on parameters, buffers and constants that
    the program never mutates; with `delegates`, also delegate calls, their outputs and the copies of those (what
    the report counts as weights-derived; hoisting moves CPU work only)."""
    found: set[fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            if not mutable(node):
                found.add(node)
        elif (
            node.op in ("call_function", "call_module")
            and node.target is not WRITE_BACK
            and (delegates or (delegate_source(node) is None and delegate_of(node) is None))
            and all(i in found for i in node.all_input_nodes)
            and Tag.nondeterministic_seeded not in getattr(node.target, "tags", ())  # an op's tags are enums
        ):
            found.add(node)
    return found


def hoistable_copies(gm: fx.GraphModule) -> list[fx.Node]:
    """The H2D copies of constant-derived values: what hoisting copies once at load instead of on every call."""
    derived = constant_derived(gm)
    return [node for node in gm.graph.nodes if is_h2d(node) and node in derived]


def hoist_constants(gm: fx.GraphModule) -> list[fx.Node]:
    """Move each hoistable H2D and the CPU ops it needs to the front (after the inputs and constants), in order,
    tagged `meta["hoisted"]`; returns the moved nodes."""
    needed: set[fx.Node] = set()
    stack = hoistable_copies(gm)
    while stack:
        node = stack.pop()
        if node.op == "call_function" and node not in needed:
            needed.add(node)
            stack.extend(node.all_input_nodes)
    moved = [node for node in gm.graph.nodes if node in needed]
    # the first node that stays where it is; the output node always does, so one is always found
    anchor = next(n for n in gm.graph.nodes if n.op not in ("placeholder", "get_attr") and n not in needed)
    for node in moved:
        node.meta[HOISTED] = True
        anchor.prepend(node)
    if moved:
        gm.recompile()
    return moved
