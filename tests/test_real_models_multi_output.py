"""Multi-output ops (layer norm, batch norm, max pool with indices) inside delegates and on CPU: the delegate names
real ops only, the report and node kinds show each `getitem`, and the program runs equal to eager in both modes."""

import pytest
import torch
from torch import nn

from devcopy_lib import compare_outputs, export_and_lower, load_method, place_devices
from devcopy_lib.lowering.nodes import node_kind


def _conv_bn_relu():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())


CASES = {
    "layer_norm": (lambda: nn.LayerNorm(8), (2, 8), ["native_layer_norm.default"]),
    "batch_norm": (_conv_bn_relu, (1, 3, 8, 8), ["_native_batch_norm_legit_no_training.default"]),
    "conv_bn_relu": (
        _conv_bn_relu,
        (1, 3, 8, 8),
        ["convolution.default", "_native_batch_norm_legit_no_training.default", "relu.default"],
    ),
    "max_pool": (lambda: nn.MaxPool2d(2), (1, 3, 8, 8), ["max_pool2d_with_indices.default"]),
}


def _case(name):
    build, shape, ops = CASES[name]
    torch.manual_seed(0)
    return build().eval(), (torch.randn(*shape),), ops


@pytest.mark.parametrize("partition", ["capability", "per_node"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_delegated_multi_output_op_places_and_runs_equal_to_eager(sim, name, partition):
    module, x, ops = _case(name)
    placed = place_devices(export_and_lower(module, x, ops, partition=partition))
    delegated = [op for d in placed.delegates.values() for op in d.ops]
    assert sorted(delegated) == sorted(ops)  # real ops only: the partition's getitems are not ops
    report = placed.report
    for row in (r for r in report.rows if r.kind == "delegate"):
        ops_named = row.reason.partition("(")[2].partition(")")[0]
        assert ops_named == ", ".join(dict.fromkeys(placed.delegates[row.name].ops)), row.reason
    assert report.copies == {"h2d": 1, "d2h": 1}
    with torch.no_grad():
        expected = [module(*x)]
    for mode in ("portable", "aten"):
        with load_method(placed, mode) as method:
            ok, err = compare_outputs(method(*x), expected)
        assert ok, (mode, err)


def test_a_multi_output_op_left_on_cpu_shows_its_getitem_as_such(sim):
    module, x, _ = _case("layer_norm")
    placed = place_devices(export_and_lower(module, x, ["add.Tensor"]))
    getitems = [n for n in placed.graph_module.graph.nodes if n.name.startswith("getitem")]
    assert getitems and all(node_kind(n) == "getitem" for n in getitems)
    row = next(r for r in placed.report.rows if r.name == getitems[0].name)
    assert row.reason == "output 0 of native_layer_norm" and row.device == "cpu"
