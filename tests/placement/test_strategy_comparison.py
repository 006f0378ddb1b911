"""The report's strategy comparison: told from the executorch placement (placement/rewrites.py) without placing the
others, equal to placing each strategy for real (random DAGs, devices, options); under another strategy left to the
comparison's first read, with the peer answers the placement itself got."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_helpers import Fn, inputs
from random_dags import random_dags

from devcopy_lib import SimulatedCudaAllocator, export_and_lower, place_devices
from devcopy_lib.devices import scoped_allocators
from devcopy_lib.names import STRATEGIES
from devcopy_lib.placement import place as placement
from devcopy_lib.placement.place import PlacementError
from devcopy_lib.placement.report import build_report

TWO = {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}


def _add_add():
    return export_and_lower(Fn(lambda a, b, c: (a + b) + c), inputs(3), partition="per_node", target_device=TWO)


def test_placing_runs_the_pass_once_and_the_first_read_places_the_others(monkeypatch):
    runs = []
    real = placement.PlaceDevicesPass.call
    monkeypatch.setattr(
        placement.PlaceDevicesPass, "call", lambda self, gm: runs.append(self.strategy) or real(self, gm)
    )
    report = place_devices(_add_add(), strategy="dedupe").report
    assert runs == ["dedupe"]
    assert [entry["strategy"] for entry in report.comparison] == ["executorch", "peer"]
    assert runs == ["dedupe", "executorch"]  # peer is told from executorch's placement
    report.to_dict()
    assert runs[2:] == ["dedupe"] * 3  # the side-by-side placements (plain, hoisted, resident), on first read
    report.to_dict()
    assert len(runs) == 5  # each placed once, then kept


def test_under_executorch_the_others_are_told_without_placing_them(monkeypatch):
    runs = []
    real = placement.PlaceDevicesPass.call
    monkeypatch.setattr(
        placement.PlaceDevicesPass, "call", lambda self, gm: runs.append(self.strategy) or real(self, gm)
    )
    report = place_devices(_add_add()).report
    assert [entry["strategy"] for entry in report.comparison] == ["dedupe", "peer"] and runs == ["executorch"]


def test_the_deferred_comparison_equals_one_built_from_placed_graphs():
    lowered = _add_add()
    placed = place_devices(lowered, strategy="executorch")
    others = {name: place_devices(lowered, strategy=name).graph_module for name in ("dedupe", "peer")}
    eager = build_report(placed, None, others, None)
    assert placed.report.comparison == eager.comparison and placed.report.to_dict()["comparison"] == eager.comparison


def test_the_comparison_gets_the_peer_answers_the_placement_got():
    with scoped_allocators(SimulatedCudaAllocator(peer_access={(0, 1)})):
        report = place_devices(_add_add(), strategy="executorch").report
    with scoped_allocators(SimulatedCudaAllocator(peer_access=set())):  # no peer access when it is read
        peer = next(entry for entry in report.comparison if entry["strategy"] == "peer")
    assert peer["copies"].get("d2d") == 1


def test_a_report_built_without_others_compares_nothing():
    placed = place_devices(_add_add())
    assert build_report(placed).comparison == [] and build_report(placed).to_dict()["comparison"] == []


def test_a_pickled_or_copied_report_carries_its_comparison():
    placed = place_devices(_add_add(), strategy="executorch")
    for copied in (pickle.loads(pickle.dumps(placed.report)), copy.deepcopy(placed.report)):
        assert copied.comparison == placed.report.comparison and copied.comparison


def _placed_or_refused(lowered, strategy, **options):
    try:
        return place_devices(lowered, strategy=strategy, **options).graph_module
    except PlacementError as exc:
        return exc


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    dag=random_dags(),
    seed=st.randoms(use_true_random=False),
    strategy=st.sampled_from(STRATEGIES),
    access=st.booleans(),
    skips=st.tuples(st.booleans(), st.booleans()),
    planning=st.booleans(),
)
def test_the_comparison_equals_placing_each_strategy(dag, seed, strategy, access, skips, planning):
    module, example = dag
    lowered = export_and_lower(module, example, partition="per_node", target_device=None)
    targets = {name: f"cuda:{seed.randrange(3)}" for name in lowered.delegates}
    lowered = export_and_lower(module, example, partition="per_node", target_device=targets)
    options = dict(
        skip_h2d_for_method_inputs=skips[0] and planning,
        skip_d2h_for_method_outputs=skips[1] and planning,
        non_cpu_memory_planning=planning,
        peer_access=access,
    )
    try:
        ours = place_devices(lowered, strategy=strategy, **options)
    except PlacementError:
        return
    placed = {name: _placed_or_refused(lowered, name, **options) for name in STRATEGIES if name != strategy}
    assert ours.report.comparison == build_report(ours, None, placed).comparison


def _held_longer(strategy):
    """A lowered program where `strategy` holds a device value longer than executorch does: dedupe's one copy of x
    and y serves two delegates; peer's direct copy of s reads it on cuda:0 where executorch copied it out at once."""
    if strategy == "dedupe":
        module, example = Fn(lambda x, y: (x @ y, y @ x)), (torch.randn(64, 1), torch.randn(1, 64))
        return export_and_lower(module, example, partition="per_node")
    devices = {"delegate_0": "cuda:0", "delegate_1": "cuda:2", "delegate_2": "cuda:1"}
    return export_and_lower(
        Fn(lambda x, y: (x + x) + (y + y)), inputs(2, (64, 64)), partition="per_node", target_device=devices
    )


@pytest.mark.parametrize("strategy", ["dedupe", "peer"])
def test_the_told_device_peak_follows_a_value_held_longer(strategy):
    lowered = _held_longer(strategy)
    ours = place_devices(lowered, strategy="executorch", peer_access=True)
    (entry,) = [e for e in ours.report.comparison if e["strategy"] == strategy]
    placed = {name: place_devices(lowered, strategy=name, peer_access=True).graph_module for name in ("dedupe", "peer")}
    assert [entry] == [e for e in build_report(ours, None, placed).comparison if e["strategy"] == strategy]
    assert entry["extra_device_bytes"] < 0


class _SharedTranspose(torch.nn.Module):
    """One CPU transpose of a weight read by two delegates: its H2D is constant-derived (hoistable), twice under
    executorch, once under dedupe."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wt = self.w.t()
        return torch.mm(torch.mm(x, wt).cos(), wt)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("hoist", [False, True])
def test_the_comparison_of_hoisted_copies_equals_placing_each_strategy(strategy, hoist):
    lowered = export_and_lower(_SharedTranspose(), inputs(1, (4, 4)), ["mm.default"])
    ours = place_devices(lowered, strategy=strategy, hoist_constants=hoist)
    placed = {
        name: place_devices(lowered, strategy=name, hoist_constants=hoist).graph_module
        for name in STRATEGIES
        if name != strategy
    }
    assert ours.report.comparison == build_report(ours, None, placed).comparison
    dedupe = ours.report.strategy_counts()["dedupe"]
    assert dedupe[0]["h2d"] == (2 if hoist else 3)  # per call: x and cos(...), and the shared transpose unless hoisted
