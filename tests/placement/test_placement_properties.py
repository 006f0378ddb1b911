"""Properties of placement over random DAGs and random delegated-op sets (hypothesis): no edge crosses devices
without a copy, the placed graph equals eager, the pass is idempotent, `dedupe` never copies more than `executorch`.
A fixed 20-example run in `make test`; the `deep` run is unseeded with many more examples (`make test-deep`)."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_dags import OVERLOADS, random_dags

from devcopy_lib import export_and_lower, place_devices
from devcopy_lib.lowering.delegate import delegate_source
from devcopy_lib.lowering.nodes import call_device, device_of, node_kind
from devcopy_lib.placement.place import PlaceDevicesPass, PlacementError

OPTIONS = st.fixed_dictionaries(
    {"skip_h2d_for_method_inputs": st.booleans(), "skip_d2h_for_method_outputs": st.booleans()}
)


def assert_no_edge_crosses_devices(gm, skip_d2h: bool) -> None:
    """Every value is read on the device it lives on, except across a copy; outputs are on CPU unless skipped."""
    gm.graph.lint()  # a well-formed graph: the pass itself does not lint (hot path)
    for node in gm.graph.nodes:
        kind = node_kind(node)
        for arg in node.all_input_nodes:
            if kind == "getitem":
                continue
            if kind == "h2d":
                assert device_of(arg).is_cpu and not device_of(node).is_cpu, node.name
            elif kind == "d2h":
                assert not device_of(arg).is_cpu and device_of(node).is_cpu, node.name
            elif kind == "output" and skip_d2h and delegate_source(arg) is not None:
                assert all(u.op == "output" for u in arg.users), arg.name
            elif kind == "delegate" and call_device(node) is not None:
                assert device_of(arg) == call_device(node), (node.name, arg.name)
            else:
                assert device_of(arg).is_cpu, (node.name, arg.name)


DAGS = random_dags()
OPS = st.sets(st.sampled_from(sorted(OVERLOADS.values())), min_size=1)
PARTITIONS = st.sampled_from(["capability", "per_node"])


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(dag=DAGS, ops=OPS, partition=PARTITIONS, options=OPTIONS)
def test_placement_properties(dag, ops, partition, options):
    check_placement(dag, ops, partition, options)


@pytest.mark.deep
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(dag=DAGS, ops=OPS, partition=PARTITIONS, options=OPTIONS)
def test_placement_properties_deep(dag, ops, partition, options):
    check_placement(dag, ops, partition, options)


def check_placement(dag, ops, partition, options) -> None:
    module, inputs = dag
    lowered = export_and_lower(module, inputs, sorted(ops), partition=partition)
    placed = {}
    for strategy in ("executorch", "dedupe"):
        try:
            placed[strategy] = place_devices(lowered, strategy=strategy, **options)
        except PlacementError:
            assert options["skip_h2d_for_method_inputs"], "only skip-H2D of a shared input is refused"
    for strategy, program in placed.items():
        gm = program.graph_module
        assert_no_edge_crosses_devices(gm, options["skip_d2h_for_method_outputs"])
        torch.testing.assert_close(program(*inputs), module(*inputs))
        code = gm.code
        assert PlaceDevicesPass(strategy, **options)(gm).modified is False and gm.code == code
    if len(placed) == 2:
        ours, theirs = placed["dedupe"].report, placed["executorch"].report
        for direction in ("h2d", "d2h"):
            assert ours.copies[direction] <= theirs.copies[direction]
            assert ours.copy_bytes[direction] <= theirs.copy_bytes[direction]
    elif placed:
        assert "dedupe" in placed, "dedupe accepts every input executorch accepts"
