"""The built graph view (widgets/static/graph_view.js) driven by a real Python GraphView, in headless Chromium with a
stand-in for the anywidget model (no JupyterLab: tests/browser runs the real one). What the browser asks for (open,
close, reset) goes to the Python view, and what Python sends back (trait changes, patches) reaches the browser in the
order the widget's comm would carry it: the open/close cycles of a big model, panning, the opening overview, the
teaching graphs, "collapse groups", the PNG export and the minimap."""

from __future__ import annotations

import itertools
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from bundle_page import bundle_page
from devcopy_widgets import PlacementExplorer
from devcopy_widgets.graph_view import GraphView
from graph_page import NODE_AT as NODE_AT_IN_ROOT
from graph_page import OUTSIDE_CANVAS

pytestmark = pytest.mark.browser

# DEVCOPY_GRAPH_BUNDLE: another build of the view (an older commit's) to see these tests fail on it
BUNDLE = Path(
    os.environ.get("DEVCOPY_GRAPH_BUNDLE") or Path(__file__).resolve().parents[2] / "widgets/static/graph_view.js"
)
WIDTH = 1100  # px: the graph view's width in a JupyterLab notebook at 1600x1000
PAGE = """<html><body style="margin:0"><div id="host" style="width:WIDTHpx"></div><script type="module">
import view from "./graph_view.js";
window.sent = [];
window.mount = (values) => {
  const handlers = {};
  const model = { get: (k) => values[k], set: (k, v) => { values[k] = v; }, save_changes() {},
    send: (content) => { window.sent.push(content); },
    on: (event, f) => { (handlers[event] ||= []).push(f); }, off() {} };
  const host = document.getElementById("host");
  if (window.cleanup) window.cleanup(); // the last view's graph goes, as when JupyterLab removes a view
  host.replaceChildren();
  window.cleanup = view.render({ model, el: host });
  window.change = (key, value) => { values[key] = value; (handlers[`change:${key}`] || []).forEach((f) => f()); };
  window.custom = (content) => { (handlers["msg:custom"] || []).forEach((f) => f(content, [])); };
  window.root = host.querySelector(".devcopy-graph-view");
  return true;
};
window.ready = true;
</script></body></html>""".replace("WIDTH", str(WIDTH))
NODE_AT = f"(args) => ({NODE_AT_IN_ROOT})(root, args)"  # centred first when off screen
BOX = """(id) => { const b = root.devcopyCy.getElementById(id).boundingBox({includeOverlays: false,
  includeUnderlays: false}); return [b.x1, b.y1, b.x2, b.y2]; }"""
OUTSIDE = f"(which) => ({OUTSIDE_CANVAS})(root, which)"  # the page keeps its view's root in `root`
SYNCED = ("nodes", "elements", "layout_version", "collapsed", "selected", "legend", "counts", "height", "busy")


class Driver:
    """A Python GraphView and its page: `sync()` carries Python's messages and changed traits to the page (revision
    last, as its own message, like the comm after hold_sync), `answer()` hands the page's messages to Python."""

    def __init__(self, tab: Any, view: GraphView) -> None:
        self.tab, self.view, self.outbox = tab, view, []
        view.send = lambda content, buffers=None: self.outbox.append(content)  # type: ignore[method-assign]
        state = {k: getattr(view, k) for k in (*SYNCED, "revision", "copy_kinds", "data_revision")}
        self.pushed = dict(state)
        tab.evaluate("(values) => mount(values)", state)
        self.wait_drawn()

    def wait_drawn(self) -> None:
        self.tab.wait_for_function(
            "(r) => root.dataset.renderDone === String(r) && root.dataset.busy !== 'true'", arg=self.view.revision
        )

    def sync(self, wait: bool = True) -> None:
        for content in self.outbox:
            self.tab.evaluate("(c) => custom(c)", content)
        self.outbox.clear()
        for key in SYNCED:
            value = getattr(self.view, key)
            if value != self.pushed.get(key) and key not in getattr(GraphView, "PATCHED", ()):
                self.tab.evaluate("([k, v]) => change(k, v)", [key, value])
                self.pushed[key] = value
        if self.view.revision != self.pushed["revision"]:
            self.pushed["revision"] = self.view.revision
            self.tab.evaluate("(v) => change('revision', v)", self.view.revision)
        if wait:
            self.wait_drawn()

    def answer(self) -> list[dict]:
        """Hand what the page sent to Python (as the comm would), then sync its answer back."""
        sent = self.tab.evaluate("() => window.sent.splice(0)")
        for content in sent:
            self.view._on_msg(self.view, content, [])
        self.sync()
        return sent

    def node_at(self, node_id: str, where: str = "centre") -> tuple[float, float]:
        return self.tab.evaluate(NODE_AT, [node_id, where])

    def box(self, node_id: str) -> list[float]:
        return self.tab.evaluate(BOX, node_id)

    def data(self, key: str) -> str:
        return self.tab.evaluate("(k) => root.dataset[k]", key)


