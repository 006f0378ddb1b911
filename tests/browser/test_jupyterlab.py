"""The workbench in a real browser: JupyterLab runs 00_tour, the explorer's graph view follows a strategy change,
zooms, pans and inspects a clicked node (also after the notebook scrolled), its memory-plan picture selects the node
of a clicked tensor, the registration panel shows `Missing operator` once device_copy_ops_aten_lib is unlinked, a
timing run plots, and a real model opens in the explorer. GPT-2 12-layer opens readable, its groups collapse and
open, search, copy stepping, the keyboard, the export buttons and JupyterLab's dark theme work on it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from graph_page import (
    OUTSIDE_CANVAS,
    brightness,
    change_theme,
    data,
    labels_shown,
    node_at,
    run_all_cells,
    run_in_kernel,
    run_new_cell,
    scroll_notebook,
    wait_for_data,
    wait_in_kernel,
    write_notebook,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "workbench.png"


def wait_for_text(locator, text: str, timeout: int = 60_000) -> str:
    """Wait until `locator` contains `text`; return its text (textContent: cells off screen are not laid out)."""
    locator.filter(has_text=text).wait_for(state="attached", timeout=timeout)
    return locator.text_content()


def check_memory_plan(page, explorer, graph) -> None:
    """The memory-plan picture beside the graph shows the kernel's blocks, and a click on one selects the graph node
    that writes it."""
    value, node, blocks = json.loads(
        run_in_kernel(
            page,
            (
                "import json; m = explorer.memory.picture; shown = [b for l in m.lanes for b in l.blocks if b.nbytes]\n"
                "b = next(b for b in shown if b.node and b.node != explorer.graph.selected)\n"
                "print(json.dumps([str(b.value), b.node, len(shown)]))"
            ),
        )
    )
    plan = explorer.locator(".devcopy-memory-plan")
    plan.scroll_into_view_if_needed()
    assert plan.get_attribute("data-blocks") == str(blocks)
    plan.locator(f'.dmp-block[data-value="{value}"]').click()
    wait_for_data(page, graph, f"d.selected === {json.dumps(node)}")
    assert wait_in_kernel(page, "print(explorer.graph.selected)", node) == node


def test_tour_runs_and_its_widgets_react(page, lab, artifacts):
    run_all_cells(page, lab, "00_tour.ipynb")
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']")
    assert errors.count() == 0, errors.all_inner_texts()
    page.screenshot(path=artifacts / "tour-run.png")

    explorer = page.locator(".devcopy-placement")
    explorer.scroll_into_view_if_needed()
    totals = explorer.locator(".devcopy-totals")
    assert "H2D 4" in wait_for_text(totals, "strategy executorch")
    graph = explorer.locator(".devcopy-graph-view")
    wait_for_data(page, graph, "d.kinds && JSON.parse(d.kinds).h2d === 4")
    layouts = data(graph, "layouts")
    explorer.locator(".devcopy-strategy select").select_option("dedupe")
    assert "H2D 2" in wait_for_text(totals, "strategy dedupe")
    wait_for_data(page, graph, "JSON.parse(d.kinds).h2d === 2")
    assert data(graph, "layouts") == layouts + 1
    expected = json.loads(
        run_in_kernel(
            page,
            (
                "import json, collections; g = explorer.placed.graph_module.graph; rows = explorer.placed.report.rows\n"
                "print(json.dumps([len(rows), sum(len(n.all_input_nodes) for n in g.nodes), "
                "collections.Counter(r.device for r in rows)]))"
            ),
        )
    )
    assert [data(graph, "nodes"), data(graph, "edges"), data(graph, "devices")] == expected
    check_zoom_pan_and_inspector(page, graph, "explorer")
    check_clicks_after_scrolling(page, graph)
    # a second view of the same graph at the notebook's end: drawn before it was on the page, so cytoscape's own
    # scroll listeners miss the notebook's scroller (the bug this checks fails here without the view's re-reading)
    run_new_cell(page, "explorer.graph")
    again = page.locator(".devcopy-graph-view").last
    wait_for_data(page, again, "d.renderDone")
    check_clicks_after_scrolling(page, again)
    check_memory_plan(page, explorer, graph)
    explorer.screenshot(path=artifacts / "placement-dedupe.png")
    check_report_and_trace_exports(explorer, lab.root)

    registration = page.locator(".devcopy-registration")
    registration.scroll_into_view_if_needed()
    registration.locator(".devcopy-mode button", has_text="aten").click()
    copy_lib = registration.locator(".devcopy-lib-device_copy_ops_aten_lib input[type=checkbox]")
    copy_lib.wait_for()
    copy_lib.uncheck()
    registration.locator(".devcopy-load").click()
    outcome = wait_for_text(registration.locator(".devcopy-outcome"), "Missing operator")
    assert "Missing operator: [0] et_copy::_h2d_copy.out" in outcome
    assert "To fix: link device_copy_ops_aten_lib" in outcome
    registration.screenshot(path=artifacts / "registration-missing-operator.png")

    timing = page.locator(".devcopy-timing")
    timing.scroll_into_view_if_needed()
    timing.locator("input[type=text]").first.fill("4K,16K")
    timing.locator("input[type=text]").first.press("Enter")
    timing.locator(".devcopy-run").click()
    wait_for_text(timing, "4 KiB..16 KiB")  # this run's own status: the tour's earlier run (4K..64K) also says "done"
    assert timing.locator(".jp-OutputArea-output img").count() == 1  # the plot, redrawn into the panel's Output
    assert timing.locator(".devcopy-table tbody tr").count() > 0
    timing.screenshot(path=artifacts / "copy-timings.png")

    check_a_real_model_and_its_module_groups(page, artifacts)


def check_report_and_trace_exports(explorer, folder: Path) -> None:
    """ "export report" writes a self-contained HTML page of the shown placement and "export trace" a Chrome/Perfetto
    trace of profiled calls, both into the notebook's folder, and the explorer says where each went."""
    note = explorer.locator(".devcopy-export")
    explorer.locator("button", has_text="export report").click()
    report = folder / wait_for_text(note, "report written to").split("report written to ", 1)[1].strip()
    page_text = report.read_text()
    assert page_text.lstrip().lower().startswith("<!doctype html") and "http://" not in page_text
    assert "dedupe" in page_text  # the strategy on screen
    explorer.locator("button", has_text="export trace").click()
    trace = folder / wait_for_text(note, "profiled calls written to").split("written to ", 1)[1].strip()
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("ph") == "X" and e["name"] == "et_copy::_h2d_copy.out" for e in events)


