"""devcopy's partitioner proposes exactly torch.fx's CapabilityBasedPartitioner partitions (the oracle), cycle-free.

Compared as sets of node-name sets on random fx graphs (hypothesis), on every sample model with several delegate
sets, on a GPT-2-shaped graph and on the real models (GPT-2 2-layer always, every real model and delegate set with
`--deep`); plus lowering with partition="fx" and "capability" giving the same delegates.
"""

from __future__ import annotations

import operator

import pytest
import torch
from generated_page import benchmark_module
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from devcopy_lib.lowering.edge_form import edge_form
from devcopy_lib.lowering.lower import DEFAULT_DELEGATE_OPS, OverloadSupport, export_program, lower
from devcopy_lib.lowering.partition import propose_partitions
from devcopy_lib.models import DELEGATE_SETS as REAL_DELEGATE_SETS
from devcopy_lib.models import MODELS, REAL_MODELS, ModelsExtraMissing

aten = torch.ops.aten
UNARY = {"sin": aten.sin.default, "cos": aten.cos.default, "relu": aten.relu.default, "view": aten.view.default}
BINARY = {"add": aten.add.Tensor, "mul": aten.mul.Tensor, "mm": aten.mm.default}
SPLIT = aten.split.Tensor  # a multi-output op: its users are getitems
ONES = aten.ones.default  # a node without inputs: it can stand first in a graph and be supported
NAMES = (*UNARY, *BINARY, "split", "getitem")


class _NamedSupport(OperatorSupportBase):
    """Supported = a call_function whose short name (`add`, `getitem`, ...) is in the set."""

    def __init__(self, names):
        self.names = frozenset(names)

    def is_node_supported(self, submodules, node):
        if node.op != "call_function":
            return False
        name = "getitem" if node.target is operator.getitem else node.target._opname
        return name in self.names


class _NodeSupport(OperatorSupportBase):
    """Supported = a node named in the set, of any kind (placeholders and the output too, as a support may say)."""

    def __init__(self, names):
        self.names = frozenset(names)

    def is_node_supported(self, submodules, node):
        return node.name in self.names


@st.composite
def fx_graphs(draw, max_steps: int = 40, sources: bool = False):
    """A random fx graph: placeholders, unary/binary ops and splits read by 1-3 getitems, some values unused; with
    `sources`, also ops without inputs (`ones`), the first node among them when there is no placeholder."""
    graph = fx.Graph()
    values = [graph.placeholder(f"x{i}") for i in range(draw(st.integers(0 if sources else 1, 3)))]
    kinds = ("unary", "binary", "binary", "split", *(("source",) if sources else ()))
    for _ in range(draw(st.integers(1, max_steps))):
        kind = "source" if not values else draw(st.sampled_from(kinds))
        pick = st.integers(0, max(len(values) - 1, 0))
        if kind == "source":
            values.append(graph.call_function(ONES, ([2, 2],)))
        elif kind == "unary":
            values.append(graph.call_function(UNARY[draw(st.sampled_from(sorted(UNARY)))], (values[draw(pick)],)))
        elif kind == "binary":
            op = BINARY[draw(st.sampled_from(sorted(BINARY)))]
            values.append(graph.call_function(op, (values[draw(pick)], values[draw(pick)])))
        else:
            split = graph.call_function(SPLIT, (values[draw(pick)], 1))
            values.extend(graph.call_function(operator.getitem, (split, i)) for i in range(draw(st.integers(1, 3))))
    outputs = draw(st.lists(st.integers(0, len(values) - 1), min_size=0, max_size=3))
    graph.output(tuple(values[i] for i in sorted({len(values) - 1, *outputs})))
    return fx.GraphModule(torch.nn.Module(), graph)


def _fx(gm, support, single=True):
    partitions = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=single).propose_partitions()
    return [set(p.nodes) for p in partitions]


def _names(groups) -> list[frozenset[str]]:
    """The node names of each partition, in the partitions' order (lowering numbers the delegates in it)."""
    return [frozenset(n.name for n in g) for g in groups]


def _assert_acyclic(gm: fx.GraphModule, groups) -> None:
    """Contracting each partition to one vertex leaves a DAG (Kahn's algorithm visits every vertex)."""
    unit = {n: ("p", i) for i, g in enumerate(groups) for n in g}
    vertex = {n: unit.get(n, n) for n in gm.graph.nodes}
    successors = {v: set() for v in vertex.values()}
    for n in gm.graph.nodes:
        successors[vertex[n]].update(vertex[u] for u in n.users if vertex[u] != vertex[n])
    indegree = dict.fromkeys(successors, 0)
    for vs in successors.values():
        for v in vs:
            indegree[v] += 1
    ready = [v for v, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        seen += 1
        for v in successors[ready.pop()]:
            indegree[v] -= 1
            if indegree[v] == 0:
                ready.append(v)
    assert seen == len(indegree), "the partitions form a cycle"


def _assert_same(gm, support, single=True):
    ours = propose_partitions(gm, support, allows_single_node_partition=single)
    assert _names(ours) == _names(_fx(gm, support, single))
    assert sum(map(len, ours)) == len(set().union(*ours)), "a node in two partitions"
    _assert_acyclic(gm, ours)
    return ours


@settings(max_examples=200, deadline=None)
@given(gm=fx_graphs(), names=st.sets(st.sampled_from(NAMES)), single=st.booleans())
def test_random_graphs_partition_as_torch_fx(gm, names, single):
    _assert_same(gm, _NamedSupport(names), single)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), single=st.booleans())
