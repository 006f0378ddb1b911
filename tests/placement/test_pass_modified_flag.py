"""Details of the placement pass that mutation testing found unpinned (docs/testing.md): each phase's `changed` flag
is True exactly when that phase changed the graph (even when no other phase did), so a second run reports False; a
re-run after an edit; copy nodes' names; the skip-H2D refusal's message (docs/semantics.md §6)."""

import pytest
import torch
from placement_helpers import Fn, inputs

from devcopy_lib.devices import CPU
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.lowering.nodes import call_device, node_kind
from devcopy_lib.placement.place import PlaceDevicesPass, PlacementError, copy_graph_module, place_devices


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
    lowered = export_and_lower(
        Fn(lambda a, b, c: (a + b) * c),
        inputs(3),
        ["add.Tensor", "mul.Tensor"],
        target_device="cuda:0",
        partition="per_node",
    )
    gm = copy_graph_module(lowered.graph_module)
    for node in gm.graph.nodes:
        node.meta["device"] = call_device(node) or CPU
    last_call = [n for n in gm.graph.nodes if call_device(n) is not None][-1]
    for user in last_call.users:
        user.meta["device"] = call_device(last_call)
    assert PlaceDevicesPass(non_cpu_memory_planning=False)(gm).modified is True


def _two_outputs_on_device():
    """a + b and a * c as two cuda:0 delegates, both outputs read by the graph output only."""
    lowered = export_and_lower(
        Fn(lambda a, b, c: (a + b, a * c)),
        inputs(3),
        ["add.Tensor", "mul.Tensor"],
        target_device="cuda:0",
        partition="per_node",
    )
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
    lowered = export_and_lower(
        Fn(lambda a, b: (a + b, a * b)), inputs(2), ["add.Tensor"], target_device="cuda:0", partition="per_node"
    )
    with pytest.raises(PlacementError, match=r"but it has 2 \((\w+), (\w+)\)") as info:
        place_devices(lowered, strategy=strategy, skip_h2d_for_method_inputs=True)
    message = str(info.value)
    readers = ", ".join(u.name for u in next(iter(lowered.graph_module.graph.nodes)).users)
    assert f"but it has 2 ({readers}):" in message
    assert message.endswith(
        "Disable skip_h2d_for_method_inputs or use strategy='dedupe' (several delegates on one device)."
        if hint
        else "Disable skip_h2d_for_method_inputs."
    )


def _untagged(fn, n, ops, **lower):
    gm = copy_graph_module(export_and_lower(Fn(fn), inputs(n), ops, **lower).graph_module)
    return gm, {node: d for node in gm.graph.nodes if (d := call_device(node)) is not None}


@pytest.mark.parametrize("planning", [True, False])
def test_default_tags_alone_are_a_change(planning):
    """No device delegate: only tag_defaults changes the graph (CPU tags), and the pass still says so - once."""
    gm, calls = _untagged(lambda a, b: a + b, 2, ["add.Tensor"], target_device=None)
    assert not calls
    placement = PlaceDevicesPass(non_cpu_memory_planning=planning)
    assert placement(gm).modified is True
    assert placement(gm).modified is False


def test_tag_defaults_counts_a_tag_before_an_unchanged_one():
    gm, calls = _untagged(lambda a, b: a + b, 2, ["add.Tensor"], target_device="cuda:0")
    output = next(n for n in gm.graph.nodes if n.op == "output")
    output.meta["device"] = CPU
    assert PlaceDevicesPass().tag_defaults(gm.graph, calls) is True


def test_insert_h2d_reports_inserted_copies():
    gm, calls = _untagged(lambda a, b: a + b, 2, ["add.Tensor"], target_device="cuda:0")
    placement = PlaceDevicesPass()
    placement.tag_defaults(gm.graph, calls)
    assert placement.insert_h2d(gm.graph, calls) is True


def test_insert_h2d_reports_skipped_inputs_retagged():
    """skip_h2d_for_method_inputs with only graph inputs feeding the delegate: no copy, the re-tags are the change."""
    gm, calls = _untagged(lambda a, b: a + b, 2, ["add.Tensor"], target_device="cuda:0")
    placement = PlaceDevicesPass(skip_h2d_for_method_inputs=True)
    placement.tag_defaults(gm.graph, calls)
    assert placement.insert_h2d(gm.graph, calls) is True
    assert placement.insert_h2d(gm.graph, calls) is False


def test_insert_d2h_reports_an_inserted_copy_when_the_tags_were_already_there():
    gm, calls = _untagged(lambda a, b: a + b, 2, ["add.Tensor"], target_device="cuda:0")
    placement = PlaceDevicesPass()
    placement.tag_defaults(gm.graph, calls)
    for call, device in calls.items():
        for item in call.users:
            item.meta["device"] = device
    assert placement.insert_d2h(gm.graph, calls) is True


def _copies_inserted(placement, gm, calls):
    """The phases before elision: default tags, H2D and D2H copies."""
    placement.tag_defaults(gm.graph, calls)
    placement.insert_h2d(gm.graph, calls)
    placement.insert_d2h(gm.graph, calls)


def test_elide_round_trips_reports_an_elided_h2d_whose_d2h_stays():
    """t = a + b on cuda:0 feeds a mul on cuda:0 and a CPU relu: the H2D(D2H(t)) round trip goes, the D2H stays."""
    fn = lambda a, b: (lambda t: (t * b, torch.relu(t)))(a + b)  # noqa: E731
    gm, calls = _untagged(fn, 2, ["add.Tensor", "mul.Tensor"], target_device="cuda:0", partition="per_node")
    placement = PlaceDevicesPass()
    _copies_inserted(placement, gm, calls)
    h2d_before = sum(node_kind(n) == "h2d" for n in gm.graph.nodes)
    assert placement.elide_round_trips(gm.graph) is True
    assert sum(node_kind(n) == "h2d" for n in gm.graph.nodes) == h2d_before - 1
    assert sum(node_kind(n) == "d2h" for n in gm.graph.nodes) == 2


def test_direct_peer_copies_reports_a_direct_copy_whose_d2h_stays():
    fn = lambda a, b, c: (lambda t: (t + c, torch.relu(t)))(a + b)  # noqa: E731
    gm, calls = _untagged(
        fn, 3, ["add.Tensor"], partition="per_node", target_device={"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    )
    placement = PlaceDevicesPass("peer", peer_access=True)
    _copies_inserted(placement, gm, calls)
    placement.elide_round_trips(gm.graph)
    assert placement.direct_peer_copies(gm.graph) is True
    assert [node_kind(n) for n in gm.graph.nodes].count("d2d") == 1


def test_a_d2h_left_without_readers_by_an_edit_is_dropped_on_the_next_run():
    """After placement, an edit removes the CPU op reading a D2H: running the pass again drops the D2H and says so."""
    lowered = export_and_lower(Fn(lambda a, b: torch.relu(a + b)), inputs(2), ["add.Tensor"], target_device="cuda:0")
    gm = place_devices(lowered).graph_module
    relu = next(n for n in gm.graph.nodes if node_kind(n) == "cpu_op")
    relu.replace_all_uses_with(next(n for n in gm.graph.nodes if n.op == "placeholder"))
    gm.graph.erase_node(relu)
    assert PlaceDevicesPass()(gm).modified is True
    assert [node_kind(n) for n in gm.graph.nodes].count("d2h") == 0