@pytest.fixture(scope="module")
def tab(tmp_path_factory):
    with bundle_page(tmp_path_factory.mktemp("bundle"), BUNDLE, PAGE, {}) as page:
        page.set_viewport_size({"width": 1600, "height": 1000})  # as tests/browser's JupyterLab page
        yield page


def gpt2_shaped(layers: int, per_part: int = 3) -> tuple[list[dict], list[tuple[str, str]]]:
    """A chain shaped like GPT-2's module tree: embeddings, `layers` blocks of ln_1, attn, ln_2 and mlp, the final
    norm and the head, with a copy in every block."""
    nodes = [{"id": "ids", "label": "ids", "kind": "input", "device": "cpu", "module": ""}]

    def add(name: str, module: str, kind: str = "cpu_op", device: str = "cpu") -> None:
        nodes.append({"id": name, "label": f"{name}\nf32[1,8,64]", "kind": kind, "device": device, "module": module})

    add("wte", "model.transformer.wte")
    add("wpe", "model.transformer.wpe")
    for i in range(layers):
        for part in ("ln_1", "attn", "ln_2", "mlp"):
            for k in range(per_part):
                add(f"h{i}_{part}_{k}", f"model.transformer.h.{i}.{part}", device="cuda:0" if part == "mlp" else "cpu")
        add(f"h{i}_h2d", f"model.transformer.h.{i}.mlp", kind="h2d", device="cuda:0")
    add("ln_f", "model.transformer.ln_f")
    add("head", "model.lm_head")
    add("output", "", kind="output")
    edges = [(a["id"], b["id"]) for a, b in zip(nodes, nodes[1:], strict=False)]
    return nodes, edges


def layers_as_boxes(view: GraphView, layers: int) -> None:
    """The layers h.0 .. h.n-1 as boxes inside the open transformer (as a user who opened model.transformer sees)."""
    view.collapsed = sorted(g for g in view._groups if g.startswith("model.transformer.h.") or g == "model.lm_head")
    view._redraw()


