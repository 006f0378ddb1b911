"""What lowering and placement at thousands of nodes rely on, checked on small graphs against the plain definitions."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import fx

from devcopy_lib.devices import Device
from devcopy_lib.lowering.delegate import delegate_of
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.lowering.nodes import device_of
from devcopy_lib.models import MODELS
from devcopy_lib.placement.place import place_devices
from devcopy_lib.placement.report import device_peak_bytes, value_bytes


def _peak_by_definition(gm: fx.GraphModule) -> int:
    """Bytes on devices at each position (a value lives from its node to its last user), maximised: quadratic."""
    nodes = list(gm.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    ranges = [
        (position[n], max((position[u] for u in n.users), default=position[n]), value_bytes(n.meta.get("val")))
        for n in nodes
        if n.op != "output" and not device_of(n).is_cpu and delegate_of(n) is None
    ]
    return max((sum(b for start, end, b in ranges if start <= i <= end) for i in range(len(nodes))), default=0)


@st.composite
def placed_graphs(draw):
    """A random DAG whose values have random sizes and sit on cpu or cuda:0, as a placed graph's do."""
    graph = fx.Graph()
    values = [graph.placeholder("x")]
    for _ in range(draw(st.integers(1, 12))):
        args = tuple(values[draw(st.integers(0, len(values) - 1))] for _ in range(draw(st.integers(1, 2))))
        values.append(graph.call_function(torch.add, args) if len(args) == 2 else graph.call_function(torch.neg, args))
    graph.output(values[-1])
    for node in values:
        node.meta["val"] = torch.empty(draw(st.integers(0, 8)))
        node.meta["device"] = Device.parse(draw(st.sampled_from(["cpu", "cuda:0"])))
    return fx.GraphModule(torch.nn.Module(), graph)


@settings(max_examples=200, deadline=None)
@given(gm=placed_graphs())
def test_device_peak_sweep_equals_the_definition(gm):
    assert device_peak_bytes(gm) == _peak_by_definition(gm)


@pytest.mark.parametrize("partition", ["capability", "per_node"])
def test_device_peak_of_a_placed_model_equals_the_definition(partition):
    placed = place_devices(export_and_lower(*MODELS["transformer_block"](), partition=partition))
    peak = device_peak_bytes(placed.graph_module)
    assert peak > 0 and peak == _peak_by_definition(placed.graph_module)