def test_random_graphs_with_any_nodes_supported_partition_as_torch_fx(data, single):
    """Support drawn node by node (not by op, and for placeholders and the output too), so supported and unsupported
    nodes interleave in every pattern, and graphs that start with a supported node: the cases the merge's cycle check
    and bookkeeping must each get right."""
    gm = data.draw(fx_graphs(sources=True))
    names = [n.name for n in gm.graph.nodes]
    chosen = data.draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    _assert_same(gm, _NodeSupport(name for name, keep in zip(names, chosen, strict=True) if keep), single)


@settings(max_examples=15, deadline=None)
@given(gm=fx_graphs(max_steps=300), names=st.sets(st.sampled_from(NAMES), min_size=2))
def test_larger_random_graphs_partition_as_torch_fx(gm, names):
    _assert_same(gm, _NamedSupport(names))


class _ReluModules(OperatorSupportBase):
    """Supported = a call_module whose submodule (looked up in the `submodules` the partitioner hands in) is a ReLU."""

    def is_node_supported(self, submodules, node):
        return node.op == "call_module" and isinstance(submodules[node.target], torch.nn.ReLU)


class _Modules(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.relu, self.relu2, self.tanh = torch.nn.ReLU(), torch.nn.ReLU(), torch.nn.Tanh()

    def forward(self, x):
        return self.relu2(self.tanh(self.relu(x))) + self.relu2(x)


def test_support_is_asked_with_the_graph_modules_submodules():
    gm = fx.symbolic_trace(_Modules())
    ours = _assert_same(gm, _ReluModules())
    assert sorted(sorted(n.name for n in g) for g in ours) == [["relu"], ["relu2", "relu2_1"]]


DELEGATE_SETS = {
    "default": DEFAULT_DELEGATE_OPS,
    "matrix": ("mm.default", "addmm.default", "bmm.default"),
    "matrix+views": (
        "mm.default",
        "addmm.default",
        "bmm.default",
        "view.default",
        "permute.default",
        "expand.default",
        "clone.default",
        "_unsafe_view.default",
    ),
    "elementwise": ("add.Tensor", "mul.Tensor", "sin.default", "relu.default", "div.Tensor"),
}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_sample_models_partition_as_torch_fx(model):
    exported = export_program(*MODELS[model]())
    for ops in DELEGATE_SETS.values():
        _assert_same(exported.graph_module, OverloadSupport(ops))


def _gpt2_shaped(layers: int):
    return benchmark_module("placement_pass").gpt2_shaped(layers)


@pytest.fixture(scope="module")
def gpt2_program():
    return export_program(*_gpt2_shaped(6))


@pytest.mark.parametrize("delegate_set", sorted(DELEGATE_SETS))
def test_gpt2_shaped_graph_partitions_as_torch_fx(gpt2_program, delegate_set):
    ours = _assert_same(gpt2_program.graph_module, OverloadSupport(DELEGATE_SETS[delegate_set]))
    assert len(gpt2_program.graph_module.graph.nodes) > 400 and len(ours) > 1


def test_lowering_with_either_partitioner_makes_the_same_delegates(gpt2_program):
    fast, oracle = (lower(gpt2_program, partition=p) for p in ("capability", "fx"))
    assert [d.ops for d in fast.delegates.values()] == [d.ops for d in oracle.delegates.values()]
    assert [n.name for n in fast.graph_module.graph.nodes] == [n.name for n in oracle.graph_module.graph.nodes]
    assert fast.partition == "capability" and oracle.partition == "fx"


def _real_program(name: str):
    try:
        module, inputs = REAL_MODELS[name]()
    except ModelsExtraMissing as exc:
        pytest.skip(f"the models extra is not installed: {exc}")
    return edge_form(export_program(module, inputs)).graph_module  # the graph lower() partitions


def test_gpt2_partitions_as_torch_fx():
    """The real GPT-2 (2 layers), with the ops a user delegates by default."""
    _assert_same(_real_program("gpt2_2l"), OverloadSupport(DEFAULT_DELEGATE_OPS))


@pytest.mark.deep
@pytest.mark.parametrize("model", sorted(REAL_MODELS))
def test_real_models_partition_as_torch_fx(model):
    gm = _real_program(model)
    for ops in REAL_DELEGATE_SETS.values():
        _assert_same(gm, OverloadSupport(ops))


def test_a_delegate_whose_ops_map_to_two_devices_is_an_invalid_argument():
    """One partition holds add and mul: mapping them to two devices is a bad argument of `lower` (kind usage), named
    with the way out."""
    from devcopy_lib.errors import InvalidArgumentError

    class AddMul(torch.nn.Module):
        def forward(self, x):
            return (x + 1) * 2

    exported = export_program(AddMul(), (torch.ones(3),))
    ops = ["add.Tensor", "mul.Tensor"]
    with pytest.raises(InvalidArgumentError, match=r"delegate_0 .* maps to several devices \['cuda:0', 'cuda:1'\]"):
        lower(exported, ops, {"add.Tensor": "cuda:0", "mul.Tensor": "cuda:1"})
    assert lower(exported, ops, {"add.Tensor": "cuda:1", "mul.Tensor": "cuda:1"}).delegates
