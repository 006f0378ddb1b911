"""The workbench in a real browser: JupyterLab runs 00_tour, the explorer's graph view follows a strategy change,
zooms, pans and inspects a clicked node, the registration panel shows `Missing operator` once
device_copy_ops_aten_lib is unlinked, a timing run plots, and a real model opens in the explorer."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from graph_page import data, node_at, run_in_kernel, wait_for_data

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle';
}"""
CELLS_DONE = """() => [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
  .every(p => /\\[\\d+\\]/.test(p.textContent))"""
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "workbench.png"


def run_all_cells(page, lab, notebook: str) -> None:
    """Open `notebook`, wait for its kernel, run every cell and wait until each has an execution count."""
    page.goto(f"{lab.url}/lab/tree/{notebook}?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook")
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(CELLS_DONE, timeout=180_000)


def wait_for_text(locator, text: str, timeout: int = 60_000) -> str:
    """Wait until `locator` contains `text`; return its text (textContent: cells off screen are not laid out)."""
    locator.filter(has_text=text).wait_for(state="attached", timeout=timeout)
    return locator.text_content()


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
    expected = json.loads(run_in_kernel(page, (
        "import json, collections; g = explorer.placed.graph_module.graph; rows = explorer.placed.report.rows\n"
        "print(json.dumps([len(rows), sum(len(n.all_input_nodes) for n in g.nodes), "
        "collections.Counter(r.device for r in rows)]))")))
    assert [data(graph, "nodes"), data(graph, "edges"), data(graph, "devices")] == expected
    check_zoom_pan_and_inspector(page, graph, "explorer")
    explorer.screenshot(path=artifacts / "placement-dedupe.png")

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
    assert run_in_kernel(page, f"print({explorer}.graph.selected)").strip() == copy


REAL_MODEL = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": (
    "from devcopy_lib import models\n"
    "from devcopy_widgets import PlacementExplorer\n"
    "explorer = PlacementExplorer.for_model(*models.transformer_block(), name='transformer_block')\n"
    "explorer")}], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5}


def test_a_real_model_opens_in_the_explorer_and_its_module_groups_close_and_open(page, lab, artifacts):
    (lab.root / "real_model.ipynb").write_text(json.dumps(REAL_MODEL))
    run_all_cells(page, lab, "real_model.ipynb")
    graph = page.locator(".devcopy-placement .devcopy-graph-view")
    wait_for_data(page, graph, "Number(d.nodes) > 0 && d.collapsed === '0'")
    groups = graph.evaluate("(root) => root.devcopyCy.nodes('.group.expanded').map(g => g.id())")
    assert "group:norm1" in groups
    page.mouse.dblclick(*node_at(graph, "group:norm1", "left-edge"))  # a double click on a frame closes it
    wait_for_data(page, graph, "d.collapsed === '1'")
    assert node_at(graph, "native_layer_norm") is None
    page.mouse.click(*node_at(graph, "group:norm1"))  # a click on the box opens it again
    wait_for_data(page, graph, "d.collapsed === '0'")
    assert node_at(graph, "native_layer_norm") is not None
    explorer = page.locator(".devcopy-placement")
    explorer.screenshot(path=artifacts / "placement-real-model.png")
    if os.environ.get("DEVCOPY_UPDATE_SCREENSHOT") or not DOCS_SCREENSHOT.exists():
        shutil.copyfile(artifacts / "placement-real-model.png", DOCS_SCREENSHOT)
