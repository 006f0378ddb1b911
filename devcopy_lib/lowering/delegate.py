"""A delegate: one partition of the lowered graph, bound to a target device, callable eagerly on CPU tensors.

In the top-level graph a delegate call is a `call_module` node whose target names a `Delegate` submodule; its args
are the delegate's distinct input values and it returns a tuple that `operator.getitem` nodes read.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import fx

from ..devices import Device

T = TypeVar("T")
# what was derived from each delegate graph, by name (graph_fact)
_FACTS: weakref.WeakKeyDictionary[fx.Graph, dict[str, Any]] = weakref.WeakKeyDictionary()


class Delegate(torch.nn.Module):
    """One partition: its own GraphModule, the device it runs on (None: no device, stays CPU) and owned constants.

    `graph_module`'s placeholders are the delegate's inputs (in call-argument order) followed by its owned
    constants (in `constants` order); its output is a tuple. Owned constants get no H2D: they are copied to the
    device once, at load. `in_place` maps an output position to the input position whose memory the graph wrote
    that output into (an in-place update of a resident buffer, placement/resident.py): that output is the input's
    memory, so nothing is copied for it.
    """

    def __init__(
        self,
        name: str,
        graph_module: fx.GraphModule,
        target_device: Device | None,
        constants: dict[str, torch.Tensor],
        ops: tuple[str, ...],
        input_names: tuple[str, ...],
        in_place: dict[int, int] | None = None,
    ):
        super().__init__()
        self.name = name
        self.graph_module = graph_module
        self.target_device = target_device
        self.constants = dict(constants)
        self.ops = ops
        self.input_names = input_names
        self.in_place = dict(in_place or {})

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.graph_module(*inputs, *self.constants.values()))

    def extra_repr(self) -> str:
        return f"name={self.name}, target_device={self.target_device}, ops={list(self.ops)}"


def delegate_of(node: fx.Node) -> Delegate | None:
    """The Delegate a node calls, or None when the node is not a delegate call."""
    if node.op != "call_module" or not isinstance(node.target, str):  # most nodes: no owner lookup
        return None
    owner = node.graph.owning_module
    if owner is None:
        return None
    module = owner.get_submodule(node.target)
    return module if isinstance(module, Delegate) else None


def delegate_source(node: fx.Node) -> fx.Node | None:
    """For `getitem(delegate_call, i)`, the delegate call node; otherwise None."""
    if node.op == "call_function" and node.target is operator.getitem:
        source = node.args[0]
        if isinstance(source, fx.Node) and delegate_of(source) is not None:
            return source
    return None


def graph_fact(graph: fx.Graph, name: str, compute: Callable[[fx.Graph], T]) -> T:
    """`compute(graph)` for a delegate graph, derived once and kept under `name` while the graph lives: lowering
    never changes a delegate graph once made, and shares it between every delegate set that proposes its partition
    (lowering/lower.py), so each placement and view of those sets reads what the first one derived."""
    facts = _FACTS.setdefault(graph, {})
    if name not in facts:
        facts[name] = compute(graph)
    found: T = facts[name]
    return found
