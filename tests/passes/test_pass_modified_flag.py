"""The placement pass's `modified` flag with non-CPU memory planning off (tag only): True exactly when a tag changed,
so a second run reports False (docs/semantics.md §6, point 4). Written for mutation survivors (docs/testing.md)."""
import torch
from placement_helpers import Fn, inputs

from devcopy_lib.passes.lower import export_and_lower
from devcopy_lib.passes.placement import PlaceDevicesPass, copy_graph_module
from devcopy_lib.devices import CPU
from devcopy_lib.passes.nodes import call_device


def _lowered_add():
    return export_and_lower(Fn(torch.add), inputs(2), ["add.Tensor"], target_device="cuda:0")


def test_tag_only_reports_a_change_then_none():
    gm = copy_graph_module(_lowered_add().graph_module)
    tag_only = PlaceDevicesPass(non_cpu_memory_planning=False)
    assert tag_only(gm).modified is True
    assert tag_only(gm).modified is False


def test_tag_only_alone_reports_its_own_change():
    """Every default tag already in place: only tag_only's device tags on the delegate's inputs and users change."""
    gm = copy_graph_module(_lowered_add().graph_module)
    for node in gm.graph.nodes:
        node.meta["device"] = call_device(node) or CPU
    assert PlaceDevicesPass(non_cpu_memory_planning=False)(gm).modified is True


def test_a_change_before_an_unchanged_tag_still_counts():
    """Two delegates on cuda:0; the second's output already tagged: the change to the others is still reported."""
    lowered = export_and_lower(Fn(lambda a, b, c: (a + b) * c), inputs(3), ["add.Tensor", "mul.Tensor"],
                               target_device="cuda:0", partition="per_node")
    gm = copy_graph_module(lowered.graph_module)
    for node in gm.graph.nodes:
        node.meta["device"] = call_device(node) or CPU
    last_call = [n for n in gm.graph.nodes if call_device(n) is not None][-1]
    for user in last_call.users:
        user.meta["device"] = call_device(last_call)
    assert PlaceDevicesPass(non_cpu_memory_planning=False)(gm).modified is True
