"""The `peer` strategy: a D2H on one device feeding an H2D to another becomes one direct D2D copy where peer access
exists, the host hop stays where it does not; the report records both options for each such pair."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_helpers import Fn, count, inputs
from random_dags import random_dags

from devcopy_lib import SimulatedCudaAllocator, export_and_lower, place_devices
from devcopy_lib.devices import scoped_allocators
from devcopy_lib.lowering.nodes import call_device, device_of, node_kind
from devcopy_lib.names import device_string
from devcopy_lib.placement.place import PlaceDevicesPass

TWO = {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}


def _add_add():
    return export_and_lower(Fn(lambda a, b, c: (a + b) + c), inputs(3), partition="per_node", target_device=TWO)


def test_peer_replaces_the_host_hop_by_one_direct_copy():
    placed = place_devices(_add_add(), strategy="peer")
    gm = placed.graph_module
    (d2d,) = [n for n in gm.graph.nodes if node_kind(n) == "d2d"]
    assert str(device_of(d2d)) == "cuda:1" and str(device_of(d2d.args[0])) == "cuda:0"
    assert (count(gm, "h2d"), count(gm, "d2h"), count(gm, "d2d")) == (3, 1, 1)
    (pair,) = placed.report.cross_device
    assert (pair["value"], pair["src"], pair["dst"], pair["chosen"], pair["bytes"]) == (
        d2d.args[0].name,
        "cuda:0",
        "cuda:1",
        "direct",
        16,
    )
    assert pair["direct_saves"] == {"copies": 1, "host_bytes": 32, "predicted_s": None}


@pytest.mark.parametrize("peer_access", [False, set(), {("cuda:0", "cuda:2")}, lambda src, dst: False])
def test_without_peer_access_the_host_hop_stays(peer_access):
    placed = place_devices(_add_add(), strategy="peer", peer_access=peer_access)
    assert placed.report.copies == {"h2d": 4, "d2h": 2}
    assert [p["chosen"] for p in placed.report.cross_device] == ["host_hop"]


def test_default_asks_the_registered_allocator():
    with scoped_allocators(SimulatedCudaAllocator(peer_access={(0, 2)})):
        assert place_devices(_add_add(), strategy="peer").report.copies == {"h2d": 4, "d2h": 2}
    with scoped_allocators(SimulatedCudaAllocator(peer_access={(1, 0)})):
        assert place_devices(_add_add(), strategy="peer").report.copies["d2d"] == 1


def test_executorch_report_shows_what_peer_would_save():
    report = place_devices(_add_add(), strategy="executorch").report
    assert report.cross_device[0]["chosen"] == "host_hop" and report.cross_device[0]["peer_access"]
    peer = next(c for c in report.comparison if c["strategy"] == "peer")
    assert peer["copies_saved"] == {"h2d": -1, "d2h": -1, "d2d": 1}


class _Lines:
    def predict(self, direction, nbytes, memory="pinned"):
        return {"h2d": 1.0, "d2h": 2.0, "d2d": 0.25}[direction] * nbytes


def test_cost_model_prices_both_options():
    (pair,) = place_devices(_add_add(), strategy="peer", cost_model=_Lines()).report.cross_device
    assert (pair["host_hop"]["predicted_s"], pair["direct"]["predicted_s"], pair["direct_saves"]["predicted_s"]) == (
        48.0,
        4.0,
        44.0,
    )


def test_a_d2h_shared_with_a_cpu_reader_stays():
    fn = Fn(lambda a, b, c: (lambda t: (t + c, torch.relu(t)))(a + b))
    lowered = export_and_lower(fn, inputs(3), delegate_ops=["add.Tensor"], partition="per_node", target_device=TWO)
    placed = place_devices(lowered, strategy="peer")
    (pair,) = placed.report.cross_device
    assert pair["d2h_shared"] and pair["direct_saves"]["copies"] == 0 and pair["direct_saves"]["host_bytes"] == 16
    assert count(placed.graph_module, "d2d") == 1 and count(placed.graph_module, "d2h") == 2


def test_peer_placement_is_idempotent():
    gm = place_devices(_add_add(), strategy="peer").graph_module
    assert not PlaceDevicesPass("peer")(gm).modified


def _host_bytes(report):
    return report.copy_bytes["h2d"] + report.copy_bytes["d2h"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=random_dags(), seed=st.randoms(use_true_random=False), access=st.booleans())
def test_random_device_assignments(dag, seed, access):
    """Over 2-3 indices: every edge into a device delegate is on its device, copies go the right way, and `peer`
    never moves more bytes through the host than `executorch`."""
    module, example = dag
    lowered = export_and_lower(module, example, partition="per_node", target_device=None)
    targets = {name: device_string(seed.randrange(3)) for name in lowered.delegates}
    lowered = export_and_lower(module, example, partition="per_node", target_device=targets)
    ours = place_devices(lowered, strategy="peer", peer_access=access)
    theirs = place_devices(lowered, strategy="executorch")
    for node in ours.graph_module.graph.nodes:
        kind = node_kind(node)
        if kind == "delegate" and call_device(node) is not None:
            assert all(device_of(a) == call_device(node) for a in node.all_input_nodes), node.name
        if kind == "d2d":
            src = device_of(node.args[0])
            assert not src.is_cpu and src != device_of(node) and access
        if kind == "h2d":
            assert device_of(node.args[0]).is_cpu
    assert _host_bytes(ours.report) <= _host_bytes(theirs.report)
