"""Details of the placement pass that mutation testing found unpinned (docs/testing.md): each phase's `changed` flag
is True exactly when it changed a tag, so a second run reports False; copy nodes' names; the skip-H2D refusal's
message (docs/semantics.md §6)."""
import pytest
import torch
from placement_helpers import Fn, inputs

from devcopy_lib.passes.lower import export_and_lower
from devcopy_lib.passes.nodes import node_kind
from devcopy_lib.passes.placement import PlaceDevicesPass, PlacementError, copy_graph_module, place_devices
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


def _two_outputs_on_device():
    """a + b and a * c as two cuda:0 delegates, both outputs read by the graph output only."""
    lowered = export_and_lower(Fn(lambda a, b, c: (a + b, a * c)), inputs(3), ["add.Tensor", "mul.Tensor"],
                               target_device="cuda:0", partition="per_node")
    gm = copy_graph_module(lowered.graph_module)
    return gm, {n: d for n in gm.graph.nodes if (d := call_device(n)) is not None}


def test_insert_d2h_reports_a_skipped_outputs_tag():
    """skip_d2h_for_method_outputs: no copy is inserted, but the outputs' device tags are a change - once."""
    gm, calls = _two_outputs_on_device()
    phase = PlaceDevicesPass(skip_d2h_for_method_outputs=True).insert_d2h
    assert phase(gm.graph, calls) is True
    assert phase(gm.graph, calls) is False


def test_insert_d2h_counts_a_tag_before_an_unchanged_one():
    gm, calls = _two_outputs_on_device()
    last_call = list(calls)[-1]
    for item in last_call.users:
        item.meta["device"] = calls[last_call]
    assert PlaceDevicesPass(skip_d2h_for_method_outputs=True).insert_d2h(gm.graph, calls) is True


def test_copy_nodes_are_named_after_their_source_and_kind():
    placed = place_devices(_lowered_add())
    copies = [n for n in placed.graph_module.graph.nodes if node_kind(n) in ("h2d", "d2h")]
    assert len(copies) == 3
    assert [n.name for n in copies] == [f"{n.args[0].name}_{node_kind(n)}" for n in copies]


@pytest.mark.parametrize("strategy, hint", [("executorch", True), ("dedupe", False)])
def test_a_refused_skip_names_the_users_and_the_way_out(strategy, hint):
    """A shared input under skip-H2D: the error names both readers; `executorch` also suggests `dedupe`."""
    lowered = export_and_lower(Fn(lambda a, b: (a + b, a * b)), inputs(2), ["add.Tensor"], target_device="cuda:0",
                               partition="per_node")
    with pytest.raises(PlacementError, match=r"but it has 2 \((\w+), (\w+)\)") as info:
        place_devices(lowered, strategy=strategy, skip_h2d_for_method_inputs=True)
    message = str(info.value)
    readers = ", ".join(u.name for u in next(iter(lowered.graph_module.graph.nodes)).users)
    assert f"but it has 2 ({readers}):" in message
    assert message.endswith("Disable skip_h2d_for_method_inputs or use strategy='dedupe' (several delegates on one "
                            "device)." if hint else "Disable skip_h2d_for_method_inputs.")
