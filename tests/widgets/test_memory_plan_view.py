"""The memory-plan picture beside the explorer's graph (widgets/memory_plan_view.py): the SVG Python draws (one
rectangle per tensor, named on hover, picked when selected), and the explorer's two-way link between a clicked
tensor and the graph node that writes it."""

from __future__ import annotations

import re

import pytest
import torch
from control_flow_models import PLACED, MapTwoInputs

pytest.importorskip("anywidget", reason="needs the lab extra (anywidget)")
from devcopy_widgets import PlacementExplorer  # noqa: E402
from devcopy_widgets.memory_plan_view import LANE_HEIGHT, MemoryPlanView, picture_svg  # noqa: E402

from devcopy_lib.memory_lanes import Block, Lane, MemoryPicture  # noqa: E402

A = Block(0, "v0 float32[4] 16 B (input)", 0, 16, 0, 1, node="x")
B = Block(1, "v1 float32[8] 32 B (#1 aten::add.out)", 16, 32, 1, 3, node="add")
PICTURE = MemoryPicture(4, (Lane(1, "cpu", 48, (A, B)), Lane(2, "cuda:0", 64, (Block(2, "v2 <&>", 0, 64, 2, 4),))))


def _rects(svg: str) -> list[dict]:
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', tag)) for tag in re.findall(r"<rect ([^>]*)>", svg)]


def test_one_rectangle_per_tensor_placed_by_offset_and_lifetime():
    svg = picture_svg(PICTURE)
    blocks = [r for r in _rects(svg) if r["class"].startswith("dmp-block")]
    assert [r["data-value"] for r in blocks] == ["0", "1", "2"]
    a, b, _ = blocks
    assert float(a["height"]) == pytest.approx(LANE_HEIGHT / 3, rel=1e-3)  # 16 of 48 bytes
    assert float(b["y"]) - float(a["y"]) == pytest.approx(LANE_HEIGHT / 3, abs=0.2)  # at offset 16
    assert float(b["x"]) > float(a["x"]) and float(b["width"]) > float(a["width"])  # lives 1..3, a 0..1
    assert (a["data-node"], b["data-node"]) == ("x", "add")
    assert (
        "<title>v1 float32[8] 32 B (#1 aten::add.out)\nbytes 16..48 of buffer 1 (cpu)\nlive at instructions 1..3" in svg
    )
    assert "v2 &lt;&amp;&gt;" in svg and "cuda:0 · buffer 2 · 64 B · 1 tensors" in svg


def picked(svg: str) -> list[str]:
    return [r["data-value"] for r in _rects(svg) if "dmp-picked" in r.get("class", "")]


def test_the_selected_value_and_a_graph_nodes_blocks_are_picked():
    assert picked(picture_svg(PICTURE)) == []
    assert picked(picture_svg(PICTURE, selected="1")) == ["1"]
    assert picked(picture_svg(PICTURE, node="x")) == ["0"]


def test_an_empty_plan_says_so():
    assert "no planned memory" in picture_svg(MemoryPicture(3, ()))


def test_a_click_names_the_graph_node_and_a_gone_value_is_dropped():
    view = MemoryPlanView()
    view.show(PICTURE)
    view.selected = "1"
    assert view.selected_node == "add" and 'dmp-picked" data-value="1"' in view.svg
    view.selected = "2"
    assert view.selected_node == ""
    view.show(MemoryPicture(4, (Lane(1, "cpu", 48, (A,)),)))
    assert view.selected == "" and view.summary == "cpu: buffer 1, 1 tensor in 48 B"
    view.show_error("memory plan not drawn: because")
    assert view.picture is None and "because" in view.svg


def test_the_explorer_links_the_picture_and_the_graph_both_ways():
    explorer = PlacementExplorer(model="cpu_between")
    assert explorer.error is None
    assert explorer.memory.summary.startswith("cpu: buffer 1, 5 tensors in 192 B · cuda:0: buffer 2")
    block = next(b for lane in explorer.memory.picture.lanes for b in lane.blocks if b.node == "sin")
    explorer.memory.selected = str(block.value)  # a click on the delegate's output
    assert explorer.graph.selected == "sin"
    explorer.graph.selected = "cumsum"
    assert re.search(r'dmp-picked" data-value="\d+" data-node="cumsum"', explorer.memory.svg)
    explorer.strategy.value = "dedupe"  # a new placement, a new plan
    assert explorer.memory.summary.startswith("cpu: buffer 1, 5 tensors in 128 B")


def test_a_program_without_a_plan_keeps_its_graph_and_says_why_in_the_plans_place():
    """map over two inputs is placed like ExecuTorch places it, but emit refuses it (as ExecuTorch's emitter does):
    there is no plan to draw."""
    explorer = PlacementExplorer.for_model(MapTwoInputs(), (torch.randn(3, 4), torch.randn(3, 4)), name="map2")
    assert explorer.error is None and any(n["kind"] == "delegate" for n in explorer.graph.nodes)
    assert explorer.memory.picture is None
    assert explorer.memory.summary.startswith("memory plan not drawn: ") and "control_flow.map" in explorer.memory.svg


def test_a_cond_programs_plan_is_drawn_with_both_branches():
    model, inputs, _ = PLACED["cond"]
    explorer = PlacementExplorer.for_model(model, inputs, name="cond")
    nodes = {b.node for lane in explorer.memory.picture.lanes for b in lane.blocks}
    assert {"sin", "cos", "getitem"} <= nodes
