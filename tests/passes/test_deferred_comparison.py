"""place_devices leaves the report's strategy comparison (the program placed under every other strategy) to the
comparison's first read, and that read gives what placing each strategy gives, with the peer answers the
placement itself got."""

from __future__ import annotations

import copy
import pickle

from placement_helpers import Fn, inputs

from devcopy_lib import SimulatedCudaAllocator, export_and_lower, place_devices
from devcopy_lib.devices import scoped_allocators
from devcopy_lib.passes import placement
from devcopy_lib.passes.report import build_report

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
    assert runs == ["dedupe", "executorch", "peer"]
    report.to_dict()
    assert len(runs) == 3  # placed once, then kept


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