def check_zoom_pan_and_inspector(page, graph, explorer: str) -> None:
    """Wheel zooms, a drag on the background pans, and a click on a copy fills the inspector and Python's
    `selected` (`explorer` names the notebook's PlacementExplorer)."""
    graph.scroll_into_view_if_needed()
    page.wait_for_timeout(400)  # cytoscape ignores the wheel for 250 ms after the page scrolled
    box = graph.locator(".dgv-canvas").bounding_box()
    zoom = data(graph, "zoom")
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for _ in range(4):  # one wheel notch zooms by a few percent
        page.mouse.wheel(0, -300)
    wait_for_data(page, graph, f"Number(d.zoom) > {zoom * 1.1}")
    pan = [float(v) for v in graph.get_attribute("data-pan").split(",")]
    page.mouse.move(box["x"] + 6, box["y"] + 6)  # a corner: background, not a node
    page.mouse.down()
    page.mouse.move(box["x"] + 126, box["y"] + 86, steps=6)
    page.mouse.up()
    moved = [float(v) for v in graph.get_attribute("data-pan").split(",")]
    assert moved[0] - pan[0] == pytest.approx(120, abs=2) and moved[1] - pan[1] == pytest.approx(80, abs=2)
    graph.locator(".dgv-fit").click()
    copy = graph.evaluate("(root) => root.devcopyCy.nodes('.h2d')[0].id()")
    page.mouse.click(*node_at(graph, copy))
    inspector = graph.locator(".dgv-inspector")
    assert inspector.locator(".dgv-title").text_content() == copy
    assert inspector.locator(".dgv-row-kind td").text_content() == "h2d"
    assert inspector.locator(".dgv-row-bytes td").text_content().endswith(" B")
    assert " to cuda:0 for " in inspector.locator(".dgv-row-reason td").text_content()
    assert wait_in_kernel(page, f"print({explorer}.graph.selected)", copy) == copy


