"""Time the placement explorer in a real browser: JupyterLab + headless Chromium open a model in the explorer, then
each action is timed from the click to the page's last update (the graph view's drawing, seen in its `data-renders`
count, then the next frame, then every DOM change until the page is quiet for 0.3 s): a strategy switch, five op
toggles (each a new delegate set, then ticked back: a cached one), a module group opened and closed, "tidy layout".
Each action also records the longest task the page's main thread ran meanwhile (PerformanceObserver "longtask":
how long the page froze), how many bytes the kernel sent the graph view for it, the kernel's CPU time and the full
garbage collections it ran. After the open/close cycles
layer boxes are clicked where they are drawn, counting the clicks that opened the layer clicked. Last, "PNG" is
clicked and the downloaded file's size and scale recorded. Python's share is timed on its own by
benchmarks/explorer.py.

`--model gpt2_96l` is GPT-2 with 96 layers at tiny widths (64 wide, 4 heads, vocabulary 1,024): GPT-2's graph at
8x the layers of gpt2_12l, the "big model" of the explorer's issue. `--ops matrix` (the default for gpt2_96l) picks
that delegate set (`models.DELEGATE_SETS`) before anything is timed: only the matrix ops go to the device, so every
other op is a placed node of its own (about 8,000 on gpt2_96l, against about 1,100 with the model's default set).

Run: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/explorer_browser.py [--model gpt2_12l|gpt2_96l] [--ops matrix]
[--repeats 7] [--write]`; prints JSON with machine, date, command and the load average; `--write` also stores it in
docs/data/explorer_browser.json (gpt2_12l; other models explorer_browser_MODEL.json) and renders the browser
section of docs/explorer.md from every such file.
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
from graph_page import run_all_cells, run_in_kernel, write_notebook  # noqa: E402
from lab_server import LabServer, open_browser  # noqa: E402

from devcopy_lib.bench.measurement import median_of  # noqa: E402

NOTEBOOK_ENV = runpy.run_path(str(ROOT / "tools" / "notebooks" / "nbenv.py"))["NOTEBOOK_ENV"]
DATA, PAGE = ROOT / "docs" / "data" / "explorer_browser.json", ROOT / "docs" / "explorer.md"
FIGURES = "## In the browser: click to view"  # docs/explorer.md from this heading on is this script's
CELL = (
    "from devcopy_widgets import PlacementExplorer\nfrom devcopy_lib import models\n"
    "explorer = PlacementExplorer.for_model(*models.{model}(), name='{model}')\nexplorer"
)
BIG_CELL = (  # GPT-2's graph with 96 layers, tiny widths
    "from devcopy_widgets import PlacementExplorer\nfrom devcopy_lib.models.real import causal_lm\n"
    "model, inputs = causal_lm('GPT2Config', 'gpt2_96l', 16, n_layer=96, n_embd=64, n_head=4, vocab_size=1024, "
    "n_positions=64)\nexplorer = PlacementExplorer.for_model(model, inputs, name='gpt2_96l')\nexplorer"
)
# In the kernel, per action: the bytes of every message it sends the graph view (patches and state updates, as JSON),
# its CPU seconds, and its full garbage collections (generation 2) with their seconds.
KERNEL_PROBE = """import json, time
_graph = explorer.graph
_graph_sent = [0]
_session = _graph.comm.kernel.session
_pack = _session.pack
def _counting(content):  # the message as the kernel encodes it anyway: counting it costs nothing more
    packed = _pack(content)
    if isinstance(content, dict) and content.get("comm_id") == _graph.comm.comm_id:
        _graph_sent[0] += len(packed)
    return packed
