"""The workbench in a real browser: JupyterLab runs 00_tour, the explorer reacts to a strategy change, the
registration panel shows `Missing operator` once device_copy_ops_aten_lib is unlinked, and a timing run plots."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

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
    explorer.locator(".devcopy-strategy select").select_option("dedupe")
    assert "H2D 2" in wait_for_text(totals, "strategy dedupe")
    assert explorer.locator("svg.devcopy-graph .devcopy-h2d").count() == 2
    explorer.screenshot(path=artifacts / "placement-dedupe.png")
    if os.environ.get("DEVCOPY_UPDATE_SCREENSHOT") or not DOCS_SCREENSHOT.exists():
        shutil.copyfile(artifacts / "placement-dedupe.png", DOCS_SCREENSHOT)

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