def check_clicks_after_scrolling(page, graph) -> None:
    """The notebook scrolls (its own element, not the window), then a click on a node inspects that node: the view
    re-reads where its canvas is rather than trusting the position it had before the scroll."""
    graph.scroll_into_view_if_needed()
    leaves = graph.evaluate("(r) => r.devcopyCy.nodes(':childless').not('.group').map((n) => n.id())")
    for dy, node in zip((200, -140, 90), (leaves[0], leaves[-1], leaves[len(leaves) // 2]), strict=True):
        scroll_notebook(page, dy)
        page.wait_for_timeout(150)
        x, y = node_at(graph, node)
        if not 0 < y < 1000:  # scrolled past: bring the graph back, then scroll by dy again
            graph.scroll_into_view_if_needed()
            scroll_notebook(page, dy // 2)
            x, y = node_at(graph, node)
        page.mouse.click(x, y)
        wait_for_data(page, graph, f"d.selected === '{node}'")
        assert graph.locator(".dgv-inspector .dgv-title").text_content() == node


REAL_MODEL = (
    "from devcopy_lib import models\nreal = PlacementExplorer.for_model(*models.gpt2_2l(), name='gpt2_2l')\nreal"
)
GROUP, INSIDE, COPY = "model.transformer.h.0.ln_1", "getitem", "inputs_0_h2d"


def check_a_real_model_and_its_module_groups(page, artifacts) -> None:
    """A real model opens in a new explorer (a cell added to the open notebook: no second kernel); a module group
    closed from Python shows as one box, a click on the box opens it again, and search finds a copy."""
    run_new_cell(page, REAL_MODEL)
    explorer = page.locator(".devcopy-placement").nth(1)
    graph = explorer.locator(".devcopy-graph-view")
    graph.wait_for(state="attached")
    wait_for_data(page, graph, "Number(d.layouts) > 0 && d.collapsed === '0'", timeout=120_000)
    graph.scroll_into_view_if_needed()
    page.wait_for_timeout(400)  # the page settles before a click is aimed at a node
    run_in_kernel(page, f"real.graph.close_group('{GROUP}')")
    wait_for_data(page, graph, "d.collapsed === '1'")
    assert node_at(graph, INSIDE) is None
    graph.scroll_into_view_if_needed()
    page.wait_for_timeout(400)
    page.mouse.click(*node_at(graph, f"group:{GROUP}"))  # a click on the box opens it again
    wait_for_data(page, graph, "d.collapsed === '0'")
    assert node_at(graph, INSIDE) is not None
    graph.locator(".dgv-search").fill(COPY[:-1])  # a name's part finds the node, centres and inspects it
    graph.locator(".dgv-search").press("Enter")
    wait_for_data(page, graph, f"d.selected === '{COPY}'")
    assert graph.locator(".dgv-inspector .dgv-row-predicted td").text_content().endswith(" us")
    graph.evaluate(f"r => {{ r.devcopyCy.zoom(0.9); r.devcopyCy.center(r.devcopyCy.getElementById('{COPY}')); }}")
    memory = explorer.locator(".devcopy-memory-plan")
    memory.wait_for(state="visible")
    graph.scroll_into_view_if_needed()
    # the README's picture: the graph in context with its inspector, and the memory plan beside them
    boxes = [graph.bounding_box(), memory.bounding_box()]
    left, top = min(b["x"] for b in boxes), min(b["y"] for b in boxes)
    right, bottom = max(b["x"] + b["width"] for b in boxes), max(b["y"] + b["height"] for b in boxes)
    clip = {"x": left, "y": top, "width": right - left, "height": bottom - top}
    page.screenshot(path=artifacts / "placement-real-model.png", clip=clip)
    if os.environ.get("DEVCOPY_UPDATE_SCREENSHOT") or not DOCS_SCREENSHOT.exists():
        shutil.copyfile(artifacts / "placement-real-model.png", DOCS_SCREENSHOT)


BIG_MODEL = (
    "from devcopy_widgets import PlacementExplorer\nfrom devcopy_lib import models\n"
    "big = PlacementExplorer.for_model(*models.gpt2_12l(), name='gpt2_12l')\nbig"
)
SHOWN_ITEMS = "(r) => r.devcopyCy.nodes().filter((n) => n.isChildless()).length"


def test_gpt2_12l_opens_readable_and_its_tools_work(page, lab, artifacts):
    """GPT-2 12-layer opens collapsed to its layers with labels readable, also after "fit"; "collapse groups"
    collapses; a click opens a box and a double click closes its frame; search counts and steps; the copy buttons
    step from the biggest copy; the keyboard reaches the canvas, moves and inspects; PNG and SVG download; the dark
    theme darkens the canvas and the inspector."""
    write_notebook(lab.root / "big_model.ipynb", BIG_MODEL)
    run_all_cells(page, lab, "big_model.ipynb")
    graph = page.locator(".devcopy-graph-view")
    wait_for_data(page, graph, "Number(d.layouts) > 0 && d.renderDone", timeout=180_000)
    graph.scroll_into_view_if_needed()
    assert data(graph, "collapsed") > 0 and graph.evaluate(SHOWN_ITEMS) < data(graph, "nodes")
    assert labels_shown(graph), "no label readable at the opening zoom"
    graph.locator(".dgv-fit").click()
    assert labels_shown(graph), "no label readable after fit"
    graph.screenshot(path=artifacts / "gpt2_12l-opened.png")

    page.mouse.click(*node_at(graph, "group:model.transformer"))  # open the transformer, then collapse again
    wait_for_data(page, graph, f"Number(d.collapsed) < {data(graph, 'collapsed')}")
    collapsed = data(graph, "collapsed")
    graph.locator(".dgv-reset").click()
    wait_for_data(page, graph, f"Number(d.collapsed) > {collapsed}")
    assert data(graph, "visible-nodes") <= 60 and labels_shown(graph)
    full = data(graph, "full-layouts")
    graph.locator(".dgv-tidy").click()  # lays out everything shown again, fitted readable
    wait_for_data(page, graph, f"Number(d.fullLayouts) === {full + 1}")
    assert labels_shown(graph)
    check_open_and_close_a_group(page, graph)
    check_search_and_copy_steps(page, graph)
    check_keyboard(page, graph)
    check_exports(page, graph)
    check_dark_theme(page, graph, artifacts)


BOX = """(root, id) => { const b = root.devcopyCy.getElementById(id).boundingBox({includeOverlays: false,
  includeUnderlays: false}); return [b.x1, b.y1, b.x2, b.y2]; }"""
LAYER = "group:model.transformer.h.{}"
# A point on a frame's own border area (inside its left edge, below its top), on screen in the page and the canvas.
FRAME_POINT = """(root, id) => {
  const cy = root.devcopyCy, frame = cy.getElementById(id);
  const r = root.querySelector('.dgv-canvas').getBoundingClientRect();
  cy.center(frame);
  const b = frame.renderedBoundingBox({includeLabels: false});
  const top = Math.max(b.y1, 0, -r.y) + 30;
  return [r.x + Math.max(b.x1, 0) + 4, r.y + top];
}"""


def test_gpt2_12l_opens_whole_layers_stay_put_and_drags_pan_on_frames(page, lab, artifacts):
    """The issue "The seat, round 2": GPT-2 12-layer opens with every top-level item inside the canvas and labels of
    at least 10 px; a layer opened and closed six times stays where it was and a click on each layer's box opens
    that layer; a drag that starts on a module's frame pans the view."""
    write_notebook(lab.root / "big_model.ipynb", BIG_MODEL)
    run_all_cells(page, lab, "big_model.ipynb")
    imported = run_in_kernel(page, "import devcopy_widgets; print(devcopy_widgets.__file__)").strip()
    assert Path(imported).resolve().is_relative_to(DOCS_SCREENSHOT.parents[1]), imported  # this tree's widgets
    graph = page.locator(".devcopy-graph-view")
    wait_for_data(page, graph, "Number(d.layouts) > 0 && d.renderDone", timeout=180_000)
    graph.scroll_into_view_if_needed()
    opened = graph.evaluate(OUTSIDE_CANVAS, "top")
    assert opened["shown"] > 1 and opened["out"] == [] and opened["small"] == [], opened
    graph.locator(".dgv-fit").click()
    assert graph.evaluate(OUTSIDE_CANVAS, "top")["out"] == []

    run_in_kernel(
        page,
        "big.graph.open_group('model.transformer')\n"
        "for i in range(12): big.graph.close_group(f'model.transformer.h.{i}')",
    )
    revision = run_in_kernel(page, "print(big.graph.revision)").strip()
    wait_for_data(page, graph, f"d.renderDone === '{revision}' && Number(d.collapsed) >= 12")
    graph.locator(".dgv-fit").click()
    layer = LAYER.format(10)
    first = graph.evaluate(BOX, layer)
    for cycle in range(6):
        collapsed = data(graph, "collapsed")
        graph.scroll_into_view_if_needed()
        page.mouse.click(*node_at(graph, layer))
        wait_for_data(page, graph, f"Number(d.collapsed) < {collapsed}")
        page.wait_for_timeout(300)
        page.mouse.dblclick(*node_at(graph, layer, "left-edge"))
        wait_for_data(page, graph, f"Number(d.collapsed) === {collapsed}")
        assert graph.evaluate(BOX, layer) == pytest.approx(first, abs=0.5), f"moved after {cycle + 1} cycles"
    for i in range(12):
        collapsed = data(graph, "collapsed")
        graph.scroll_into_view_if_needed()
        page.mouse.click(*node_at(graph, LAYER.format(i)))
        wait_for_data(page, graph, f"Number(d.collapsed) < {collapsed}")
        assert graph.evaluate(f"(r) => r.devcopyCy.getElementById('{LAYER.format(i)}').hasClass('expanded')"), i
        if i == 11:
            break
        run_in_kernel(page, f"big.graph.close_group('model.transformer.h.{i}')")
        wait_for_data(page, graph, f"Number(d.collapsed) === {collapsed}")

    graph.locator(".dgv-canvas").scroll_into_view_if_needed()
    page.wait_for_timeout(400)
    x, y = graph.evaluate(FRAME_POINT, "group:model.transformer")
    pan = [float(v) for v in graph.get_attribute("data-pan").split(",")]
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 90, y - 60, steps=8)
    page.mouse.up()
    moved = [float(v) for v in graph.get_attribute("data-pan").split(",")]
    assert moved[0] - pan[0] == pytest.approx(90, abs=2) and moved[1] - pan[1] == pytest.approx(-60, abs=2)
    graph.screenshot(path=artifacts / "gpt2_12l-layers.png")


@pytest.mark.parametrize("notebook", ["00_tour.ipynb", "01_placement.ipynb", "04_bring_your_own_model.ipynb"])
def test_the_teaching_graphs_open_with_every_node_inside_the_canvas(page, lab, notebook):
    run_all_cells(page, lab, notebook)
    graph = page.locator(".devcopy-placement .devcopy-graph-view").first
    wait_for_data(page, graph, "d.renderDone")
    graph.scroll_into_view_if_needed()
    page.wait_for_timeout(500)  # the page settles (the view refits on resize)
    shown = graph.evaluate(OUTSIDE_CANVAS, "all")
    assert shown["shown"] > 5 and shown["out"] == [], shown


def check_open_and_close_a_group(page, graph) -> None:
    """A click opens the smallest box (its frame fits the canvas), a double click on the frame's edge closes it."""
    box = graph.evaluate("(r) => r.devcopyCy.nodes('.collapsed').min((n) => n.data('label').length).ele.id()")
    collapsed = data(graph, "collapsed")
    page.mouse.click(*node_at(graph, box))
    wait_for_data(page, graph, f"Number(d.collapsed) < {collapsed}")
    assert graph.evaluate(f"(r) => r.devcopyCy.getElementById('{box}').hasClass('expanded')")
    opened = data(graph, "collapsed")
    page.mouse.dblclick(*node_at(graph, box, "left-edge"))
    wait_for_data(page, graph, f"Number(d.collapsed) > {opened}")
    assert graph.evaluate(f"(r) => r.devcopyCy.getElementById('{box}').hasClass('collapsed')")


def check_search_and_copy_steps(page, graph) -> None:
    names = json.loads(run_in_kernel(page, "import json; print(json.dumps([n['id'] for n in big.graph.nodes]))"))
    hits = [n for n in names if "h2d" in n]
    search = graph.locator(".dgv-search")
    search.fill("H2D")
    assert data(graph, "matches") == len(hits) > 1
    assert graph.locator(".dgv-matches").text_content() == f"{len(hits)} matches"
    search.press("Enter")
    search.press("Enter")
    wait_for_data(page, graph, f"d.selected === '{hits[1]}'")
    assert graph.locator(".dgv-matches").text_content() == f"2 of {len(hits)}"
    biggest = run_in_kernel(
        page, "print(max((n for n in big.graph.nodes if n['kind'] in ('h2d', 'd2h')), key=lambda n: n['bytes'])['id'])"
    ).strip()
    graph.locator(".dgv-next-copy").click()
    wait_for_data(page, graph, f"d.selected === '{biggest}'")
    assert graph.locator(".dgv-inspector .dgv-title").text_content() == biggest
    check_the_copy_list(page, graph, biggest)
    graph.locator(".dgv-copies-only").check()
    faded = graph.evaluate("(r) => [r.devcopyCy.nodes('.faded').length, r.devcopyCy.nodes('.copy.faded').length]")
    assert faded[0] > 0 and faded[1] == 0
    graph.locator(".dgv-copies-only").uncheck()


def check_the_copy_list(page, graph, biggest: str) -> None:
    """The list of copies: every copy, most bytes first; by predicted time on a click on that header; a click on
    a row inspects that copy."""
    order = run_in_kernel(
        page,
        "copies = [n for n in big.graph.nodes if n['kind'] in ('h2d', 'd2h')]\n"
        "print(len(copies), max(copies, key=lambda n: n['predicted_s'] or 0)['id'])",
    ).split()
    graph.locator(".dgv-copies summary").click()
    rows = graph.locator(".dgv-copy-row")
    assert rows.count() == int(order[0]) and rows.first.get_attribute("data-id") == biggest
    graph.locator(".dgv-sort-predicted").click()
    assert rows.first.get_attribute("data-id") == order[1]
    second = rows.nth(1).get_attribute("data-id")
    rows.nth(1).click()
    wait_for_data(page, graph, f"d.selected === '{second}'")
    graph.locator(".dgv-copies summary").click()


def check_keyboard(page, graph) -> None:
    graph.locator(".dgv-svg").focus()
    page.keyboard.press("Tab")
    assert graph.evaluate("(r) => document.activeElement === r.querySelector('.dgv-canvas')")
    for _ in range(12):  # down the graph until the cursor is on a node (not a module box)
        page.keyboard.press("ArrowDown")
        cursor = graph.get_attribute("data-cursor")
        if cursor and not cursor.startswith("group:"):
            break
    assert cursor and not cursor.startswith("group:")
    page.keyboard.press("Enter")
    wait_for_data(page, graph, f"d.selected === '{cursor}'")
    assert graph.locator(".dgv-inspector .dgv-title").text_content() == cursor


def check_exports(page, graph) -> None:
    with page.expect_download() as png:
        graph.locator(".dgv-png").click()
    assert png.value.suggested_filename == "devcopy-graph.png"
    assert Path(png.value.path()).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with page.expect_download() as svg:
        graph.locator(".dgv-svg").click()
    text = Path(svg.value.path()).read_text()
    shown = graph.evaluate("(r) => r.devcopyCy.nodes(':childless').map((n) => n.id())")
    assert text.startswith("<svg") and all(f'data-id="{n}"' in text for n in shown)


def check_dark_theme(page, graph, artifacts) -> None:
    canvas, inspector = graph.locator(".dgv-canvas"), graph.locator(".dgv-inspector")
    background = "(e) => getComputedStyle(e).backgroundColor"
    assert brightness(canvas.evaluate(background)) > 0.8
    change_theme(page, "JupyterLab Dark")
    try:
        wait_for_data(page, graph, "d.theme === 'dark'")
        page.wait_for_function(
            "(e) => getComputedStyle(e).backgroundColor !== 'rgb(255, 255, 255)'", arg=canvas.element_handle()
        )
        assert brightness(canvas.evaluate(background)) < 0.35
        assert brightness(inspector.evaluate(background)) < 0.35
        frame_text = graph.evaluate("(r) => r.devcopyCy.nodes('.group').first().style('color')")
        assert brightness(frame_text) > 0.6  # module names stay readable on the dark canvas
        page.wait_for_timeout(500)  # the canvas redraws on the next frames
        graph.screenshot(path=artifacts / "gpt2_12l-dark.png")
    finally:
        change_theme(page, "JupyterLab Light")
    wait_for_data(page, graph, "d.theme === 'light'")