_session.pack = _counting
from devcopy_lib.bench.measurement import FullCollections
_full_gcs = FullCollections().attach()
"""
KERNEL_NOW = "print(json.dumps([_graph_sent[0], time.process_time(), len(_full_gcs.seconds), sum(_full_gcs.seconds)]))"
WHOLE = (
    "import json; g = explorer.graph\n"
    "print(json.dumps([len(json.dumps(g.nodes)) + len(json.dumps(g.elements)), len(g.nodes)]))"
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
  const before = root.dataset.renders, sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  let last = 0, busy = false, longest = 0;
  const seen = new MutationObserver(() => { last = performance.now(); busy ||= root.dataset.busy === 'true'; });
  seen.observe(explorer, {subtree: true, childList: true, attributes: true, characterData: true});
  const tasks = new PerformanceObserver((list) => {
    for (const task of list.getEntries()) longest = Math.max(longest, task.duration);
  });
  tasks.observe({type: 'longtask'});
  const start = performance.now();
  if (action === 'strategy') {
    const select = explorer.querySelector('.devcopy-strategy select');
    select.value = arg;
    select.dispatchEvent(new Event('change', {bubbles: true}));
  } else if (action === 'op') {
    [...explorer.querySelectorAll('.widget-checkbox')].find((b) => name(b) === arg)
      .querySelector('input').click();
  } else if (action === 'tidy') root.querySelector('.dgv-tidy').click();
  else cy.getElementById(arg).emit(action === 'open' ? 'tap' : 'dbltap');
  while (root.dataset.renders === before) {
    if (performance.now() - start > 300000) throw new Error(`${action} ${arg}: the view never drew`);
    await sleep(2);
  }
  const drawn = await new Promise((r) => requestAnimationFrame(() => r(performance.now())));
  while (performance.now() - Math.max(last, drawn) < 300) await sleep(20);
  seen.disconnect();
  tasks.takeRecords().forEach((task) => { longest = Math.max(longest, task.duration); });
  tasks.disconnect();
  return {ms: Math.max(last, drawn) - start, busy, full: Number(root.dataset.fullLayouts), longest,
          where: root.dataset.layoutWhere || ''};
}"""
)
# Page coordinates of a shown node's centre, centring it in the canvas first (as a user would pan to it).
NODE_AT = """(id) => {
  const root = document.querySelector('.devcopy-graph-view'), cy = root.devcopyCy, node = cy.getElementById(id);
  if (node.empty()) return null;
  cy.center(node);
  const box = node.renderedBoundingBox({includeLabels: false});
  const r = root.querySelector('.dgv-canvas').getBoundingClientRect();
  return [r.x + (box.x1 + box.x2) / 2, r.y + (box.y1 + box.y2) / 2];
}"""
RENDERS = "() => document.querySelector('.devcopy-graph-view').dataset.renders"
PICK = (
    """() => {
  """
    + NAME
    + """
  const root = document.querySelector('.devcopy-graph-view'), cy = root.devcopyCy;
  const layers = cy.nodes('.collapsed').filter((n) => /[.]h[.][0-9]+$/.test(n.id())).map((n) => n.id());
  const box = layers.length ? layers[Math.floor(layers.length / 2)]
    : cy.nodes('.collapsed').max((n) => n.data('label').length).ele.id();
  const boxes = [...document.querySelectorAll('.devcopy-placement .widget-checkbox')]
    .filter((b) => /^\\w+[.]\\w+$/.test(name(b))); // the op boxes (an op overload: "addmm.default")
  const ticked = (b) => b.querySelector('input').checked;
  return {box, layers, ops: boxes.filter(ticked).map(name), unticked: boxes.filter((b) => !ticked(b)).map(name)};
}"""
)
OPS = 5  # op toggles, each to a new delegate set
PRESET = "explorer.preset.value = {ops!r}"  # a delegate set of models.DELEGATE_SETS, chosen before the timing


def placements(picked: dict[str, Any], repeats: int) -> list[tuple[str, str, str]]:
    """(name, action, argument) in the order they run: strategy switches back and forth, then OPS different ops each
    toggled (a new delegate set) and toggled back (the cached one): ticked ops first (unticked), the matrix ops
    among them first, then unticked ones (ticked) where fewer than OPS are ticked, as with the matrix set."""
    preferred = [o for o in picked["ops"] if o.startswith(("addmm", "mm", "bmm"))]
    ops = list(dict.fromkeys(preferred + picked["ops"] + picked["unticked"]))[:OPS]
    steps = [("strategy switch", "strategy", ("dedupe", "executorch")[i % 2]) for i in range(repeats)]
    for op in ops:
        steps += [("op toggle, new delegate set", "op", op), ("op toggle back, cached", "op", op)]
    return steps