def overlapping(a: list[float], b: list[float]) -> float:
    """How far two boxes (x1, y1, x2, y2) overlap on the axis they overlap least (0 when apart)."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0]), 0.0) and max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def test_a_layer_box_stays_put_over_six_open_close_cycles_and_each_box_opens_its_layer(tab):
    view = GraphView(*gpt2_shaped(12))
    layers_as_boxes(view, 12)
    page = Driver(tab, view)
    layer = "group:model.transformer.h.10"
    first = page.box(layer)
    for cycle in range(6):
        tab.mouse.click(*page.node_at(layer))
        assert page.answer() == [{"action": "open", "group": layer}], cycle
        frame = page.box(layer)
        inside = set(tab.evaluate(f"() => root.devcopyCy.getElementById('{layer}').descendants().map((n) => n.id())"))
        around = set(tab.evaluate(f"() => root.devcopyCy.getElementById('{layer}').ancestors().map((n) => n.id())"))
        for other in tab.evaluate("() => root.devcopyCy.nodes().map((n) => n.id())"):
            if other not in inside | around | {layer}:
                assert overlapping(frame, page.box(other)) == 0, f"the open frame overlaps {other} (cycle {cycle})"
        tab.mouse.dblclick(*page.node_at(layer, "left-edge"))
        assert page.answer()[-1] == {"action": "close", "group": layer}, cycle
        assert page.box(layer) == pytest.approx(first, abs=0.5), f"the box moved after {cycle + 1} cycles"
    for i in range(12):  # a click on each layer's box, where it is drawn, opens that layer
        at = page.node_at(f"group:model.transformer.h.{i}")
        tab.mouse.click(*at)
        tab.wait_for_function("() => window.sent.length > 0", timeout=5000)
        assert tab.evaluate("() => window.sent.splice(0)") == [
            {"action": "open", "group": f"group:model.transformer.h.{i}"}
        ]
        tab.wait_for_timeout(350)  # no double click with the next box's click


def drag(tab, start: tuple[float, float], by: tuple[float, float]) -> None:
    tab.mouse.move(*start)
    tab.mouse.down()
    tab.mouse.move(start[0] + by[0], start[1] + by[1], steps=8)
    tab.mouse.up()


def test_a_drag_on_a_frame_or_a_node_pans_and_a_click_still_selects(tab):
    view = GraphView(*gpt2_shaped(2))
    view.collapsed = []
    view._redraw()
    page = Driver(tab, view)
    for start in ("group:model.transformer.h.1", "h1_attn_1"):
        pan = tab.evaluate("() => root.devcopyCy.pan()")
        drag(tab, page.node_at(start, "left-edge" if start.startswith("group:") else "centre"), (60, -40))
        moved = tab.evaluate("() => root.devcopyCy.pan()")
        assert (moved["x"] - pan["x"], moved["y"] - pan["y"]) == pytest.approx((60, -40), abs=2), start
        assert tab.evaluate("() => window.sent.splice(0)") == []  # a drag opens or closes nothing
    tab.mouse.click(*page.node_at("h1_attn_1"))
    tab.wait_for_function("() => root.dataset.selected === 'h1_attn_1'")


def test_gpt2_shaped_opens_on_its_top_level_whole_and_readable_and_fit_shows_it_again(tab):
    view = GraphView(*gpt2_shaped(12))
    page = Driver(tab, view)
    opened = tab.evaluate(OUTSIDE, "all")
    assert opened["out"] == [] and opened["small"] == [], opened
    tab.evaluate("() => { root.devcopyCy.zoom(3); root.devcopyCy.pan({x: -900, y: 40}); }")
    tab.click(".dgv-fit")
    fitted = tab.evaluate(OUTSIDE, "all")
    assert fitted["out"] == [] and fitted["small"] == [] and page.data("collapsed") == str(len(view.collapsed))


@pytest.mark.parametrize(
    "make",
    [
        lambda: PlacementExplorer(model="shared_input", partition="per_node"),  # 00_tour
        lambda: PlacementExplorer(model="cpu_between"),  # 01_placement
    ],
    ids=["00_tour", "01_placement"],
)
def test_the_teaching_graphs_open_with_every_node_inside_the_canvas(tab, make):
    page = Driver(tab, make().graph)
    shown = tab.evaluate(OUTSIDE, "all")
    assert shown["out"] == [], shown
    assert page.data("renderDone")


def test_collapse_groups_lays_out_at_once_and_every_relayout_shows_everything(tab):
    view = GraphView(*gpt2_shaped(12))
    view.collapsed = []
    view._redraw()
    page = Driver(tab, view)
    tab.evaluate("() => { root.devcopyCy.zoom(2.5); root.devcopyCy.pan({x: -2000, y: -3000}); }")  # far away
    full = int(page.data("fullLayouts"))
    tab.click(".dgv-reset")
    page.answer()
    assert int(page.data("fullLayouts")) == full + 1
    assert tab.evaluate(OUTSIDE, "all")["out"] == []
    items = tab.evaluate("() => root.devcopyCy.nodes(':childless').map((n) => n.id())")
    boxes = {i: page.box(i) for i in items}
    for a in items:
        for b in items:
            assert a == b or overlapping(boxes[a], boxes[b]) == 0, (a, b)
    tab.evaluate("() => { root.devcopyCy.zoom(2.5); root.devcopyCy.pan({x: -2000, y: -3000}); }")
    tab.click(".dgv-tidy")
    tab.wait_for_function(f"() => Number(root.dataset.fullLayouts) === {full + 2}")
    assert tab.evaluate(OUTSIDE, "all")["out"] == []


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_png_of_a_graph_too_big_for_one_canvas_at_2x_is_not_empty_and_says_its_scale(tab):
    wide = "x" * 560  # a long label: the chain is ~4,100 units wide and ~20,000 tall
    nodes = [
        {"id": f"n{i}", "label": f"n{i} {wide}", "kind": "cpu_op", "device": "cpu", "module": ""} for i in range(260)
    ]
    page = Driver(tab, GraphView(nodes, [(f"n{i}", f"n{i + 1}") for i in range(259)]))
    bb = tab.evaluate("() => root.devcopyCy.elements().boundingBox()")
    assert bb["w"] * bb["h"] * 4 > 2**28  # over Chromium's canvas area at twice the resolution: today's 0-byte file
    with tab.expect_download() as png:
        tab.click(".dgv-png")
    width, height = png_size(Path(png.value.path()).read_bytes())
    scale = float(page.data("exportScale"))
    assert scale < 2 and 0 < width * height <= 2**28
    assert height == pytest.approx(bb["h"] * scale, abs=2)
    assert f"scale {scale:g}" in tab.inner_text(".dgv-export-note")


def page_data(tab) -> list:
    return tab.evaluate("() => [root.devcopyData.nodes, root.devcopyData.elements, root.devcopyData.revision]")


def test_a_change_sends_only_what_changed_and_the_page_follows_it_also_after_a_missed_patch(tab):
    nodes, edges = gpt2_shaped(12)
    view = GraphView(nodes, edges)
    view.collapsed = []
    view._redraw()
    page = Driver(tab, view)
    whole = len(json.dumps([view.nodes, view.elements]))
    changed = {"device": "cuda:0"}
    view.update_nodes({"h3_mlp_0": {"device": "cpu", "kind": "cpu_op"}, "h4_attn_1": changed})
    [patch] = page.outbox
    assert patch["kind"] == "graph_patch" and patch["base"] == view.revision - 1 and patch["revision"] == view.revision
    # the fields that changed, not the nodes (h3_mlp_0 was a cpu_op already)
    assert patch["nodes"]["update"] == [["h3_mlp_0", {"device": "cpu"}], ["h4_attn_1", changed]]
    assert patch["nodes"]["order"] is None and patch["elements"]["order"] is None
    assert len(json.dumps(patch)) < whole / 50
    page.sync()
    assert page_data(tab) == [view.nodes, view.elements, view.revision]
    assert tab.evaluate("() => root.devcopyCy.getElementById('h4_attn_1').data('device')") == "cuda:0"

    view.show([{**n, "device": "cuda:0"} for n in nodes if n["id"] != "h5_ln_2_1"], edges[:40])  # a new node set
    assert page.outbox[-1]["nodes"]["remove"] == ["h5_ln_2_1"] and page.outbox[-1]["nodes"]["order"]
    page.sync()
    assert page_data(tab) == [view.nodes, view.elements, view.revision]

    view.update_nodes({"h3_mlp_0": {"device": "cuda:0"}})
    page.outbox.clear()  # this patch never reaches the page
    view.update_nodes({"h3_mlp_1": {"device": "cpu"}})
    page.sync(wait=False)  # the next one does not start where the page is: it asks for everything
    assert page.answer() == [{"action": "resync"}]
    tab.wait_for_function(f"() => root.devcopyData.revision === {view.revision}")
    assert page_data(tab) == [view.nodes, view.elements, view.revision]
    tab.wait_for_function(f"() => root.dataset.renderDone === '{view.revision}'")


def test_the_minimap_shows_where_the_view_is_and_a_click_on_it_moves_the_view_there(tab):
    view = GraphView(*gpt2_shaped(12))
    view.collapsed = []
    view._redraw()
    Driver(tab, view)
    tab.evaluate("() => { const cy = root.devcopyCy; cy.zoom(2); cy.pan({x: 0, y: 0}); }")  # the top left corner
    tab.wait_for_timeout(100)
    mini = tab.locator(".dgv-minimap")
    before = [float(v) for v in mini.get_attribute("data-view").split(",")]
    box = mini.bounding_box()
    tab.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] * 0.75)
    tab.wait_for_timeout(100)
    after = [float(v) for v in mini.get_attribute("data-view").split(",")]
    assert after != before
    centre = (after[0] + after[2] / 2, after[1] + after[3] / 2)
    assert centre == pytest.approx((box["width"] / 2, box["height"] * 0.75), abs=2)


# From a click until the view drew again: when a 10 ms timer ran on the page's main thread, and the dataset after.
FREEZE_DURING = """async ([selector, before]) => {
  const ticks = [performance.now()];
  const tick = setInterval(() => ticks.push(performance.now()), 10);
  document.querySelector(selector).click();
  while (Number(root.dataset.fullLayouts) === before) await new Promise((r) => setTimeout(r, 10));
  clearInterval(tick);
  ticks.push(performance.now());
  return {ticks, ...root.dataset};
}"""


def longest_pause(result: dict, within: str | None = None) -> float:
    """The longest the page's main thread went without running its timer (ms), over the whole action or only while
    the worker ran dagre (`within="worker"`: from the request to the answer, data-worker-at)."""
    ticks = result["ticks"]
    if within:
        start, end = map(float, result["workerAt"].split(","))
        ticks = [start, *(t for t in ticks if start < t < end), end]
    return max(b - a for a, b in itertools.pairwise(ticks))


def test_tidy_layout_of_a_big_graph_runs_dagre_off_the_main_thread(tab):
    nodes = [
        {"id": f"n{i}", "label": f"n{i}\nop", "kind": "cpu_op", "device": "cpu", "module": ""} for i in range(1200)
    ]
    chains = [(f"n{i}", f"n{i + 40}") for i in range(1160)]  # 40 chains of 30, crossing every 7th step
    edges = chains + [(f"n{i}", f"n{i + 41}") for i in range(0, 1159, 7)]
    page = Driver(tab, GraphView(nodes, edges))  # 1,200 nodes and no module: all of them shown
    assert page.data("layoutWhere") == "worker", json.dumps(tab.evaluate("() => ({...root.dataset})"))
    result = tab.evaluate(FREEZE_DURING, [".dgv-tidy", int(page.data("fullLayouts"))])
    dagre = float(result["dagreMs"])
    assert result["layoutWhere"] == "worker" and dagre > 300, result  # dagre's own time, in the worker
    paused = longest_pause(result, "worker")
    assert paused < 0.6 * dagre, [paused, dagre]  # the page ran on while dagre worked (on 2 busy cores, not always)
    assert longest_pause(result) < 0.8 * dagre + 1000, result  # applying the positions and drawing them
    assert tab.evaluate("() => root.devcopyCy.nodes().length") == 1200


def test_a_96_layer_model_opened_whole_is_laid_out_module_by_module_in_the_worker(tab):
    nodes, edges = gpt2_shaped(96)
    view = GraphView(nodes, edges)
    view.collapsed = []
    view._redraw()
    page = Driver(tab, view)  # 1,254 nodes in 96 layer frames, chained: too deep for one dagre run in a worker
    result = tab.evaluate(FREEZE_DURING, [".dgv-tidy", int(page.data("fullLayouts"))])
    assert result["layoutWhere"] == "worker" and "workerError" not in result, result
    paused = longest_pause(result, "worker")
    assert paused < 0.6 * float(result["dagreMs"]), [paused, result["dagreMs"]]  # the page ran on meanwhile
    layers = [page.box(f"group:model.transformer.h.{i}") for i in range(96)]
    for upper, lower in zip(layers, layers[1:], strict=False):
        assert upper[3] <= lower[1], "layer frames overlap or run out of order"
    assert tab.evaluate(OUTSIDE, "top")["out"] == []


def test_a_layer_with_inputs_beside_it_opens_and_closes_in_place_without_a_new_layout(tab):
    """GPT-2's layers have nodes beside them (constants, copies) that reach past a layer box's bottom: opening moves
    them aside, closing moves them back, and neither lays out the whole graph again."""
    nodes, edges = gpt2_shaped(12)
    for i in range(12):  # a constant of the transformer read in the middle of each layer
        nodes.append(
            {"id": f"c{i}", "label": f"c{i}\nf32[64]\nconst", "kind": "input", "device": "cpu", "module": "model"}
        )
        edges.append((f"c{i}", f"h{i}_attn_1"))
    view = GraphView(nodes, edges)
    layers_as_boxes(view, 12)
    page = Driver(tab, view)
    layer = "group:model.transformer.h.6"
    first, full = page.box(layer), page.data("fullLayouts")
    for _ in range(3):
        # braces: emit returns the element, and Playwright would serialize it with the whole graph it points to
        tab.evaluate(f"() => {{ root.devcopyCy.getElementById('{layer}').emit('tap'); }}")
        page.answer()
        tab.evaluate(f"() => {{ root.devcopyCy.getElementById('{layer}').emit('dbltap'); }}")
        page.answer()
        assert page.box(layer) == pytest.approx(first, abs=0.5)
    assert page.data("fullLayouts") == full


def test_a_layout_from_the_worker_moves_the_elements_that_stay_instead_of_adding_them_anew(tab):
    """Re-adding every element made cytoscape restyle and measure each label again on the main thread (seconds on a
    96-layer model); the worker's positions now move the elements the view already has."""
    view = GraphView(*gpt2_shaped(12))
    view.collapsed = []
    view._redraw()
    page = Driver(tab, view)  # 171 items: laid out in the worker
    mark = "() => { const cy = root.devcopyCy; cy.nodes().forEach((n) => { n.scratch('kept', true); }); }"
    tab.evaluate(mark)
    tab.evaluate("() => { root.devcopyCy.nodes(':childless').positions(() => ({x: 0, y: 0})); }")  # all in a heap
    result = tab.evaluate(FREEZE_DURING, [".dgv-tidy", int(page.data("fullLayouts"))])
    assert result["layoutWhere"] == "worker", result
    assert tab.evaluate("() => root.devcopyCy.nodes().filter((n) => !n.scratch('kept')).length") == 0
    boxes = {i: page.box(i) for i in tab.evaluate("() => root.devcopyCy.nodes(':childless').map((n) => n.id())")}
    assert len(boxes) == len(view.nodes)
    for a, b in itertools.combinations(boxes, 2):  # laid out again: out of the heap
        assert overlapping(boxes[a], boxes[b]) == 0, (a, b)


