"""delegate_of answers for any node, also one in a graph that no GraphModule owns yet."""

import torch
from torch import fx

from devcopy_lib.lowering.delegate import delegate_of


def test_a_call_module_in_a_graph_without_a_module_is_no_delegate_call():
    graph = fx.Graph()
    x = graph.placeholder("x")
    call = graph.call_module("delegate_0", (x,))
    graph.output(call)
    assert graph.owning_module is None
    assert delegate_of(call) is None


def test_a_call_module_of_a_plain_submodule_is_no_delegate_call():
    root = torch.nn.Module()
    root.add_module("linear", torch.nn.Linear(2, 2))
    graph = fx.Graph()
    call = graph.call_module("linear", (graph.placeholder("x"),))
    graph.output(call)
    fx.GraphModule(root, graph)
    assert delegate_of(call) is None