def group_actions(picked: dict[str, Any], repeats: int) -> list[tuple[str, str, str]]:
    """A layer box opened by a click and closed by a double click, `repeats` times, then "tidy layout"."""
    steps = []
    for _ in range(repeats):
        steps += [("group open", "open", picked["box"]), ("group close", "close", picked["box"])]
    return steps + [("tidy layout", "tidy", "") for _ in range(max(1, repeats // 3))]


def time_action(page: Any, times: dict[str, list[Any]], name: str, action: str, arg: str) -> None:
    """Run one action timed in the page (TIME_ACTION), with what the kernel did for it (KERNEL_PROBE): bytes sent to
    the graph view, CPU time, full garbage collections."""
    before = json.loads(run_in_kernel(page, KERNEL_NOW))
    times.setdefault(name, []).append(page.evaluate(TIME_ACTION, [action, arg]))
    after = json.loads(run_in_kernel(page, KERNEL_NOW))
    sent, cpu, gcs, gc_s = (a - b for a, b in zip(after, before, strict=True))
    times[name][-1] |= {"bytes": sent, "kernel_cpu_ms": 1000 * cpu, "full_gcs": gcs, "full_gc_ms": 1000 * gc_s}


def wait_drawn(page: Any, before: str) -> None:
    page.wait_for_function(f"() => ({RENDERS})() !== '{before}'", timeout=300_000)


def open_layers(page: Any) -> None:
    """Open the transformer so its layers show as boxes (as a user who clicked it): each layer it opened closes."""
    run_in_kernel(
        page,
        "g = explorer.graph\ng.open_group('model.transformer')\n"
        "for p in sorted(g._groups):\n"
        "    if p.count('.') == 3 and p.startswith('model.transformer.h.') and p not in g.collapsed:\n"
        "        g.close_group(p)\n",
    )
    wait_revision(page)


def wait_revision(page: Any) -> None:
    """Wait until the page has drawn the graph view's latest revision."""
    revision = run_in_kernel(page, "print(explorer.graph.revision)").strip()
    page.wait_for_function(
        f"() => document.querySelector('.devcopy-graph-view').dataset.renderDone === '{revision}'", timeout=300_000
    )


def click_layers(page: Any, layers: list[str], count: int = 8) -> dict[str, Any]:
    """Click `count` layer boxes where they are drawn, each closed again before the next; how many clicks opened
    the layer that was clicked."""
    picked = layers[:: max(1, len(layers) // count)][:count]
    right = []
    for layer in picked:
        before = page.evaluate(RENDERS)
        page.locator(".devcopy-graph-view .dgv-canvas").scroll_into_view_if_needed()
        page.mouse.click(*page.evaluate(NODE_AT, layer))
        wait_drawn(page, before)
        opened = page.evaluate(
            f"() => document.querySelector('.devcopy-graph-view').devcopyCy.getElementById('{layer}')"
            ".hasClass('expanded')"
        )
        right.append(bool(opened))
        before = page.evaluate(RENDERS)
        run_in_kernel(page, f"explorer.graph.close_group('{layer.removeprefix('group:')}')")
        wait_drawn(page, before)
        page.wait_for_timeout(350)  # no double click with the next one
    return {"clicked": picked, "opened_the_clicked_layer": sum(right)}


def export_png(page: Any) -> dict[str, Any]:
    """Click "PNG": the downloaded file's bytes, the scale used and the note the view showed."""
    graph = page.locator(".devcopy-graph-view")
    with page.expect_download(timeout=300_000) as download:
        graph.locator(".dgv-png").click()
    size = Path(download.value.path()).stat().st_size
    return {
        "bytes": size,
        "scale": graph.get_attribute("data-export-scale"),
        "note": graph.locator(".dgv-export-note").text_content(),
    }


def measure(model: str, repeats: int, ops: str) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        notebooks = Path(tmp) / "in"
        notebooks.mkdir()
        write_notebook(notebooks / "explorer.ipynb", BIG_CELL if model == "gpt2_96l" else CELL.format(model=model))
        server = LabServer(notebooks, Path(tmp), env={**NOTEBOOK_ENV, "OMP_NUM_THREADS": "1"})
        server.start()
        try:
            with sync_playwright() as playwright:
                browser = open_browser(playwright, Path(tmp) / "profile")
                page = browser.pages[0]
                page.set_default_timeout(600_000)
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                run_all_cells(page, server, "explorer.ipynb")
                try:
                    page.wait_for_function(
                        "() => document.querySelector('.devcopy-graph-view')?.dataset.renderDone", timeout=300_000
                    )
                    if ops:
                        run_in_kernel(page, PRESET.format(ops=ops))
                        wait_revision(page)
                except Exception:
                    page.screenshot(path=Path(tempfile.gettempdir()) / "explorer_browser_failed.png")
                    raise RuntimeError(f"the explorer never drew; page errors: {errors}") from None
                page.wait_for_timeout(1000)
                opening = page.evaluate("() => ({...document.querySelector('.devcopy-graph-view').dataset})")
                whole = json.loads(run_in_kernel(page, WHOLE))
                run_in_kernel(page, KERNEL_PROBE)
                load = os.getloadavg()
                times: dict[str, list[Any]] = {}
                steps = placements(page.evaluate(PICK), repeats)
                for name, action, arg in steps:
                    time_action(page, times, name, action, arg)
                open_layers(page)
                picked = page.evaluate(PICK)
                more = group_actions(picked, repeats)
                for name, action, arg in more:
                    time_action(page, times, name, action, arg)
                steps += more
                opening["what"] = {name: arg for name, _, arg in steps if name != "strategy switch"}
                opening["ops"] = [arg for name, _, arg in steps if name == "op toggle, new delegate set"]
                clicks = click_layers(page, picked["layers"])
                png = export_png(page)
                version = browser.browser.version if browser.browser else "unknown"
                browser.close()
        finally:
            server.stop()
    result = summary(model, repeats, opening, times, [*load, *os.getloadavg()], version) | {"delegate_set": ops}
    extra = {"whole_lists_bytes": whole[0], "placed_nodes": whole[1], "layer_clicks": clicks, "png": png}
    return {**result, **extra, "page_errors": errors}


def summary(model: Any, repeats: Any, opening: Any, times: Any, loads: Any, version: Any) -> dict[str, Any]:
    """The figures: per action every time, the median and the slowest (ms), the longest main-thread task, the
    bytes sent to the view, and whether the busy state showed."""
    per_action = {}
    prior = int(opening["fullLayouts"])  # dagre over everything: the first drawing, then (ideally) never again
    for name, runs in times.items():
        ms = [round(r["ms"]) for r in runs]
        per_action[name] = {
            "ms": ms,
            "median_ms": round(median_of(ms)),
            "slowest_ms": max(ms),
            "longest_task_ms": round(max(r["longest"] for r in runs)),
            "median_bytes_sent": round(median_of([r["bytes"] for r in runs])),
            "kernel_cpu_ms": [round(r["kernel_cpu_ms"]) for r in runs],
            "median_kernel_cpu_ms": round(median_of([r["kernel_cpu_ms"] for r in runs])),
            "full_gcs": sum(r["full_gcs"] for r in runs),
            "full_gc_ms": [round(r["full_gc_ms"]) for r in runs if r["full_gcs"]],
            "busy_shown": sum(r["busy"] for r in runs),
            "full_layouts": runs[-1]["full"] - prior,
            "layout_where": sorted({r["where"] for r in runs if r["where"]}),
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
        "ops": opening["ops"],
        "actions": per_action,
        "longest_task_ms": max(a["longest_task_ms"] for a in per_action.values()),
        "all_under_1s": all(a["slowest_ms"] < 1000 for a in per_action.values()),
    }


def _collections(action: dict[str, Any]) -> str:
    """How many full garbage collections the kernel ran during an action's runs, with their milliseconds."""
    if "full_gcs" not in action:
        return ""
    return f"{action['full_gcs']}" + (f" ({', '.join(map(str, action['full_gc_ms']))})" if action["full_gcs"] else "")


def render_one(result: dict[str, Any]) -> list[str]:
    """One model's figures."""
    load = result["load_average_1min_before_after"]
    rows = [
        f"| {name} | {a['median_ms']} | {a['slowest_ms']} | {a.get('longest_task_ms', '')} | "
        f"{a.get('median_bytes_sent', '')} | {a.get('median_kernel_cpu_ms', '')} | {_collections(a)} | "
        f"{', '.join(map(str, a['ms']))} |"
        for name, a in result["actions"].items()
    ]
    opened = result["opened"]
    full = ", ".join(f"{name} {a['full_layouts']}" for name, a in result["actions"].items())
    delegate_set = f" with the `{result['delegate_set']}` delegate set" if result.get("delegate_set") else ""
    lines = [
        f"### {result['model']}",
        "",
        f"Measured by `benchmarks/explorer_browser.py` on {result['machine']}, {result['browser']}, "
        f"{result['date']}, 1-minute load average {load[0]} before and {load[1]} after. "
        f"Command: `{result['command']}`.",
        "",
        f"Model `{result['model']}`{delegate_set}: {opened['nodes']} nodes, opened showing {opened['visibleNodes']} "
        f"({opened['collapsed']} module groups collapsed; the first layout took {opened['layoutMs']} ms). "
        f"Layouts of everything (dagre) after the first drawing: {full}.",
    ]
    if "png" in result:
        clicks, png = result["layer_clicks"], result["png"]
        note = f" ({png['note']})" if png["note"] else ""
        lines += [
            f"Ops toggled: {', '.join(f'`{o}`' for o in result['ops'])}. The page's longest main-thread task "
            f"(freeze) over all actions: {result['longest_task_ms']} ms. The whole node and element lists are "
            f"{result['whole_lists_bytes']:,} bytes of JSON ({result['placed_nodes']} placed nodes, as opened); the "
            f"bytes column is what the kernel sent the graph view per action (patches and state): a new delegate set "
            f"places a different graph (an op no longer delegated brings its nodes and their copies, and the nodes "
            f"around them get new neighbours), so its patch holds the new nodes whole and the changed fields of "
            f"others; a group opened or closed sends only what it shows or hides. After the open/close cycles, "
            f"{clicks['opened_the_clicked_layer']} of {len(clicks['clicked'])} clicks on layer boxes (by position) "
            f"opened the layer clicked. PNG export: {png['bytes']:,} bytes at scale {png['scale']}{note}.",
        ]
    return [
        *lines,
        "",
        "| action | median ms | slowest ms | longest task ms | bytes sent (median) | kernel CPU ms (median) | "
        "full collections (ms) | all (ms) |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def render(results: list[dict[str, Any]]) -> str:
    """The browser section of docs/explorer.md, one part per model measured."""
    return "\n".join(
        [
            FIGURES,
            "",
            "Each time runs from the click (or the control's change) to the page's last update: the graph view's "
            "drawing, the next frame, and every DOM change until the page is quiet for 0.3 s. It includes the "
            "kernel's work (Python-side times are in the table above; the kernel's CPU time per action, all its "
            "threads, is a column, with the full garbage collections it ran meanwhile). "
            "The strategy goes dedupe, executorch, ... "
            "(the first of each places anew, later ones are cached); each op is unticked (a new delegate set) and "
            "ticked again (the cached set); a layer box is opened by a click and closed by a double click. "
            "A 1-minute load average above 1 means other work shared the two cores while this ran, and the times "
            "are then upper bounds of what a quiet machine gives.",
            "",
            *[line for result in results for line in render_one(result)],
        ]
    )


def data_file(model: str) -> Path:
    return DATA if model == "gpt2_12l" else DATA.with_name(f"explorer_browser_{model}.json")


def write(result: dict[str, Any]) -> None:
    DATA.parent.mkdir(exist_ok=True)
    data_file(result["model"]).write_text(json.dumps(result, indent=1) + "\n")
    results = [json.loads(f.read_text()) for f in sorted(DATA.parent.glob("explorer_browser*.json"))]
    text = PAGE.read_text()
    head = text.split(FIGURES)[0].rstrip("\n")
    PAGE.write_text(f"{head}\n\n{render(results)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2_12l")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--ops", help="delegate set to pick first (default: matrix for gpt2_96l, else the model's)")
    parser.add_argument("--write", action="store_true", help="store docs/data/explorer_browser*.json, docs section")
    args = parser.parse_args()
    ops = args.ops if args.ops is not None else ("matrix" if args.model == "gpt2_96l" else "")
    result = measure(args.model, args.repeats, ops)
    print(json.dumps(result, indent=1))
    if args.write:
        write(result)


if __name__ == "__main__":
    main()
