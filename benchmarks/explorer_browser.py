"""Time the placement explorer in a real browser: JupyterLab + headless Chromium open GPT-2 12-layer in the
explorer, then each action is timed from the click to the page's last update (the graph view's drawing, seen in
its `data-render-done` echo of the revision it drew, then the next frame, then every DOM change until the page is
quiet for 0.3 s): a strategy switch, an op toggle, opening a module group and closing it. Python's share is timed
on its own by benchmarks/explorer.py.

Run: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/explorer_browser.py [--model gpt2_12l] [--repeats 7] [--write]`;
prints JSON with machine, date, command and the load average; `--write` also stores it in
docs/data/explorer_browser.json and renders its section of docs/explorer.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import runpy
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))  # the browser test's server, browser and page helpers
from graph_page import run_all_cells, write_notebook  # noqa: E402
from lab_server import LabServer, open_browser  # noqa: E402

from devcopy_lib.bench.measurement import median_of  # noqa: E402

NOTEBOOK_ENV = runpy.run_path(str(ROOT / "tools" / "notebooks" / "nbenv.py"))["NOTEBOOK_ENV"]
DATA, PAGE = ROOT / "docs" / "data" / "explorer_browser.json", ROOT / "docs" / "explorer.md"
FIGURES = "## In the browser: click to view"  # docs/explorer.md from this heading on is this script's
CELL = (
    "from devcopy_widgets import PlacementExplorer\nfrom devcopy_lib import models\n"
    "explorer = PlacementExplorer.for_model(*models.{model}(), name='{model}')\nexplorer"
)
# One action in the page, timed there: performance.now() from the action to the last update it caused.
NAME = "const name = (box) => box.textContent.replace(/\\u200b/g, '').trim();"  # ipywidgets adds a zero-width space
TIME_ACTION = (
    """async ([action, arg]) => {
  """
    + NAME
    + """
  const explorer = document.querySelector('.devcopy-placement');
  const root = explorer.querySelector('.devcopy-graph-view'), cy = root.devcopyCy;
  const before = root.dataset.renderDone, sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let last = 0, busy = false;
  const seen = new MutationObserver(() => { last = performance.now(); busy ||= root.dataset.busy === 'true'; });
  seen.observe(explorer, {subtree: true, childList: true, attributes: true, characterData: true});
  const start = performance.now();
  if (action === 'strategy') {
    const select = explorer.querySelector('.devcopy-strategy select');
    select.value = arg;
    select.dispatchEvent(new Event('change', {bubbles: true}));
  } else if (action === 'op') {
    [...explorer.querySelectorAll('.widget-checkbox')].find((b) => name(b) === arg)
      .querySelector('input').click();
  } else cy.getElementById(arg).emit(action === 'open' ? 'tap' : 'dbltap');
  while (root.dataset.renderDone === before) {
    if (performance.now() - start > 120000) throw new Error(`${action} ${arg}: the view never drew`);
    await sleep(2);
  }
  const drawn = await new Promise((r) => requestAnimationFrame(() => r(performance.now())));
  while (performance.now() - Math.max(last, drawn) < 300) await sleep(20);
  seen.disconnect();
  return {ms: Math.max(last, drawn) - start, busy, full: Number(root.dataset.fullLayouts)};
}"""
)
PICK = (
    """() => {
  """
    + NAME
    + """
  const root = document.querySelector('.devcopy-graph-view'), cy = root.devcopyCy;
  const box = cy.nodes('.collapsed').max((n) => n.data('label').length).ele.id();
  return {box, ops: [...document.querySelectorAll('.devcopy-placement .widget-checkbox')]
    .filter((b) => b.querySelector('input').checked).map(name)};
}"""
)


def actions(page: Any, repeats: int) -> list[tuple[str, str, str]]:
    """(name, action, argument) in the order they run: each action `repeats` times, back and forth."""
    picked = page.evaluate(PICK)
    op = next((o for o in picked["ops"] if o.startswith("addmm")), picked["ops"][0])
    steps = []
    for i in range(repeats):
        steps.append(("strategy switch", "strategy", ("dedupe", "executorch")[i % 2]))
    for _ in range(repeats):
        steps.append(("op toggle", "op", op))
    for _ in range(repeats):
        steps += [("group open", "open", picked["box"]), ("group close", "close", picked["box"])]
    return steps


def measure(model: str, repeats: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        notebooks = Path(tmp) / "in"
        notebooks.mkdir()
        write_notebook(notebooks / "explorer.ipynb", CELL.format(model=model))
        server = LabServer(notebooks, Path(tmp), env={**NOTEBOOK_ENV, "OMP_NUM_THREADS": "1"})
        server.start()
        try:
            with sync_playwright() as playwright:
                browser = open_browser(playwright, Path(tmp) / "profile")
                page = browser.pages[0]
                page.set_default_timeout(300_000)
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                run_all_cells(page, server, "explorer.ipynb")
                try:
                    page.wait_for_function(
                        "() => document.querySelector('.devcopy-graph-view')?.dataset.renderDone", timeout=120_000
                    )
                except Exception:
                    page.screenshot(path=Path(tempfile.gettempdir()) / "explorer_browser_failed.png")
                    raise RuntimeError(f"the explorer never drew; page errors: {errors}") from None
                page.wait_for_timeout(1000)
                opening = page.evaluate("() => ({...document.querySelector('.devcopy-graph-view').dataset})")
                load = os.getloadavg()
                times: dict[str, list[Any]] = {}
                steps = actions(page, repeats)
                for name, action, arg in steps:
                    times.setdefault(name, []).append(page.evaluate(TIME_ACTION, [action, arg]))
                opening["what"] = {name: arg for name, _, arg in steps if name != "strategy switch"}
                version = browser.browser.version if browser.browser else "unknown"
                browser.close()
        finally:
            server.stop()
    return summary(model, repeats, opening, times, [*load, *os.getloadavg()], version)


def summary(model: Any, repeats: Any, opening: Any, times: Any, loads: Any, version: Any) -> dict[str, Any]:
    """The figures: per action every time, the median and the slowest (ms), and whether the busy state showed."""
    per_action = {}
    prior = int(opening["fullLayouts"])  # dagre over everything: the first drawing, then (ideally) never again
    for name, runs in times.items():
        ms = [round(r["ms"]) for r in runs]
        per_action[name] = {
            "ms": ms,
            "median_ms": round(median_of(ms)),
            "slowest_ms": max(ms),
            "busy_shown": sum(r["busy"] for r in runs),
            "full_layouts": runs[-1]["full"] - prior,
        }
        prior = runs[-1]["full"]
    return {
        "machine": f"{platform.machine()}, {os.cpu_count()}-core CPU",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["benchmarks/explorer_browser.py", *sys.argv[1:]]),
        "browser": f"Chromium {version} headless, 1600x1000",
        "load_average_1min_before_after": [round(loads[0], 2), round(loads[3], 2)],
        "model": model,
        "repeats": repeats,
        "opened": {k: opening.get(k) for k in ("nodes", "visibleNodes", "collapsed", "layoutMs", "fullLayouts")},
        "toggled": opening["what"],
        "actions": per_action,
        "all_under_1s": all(a["slowest_ms"] < 1000 for a in per_action.values()),
    }


def render(result: dict[str, Any]) -> str:
    """The browser section of docs/explorer.md."""
    load = result["load_average_1min_before_after"]
    rows = [
        f"| {name} | {a['median_ms']} | {a['slowest_ms']} | {', '.join(map(str, a['ms']))} |"
        for name, a in result["actions"].items()
    ]
    opened = result["opened"]
    full = ", ".join(f"{name} {a['full_layouts']}" for name, a in result["actions"].items())
    return "\n".join(
        [
            FIGURES,
            "",
            f"Measured by `benchmarks/explorer_browser.py` on {result['machine']}, {result['browser']}, "
            f"{result['date']}, 1-minute load average {load[0]} before and {load[1]} after. "
            f"Command: `{result['command']}`.",
            "",
            f"Model `{result['model']}`: {opened['nodes']} nodes, opened showing {opened['visibleNodes']} "
            f"({opened['collapsed']} module groups collapsed; the first layout took {opened['layoutMs']} ms).",
            "Each time runs from the click (or the control's change) to the page's last update: the graph view's "
            "drawing, the next frame, and every DOM change until the page is quiet for 0.3 s. It includes the "
            "kernel's work (Python-side times are in the table above). The strategy goes dedupe, executorch, ... "
            f"(the first of each places anew, later ones are cached); `{result['toggled']['op toggle']}` is "
            f"unticked and ticked again; `{result['toggled']['group open']}` is opened by a click and closed by "
            f"a double click. Layouts of everything (dagre) after the first drawing: {full}.",
            "A 1-minute load average above 1 means other work shared the two cores while this ran, and the times "
            "are then upper bounds of what a quiet machine gives.",
            "",
            f"| action | median ms | slowest ms | all {result['repeats']} (ms) |",
            "|---|---|---|---|",
            *rows,
            "",
        ]
    )


def write(result: dict[str, Any]) -> None:
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(result, indent=1) + "\n")
    text = PAGE.read_text()
    head = text.split(FIGURES)[0].rstrip("\n")
    PAGE.write_text(f"{head}\n\n{render(result)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2_12l")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--write", action="store_true", help="store docs/data/explorer_browser.json, docs section")
    args = parser.parse_args()
    result = measure(args.model, args.repeats)
    print(json.dumps(result, indent=1))
    if args.write:
        write(result)


if __name__ == "__main__":
    main()