def test_a_new_delegate_set_keeps_the_open_groups_and_the_layer_boxes_where_they_were(tab):
    """A new delegate set of the same model renames some nodes (a delegate) and recolours others: the layers the
    user sees as boxes stay boxes, in place, and the page lays out nothing anew."""
    nodes, edges = gpt2_shaped(12)
    view = GraphView(nodes, edges)
    layers_as_boxes(view, 12)
    page = Driver(tab, view)
    collapsed, full = list(view.collapsed), page.data("fullLayouts")
    before = {i: page.box(f"group:model.transformer.h.{i}") for i in range(12)}
    renamed = {"h3_mlp_0": "delegate_0", "h7_attn_2": "delegate_1"}
    moved = [{**n, "id": renamed.get(n["id"], n["id"]), "device": "cpu"} for n in nodes]
    view.show(moved, [tuple(renamed.get(x, x) for x in e) for e in edges])
    page.sync()
    assert view.collapsed == collapsed and page.data("fullLayouts") == full
    for i in range(12):
        assert page.box(f"group:model.transformer.h.{i}") == pytest.approx(before[i], abs=0.5), i


def test_the_copy_list_is_made_again_only_when_the_nodes_change(tab):
    """Opening or closing a group leaves the nodes as they were: the list of copies (a row per copy, hundreds on a
    big model) stays as it is instead of being made again at each drawing."""
    view = GraphView(*gpt2_shaped(12))
    layers_as_boxes(view, 12)
    page = Driver(tab, view)
    table = "root.querySelector('.dgv-copies table')"
    tab.evaluate(f"() => {{ {table}.dataset.probe = 'kept'; }}")
    view.open_group("model.transformer.h.3")
    page.sync()
    view.close_group("model.transformer.h.3")
    page.sync()
    assert tab.evaluate(f"() => {table}.dataset.probe") == "kept"
    view.update_nodes({"h3_h2d": {"bytes": 4096, "bytes_text": "4.0 KiB"}})
    page.sync()
    assert tab.evaluate(f"() => {table}.dataset.probe") is None
    assert "4.0 KiB" in tab.evaluate(f"() => {table}.textContent")
