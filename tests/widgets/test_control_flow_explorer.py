"""The explorer on a program with control flow (docs/explorer.md): the construct and its branch submodules carry
their branch label on the node and in the inspector, with the copies a call taking each branch needs and the branch
the example inputs take; a trace says which branch the last traced call ran."""

from __future__ import annotations

import json

import pytest
import torch
from control_flow_models import PLACED
from devcopy_widgets import PlacementExplorer


def _explorer(name):
    model, inputs, _ = PLACED[name]
    return PlacementExplorer.for_model(model, inputs, name=name)


def _node(explorer, name):
    return next(n for n in explorer.graph.nodes if n["id"] == name)


def test_branch_nodes_carry_their_label_and_the_copies_around_them():
    explorer = _explorer("cond")
    true, false = _node(explorer, "true_graph_0"), _node(explorer, "false_graph_0")
    assert "true branch of cond" in true["label"] and "false branch of cond" in false["label"]
    assert true["branch"] == "true branch of cond: 1 ops on the CPU, 1 H2D + 1 D2H around it"
    assert ("branch", true["branch"]) in true["rows"]  # the inspector's rows


@pytest.mark.parametrize(("sign", "taken"), [(1.0, "true"), (-1.0, "false")])
def test_the_construct_says_which_branch_the_example_inputs_take(sign, taken):
    explorer = PlacementExplorer.for_model(PLACED["cond_then_add"][0], (torch.full((4,), sign),), name="cond")
    cond = _node(explorer, "cond")
    assert cond["branch"].endswith(f"the example inputs take {taken}") and ("branch", cond["branch"]) in cond["rows"]
    report = explorer.placed.report
    assert report.control_flow[0]["example"] == taken and report.control_flow[0]["branches"]["true"]["ops"] == 1


def test_a_loop_says_its_iterations():
    explorer = _explorer("map")
    assert _node(explorer, "map_impl")["branch"].endswith("the example inputs take body, 3 iterations")
    assert "body branch of map_impl" in _node(explorer, "body_graph_0")["label"]


def test_the_trace_says_the_branch_the_last_call_ran(tmp_path, sim):
    explorer = _explorer("cond_then_add")
    path = explorer.export_trace(str(tmp_path / "cond.json"), calls=2)
    x = PLACED["cond_then_add"][1][0]
    taken = "true" if x.sum() > 0 else "false"
    assert f"cond ran {taken}" in explorer.export_note.value
    assert explorer.last_branches[0]["branch"] == taken
    events = json.loads(open(path).read())["traceEvents"]
    branches = {e["args"].get("branch") for e in events if "args" in e and e.get("ph") == "X"}
    assert f"cond.{taken}" in branches and f"cond.{'false' if taken == 'true' else 'true'}" not in branches


def test_a_program_without_control_flow_has_no_branch_rows():
    from devcopy_lib import export_and_lower, place_devices

    class Add(torch.nn.Module):
        def forward(self, a, b):
            return a + b

    placed = place_devices(export_and_lower(Add(), (torch.randn(2), torch.randn(2))))
    assert placed.report.control_flow == [] and placed.report.control_flow_lines() == []
