"""A profiled call as a Chrome/Perfetto trace (runtime/trace.py): one complete event per instruction with the
profile's duration, each device a process with compute and copies tracks, events in order on every track."""

import json
import math
from collections import defaultdict
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_dags import random_dags

from devcopy_lib import chrome_trace, export_and_lower, load_method, models, place_devices, profile_trace, write_trace
from devcopy_lib.bench.cost_model import default_model

COPY_NAMES = {"h2d": "et_copy::_h2d_copy.out", "d2h": "et_copy::_d2h_copy.out", "d2d": "et_copy::_d2d_copy.out"}


def tracks(trace):
    """(pid -> process name, (pid, tid) -> track name) from the metadata events."""
    processes, threads = {}, {}
    for event in trace["traceEvents"]:
        if event["ph"] == "M" and event["name"] == "process_name":
            processes[event["pid"]] = event["args"]["name"]
        elif event["ph"] == "M" and event["name"] == "thread_name":
            threads[(event["pid"], event["tid"])] = event["args"]["name"]
    return processes, threads


def check_structure(trace, rows):
    """What every trace must be: one complete event per profile row, on its track, with the row's duration
    (docs/explorer.md, Exports)."""
    processes, threads = tracks(trace)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(rows)
    assert all(e["ph"] in ("X", "M") for e in trace["traceEvents"])
    by_track = defaultdict(list)
    for event, row in zip(complete, rows, strict=True):
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(event)
        assert math.isclose(event["dur"], row["measured_s"] * 1e6, rel_tol=1e-12)  # the profile's duration
        assert event["args"]["index"] == row["index"] and event["cat"] == row["kind"]
        device, track = processes[event["pid"]], threads[(event["pid"], event["tid"])]
        if row["kind"] == "copy":
            assert (device != "cpu", track) == (True, "copies")
            assert event["name"] == row["op"] == COPY_NAMES[event["args"]["direction"]]
            assert event["args"]["bytes"] == row["bytes"]
        elif row["kind"] == "delegate":
            assert row["op"] == f"delegate {event['name']} on {device}" and track == "compute"
        else:
            assert (device, track) == ("cpu", "compute") and event["name"].endswith(".out")
        by_track[(event["pid"], event["tid"])].append(event)
    for events in by_track.values():  # in order, and never overlapping, on every track
        for before, after in pairwise(events):
            assert before["ts"] + before["dur"] <= after["ts"] + 1e-9
    json.loads(json.dumps(trace, allow_nan=False))  # strict JSON


def _trace(name, **lower):
    module, example = models.MODELS[name]()
    with load_method(place_devices(export_and_lower(module, example, **lower))) as method:
        rows = method.profile(*example, repeat=3, cost_model=default_model())
        return chrome_trace(rows, method.program, 3, "simulated", default_model()), rows, method


def test_copies_and_delegates_sit_on_their_devices_tracks(sim):
    trace, rows, _ = _trace("cpu_between")
    check_structure(trace, rows)
    processes, _ = tracks(trace)
    assert sorted(processes.values()) == ["cpu", "cuda:0"]
    names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert names == [COPY_NAMES["h2d"]] * 2 + ["delegate_0", COPY_NAMES["d2h"], "aten::cumsum.out"] + [
        COPY_NAMES["h2d"]
    ] * 2 + ["delegate_1", COPY_NAMES["d2h"]]
    assert trace["otherData"]["profiled_calls"] == 3 and trace["otherData"]["backend"] == "simulated"
    assert trace["otherData"]["cost_model"] == default_model().source


def test_two_devices_get_two_device_processes_and_each_copy_the_device_it_reaches_or_leaves(sim):
    targets = {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    trace, rows, _ = _trace("back_to_back", delegate_ops=["add.Tensor"], target_device=targets, partition="per_node")
    check_structure(trace, rows)
    processes, _ = tracks(trace)
    assert sorted(processes.values()) == ["cuda:0", "cuda:1"]  # no CPU kernel, no CPU process
    hop = [(e["args"]["direction"], processes[e["pid"]]) for e in trace["traceEvents"] if e.get("cat") == "copy"]
    assert ("d2h", "cuda:0") in hop and ("h2d", "cuda:1") in hop  # the host hop between the delegates


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(dag=random_dags(), times=st.lists(st.tuples(st.floats(1e-7, 1e-2), st.floats(1e-7, 1e-2)), min_size=12))
def test_any_program_and_any_times_give_a_well_formed_trace(dag, times):
    module, example = dag
    with load_method(place_devices(export_and_lower(module, example)), backend="simulated") as method:
        rows = method.profile(*example, repeat=1)
        program = method.program
    rows = [{**row, "measured_s": m, "wall_s": w} for row, (m, w) in zip(rows, times, strict=False)]
    trace = chrome_trace(rows, program)
    check_structure(trace, rows)
    starts = [e["ts"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert starts[0] == 0  # the timeline starts at the first event
    for (start, following), row in zip(pairwise(starts), rows, strict=False):  # each where the last left the host
        assert math.isclose(following - start, max(row["wall_s"], row["measured_s"]) * 1e6, rel_tol=1e-9)


def test_profile_trace_profiles_and_write_trace_writes_strict_json(sim, tmp_path):
    module, example = models.add()
    with load_method(place_devices(export_and_lower(module, example))) as method:
        trace = profile_trace(method, *example, repeat=2)
        assert method.copies_executed == {"h2d": 4, "d2h": 2}  # two profiled calls ran
    assert trace["otherData"]["backend"] == "simulated" and trace["otherData"]["profiled_calls"] == 2
    path = write_trace(trace, str(tmp_path / "t.json"))
    assert json.loads((tmp_path / "t.json").read_text()) == trace and path == str(tmp_path / "t.json")


@pytest.mark.gpu
def test_on_cuda_copies_and_delegates_last_their_device_clock_time():
    module, example = models.cpu_between()
    with load_method(place_devices(export_and_lower(module, example)), backend="cupy") as method:
        rows = method.profile(*example, repeat=5, cost_model=default_model())
        trace = chrome_trace(rows, method.program, 5, "cupy", default_model())
    check_structure(trace, rows)
    device_events = [e for e in trace["traceEvents"] if e.get("cat") in ("copy", "delegate")]
    assert device_events and all(e["args"]["clock"] == "events" for e in device_events)
