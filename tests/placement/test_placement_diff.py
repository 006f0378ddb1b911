"""Two placements compared copy by copy (placement/diff.py): copies matched by the value they carry, its
direction and device; what appears, vanishes or changes, and the totals' difference."""

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_helpers import TransposedWeight, inputs
from random_dags import OVERLOADS, random_dags

from devcopy_lib import diff_lines, export_and_lower, models, place_devices, placement_diff
from devcopy_lib.placement.diff import copy_records, is_empty

STRATEGIES = ("executorch", "dedupe")


def _key(record):
    return record["value"], record["direction"], record["device"]


def _cpu_between(strategy):
    return place_devices(export_and_lower(*models.cpu_between()), strategy=strategy)


def test_dedupe_against_executorch_names_exactly_the_deduplicated_copy():
    diff = placement_diff(_cpu_between("executorch"), _cpu_between("dedupe"))
    assert [(r["value"], r["direction"], r["device"], r["node"]) for r in diff["vanish"]] == [
        ("b", "h2d", "cuda:0", "b_h2d_1")
    ]
    assert diff["appear"] == [] and diff["changed"] == [] and diff["same"] == 5
    assert diff["totals"]["copies"] == {"h2d": -1, "d2h": 0}
    assert diff["totals"]["copy_bytes"] == {"h2d": -64, "d2h": 0}
    assert (diff["a"]["label"], diff["b"]["label"]) == ("executorch", "dedupe")
    text = diff_lines(diff)
    assert text[0].startswith("diff executorch -> dedupe: 0 copies appear, 1 vanish")
    assert "  - b -> cuda:0 H2D (b_h2d_1, 64 B)  (only in executorch)" in text
    assert text[-1] == "  totals per call: H2D 4 -> 3 (-1, -64 B) · D2H 2 -> 2 (+0, +0 B)"


def test_a_host_hop_against_a_peer_copy_names_the_value_not_the_first_legs_node():
    module, example = models.back_to_back()
    targets = {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    lowered = export_and_lower(module, example, ["add.Tensor"], target_device=targets, partition="per_node")
    diff = placement_diff(place_devices(lowered), place_devices(lowered, strategy="peer", peer_access=True))
    assert {_key(r) for r in diff["vanish"]} == {("add", "d2h", "cpu"), ("add", "h2d", "cuda:1")}
    assert [_key(r) for r in diff["appear"]] == [("add", "d2d", "cuda:1")]


def test_a_copy_to_another_device_under_the_same_node_name_is_not_the_same_copy():
    module, example = models.back_to_back()
    one = export_and_lower(module, example, ["add.Tensor"], partition="per_node")
    two = export_and_lower(
        module,
        example,
        ["add.Tensor"],
        target_device={"delegate_0": "cuda:0", "delegate_1": "cuda:1"},
        partition="per_node",
    )
    diff = placement_diff(place_devices(one), place_devices(two))
    [moved_from] = [r for r in diff["vanish"] if r["value"] == "c"]
    [moved_to] = [r for r in diff["appear"] if r["value"] == "c"]
    assert moved_from["node"] == moved_to["node"]  # one generated name, two different copies
    assert (moved_from["device"], moved_to["device"]) == ("cuda:0", "cuda:1")


def test_hoisting_changes_a_copy_from_per_call_to_once_at_load():
    lowered = export_and_lower(TransposedWeight(), inputs(1), ["mm.default"])
    diff = placement_diff(place_devices(lowered), place_devices(lowered, hoist_constants=True))
    assert diff["appear"] == diff["vanish"] == []
    [change] = diff["changed"]
    assert (change["direction"], change["a"]["per_call"], change["b"]["per_call"]) == ("h2d", True, False)
    assert "per call -> once at load" in diff_lines(diff)[1]


def _diffs(dag, ops, strategy_a, strategy_b):
    module, example = dag
    a = place_devices(export_and_lower(module, example, ops[0]), strategy=strategy_a)
    b = place_devices(export_and_lower(module, example, ops[1]), strategy=strategy_b)
    return a, b, placement_diff(a, b), placement_diff(b, a)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    dag=random_dags(),
    ops=st.tuples(*[st.lists(st.sampled_from(sorted(OVERLOADS.values())), min_size=1, unique=True)] * 2),
    strategies=st.tuples(st.sampled_from(STRATEGIES), st.sampled_from(STRATEGIES)),
)
def test_a_diff_accounts_for_every_copy_and_reverses(dag, ops, strategies):
    a, b, forward, backward = _diffs(dag, ops, *strategies)
    itself = placement_diff(a, a)
    assert is_empty(itself) and itself["same"] == len(copy_records(a))
    assert (
        diff_lines(itself)[0] == f"diff a -> b: the same copies ({itself['same']}); none appears, vanishes or changes"
    )
    # every copy of a is matched, or vanishes; every copy of b is matched, or appears
    matched = forward["same"] + len(forward["changed"])
    assert matched + len(forward["vanish"]) == len(copy_records(a))
    assert matched + len(forward["appear"]) == len(copy_records(b))
    # appear minus vanish is the totals' difference, per direction, in copies and bytes
    for direction, change in forward["totals"]["copies"].items():
        appeared = [r for r in forward["appear"] if r["direction"] == direction]
        vanished = [r for r in forward["vanish"] if r["direction"] == direction]
        assert change == len(appeared) - len(vanished)
        nbytes = sum(r["bytes"] for r in appeared) - sum(r["bytes"] for r in vanished)
        assert forward["totals"]["copy_bytes"][direction] == nbytes
    # b -> a is a -> b backwards
    assert Counter(map(_key, forward["appear"])) == Counter(map(_key, backward["vanish"]))
    assert Counter(map(_key, forward["vanish"])) == Counter(map(_key, backward["appear"]))
