"""Reading and driving the graph view in a page: its data-* counts, where a node is on screen, the kernel's answer."""

from __future__ import annotations

import json
import time

NODE_AT = """(root, [id, where]) => {
  const cy = root.devcopyCy, node = cy.getElementById(id), canvas = root.querySelector('.dgv-canvas');
  if (node.empty()) return null;
  let box = node.renderedBoundingBox({includeLabels: false});
  if (box.x1 < 0 || box.y1 < 0 || box.x2 > cy.width() || box.y2 > cy.height()) {  // off screen: as a user would pan
    cy.center(node);
    box = node.renderedBoundingBox({includeLabels: false});
  }
  const r = canvas.getBoundingClientRect();
  const x = where === 'left-edge' ? box.x1 + 4 : (box.x1 + box.x2) / 2;
  return [r.x + x, r.y + (box.y1 + box.y2) / 2];
}"""
KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle';
}"""
CELLS_DONE = """() => [...window.jupyterapp.shell.currentWidget.node.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
  .every(p => /\\[\\d+\\]/.test(p.textContent))"""
RUN_IN_KERNEL = """async (code) => {
  const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const future = kernel.requestExecute({code, silent: false, store_history: false});
  let out = '';
  future.onIOPub = (msg) => {
    if (msg.header.msg_type === 'stream') out += msg.content.text;
    if (msg.header.msg_type === 'error') out += msg.content.ename + ': ' + msg.content.evalue;
  };
  await future.done;
  return out;
}"""

NEW_CELL = """async (code) => {
  const app = window.jupyterapp, notebook = app.shell.currentWidget.content;
  notebook.activeCellIndex = notebook.widgets.length - 1;
  await app.commands.execute('notebook:insert-cell-below');
  notebook.activeCell.model.sharedModel.setSource(code);
  await app.commands.execute('notebook:run-cell');
}"""


def data(graph, key: str):
    """A data-* attribute of the graph view's root, JSON-decoded (counts are numbers, devices/kinds objects)."""
    return json.loads(graph.get_attribute(f"data-{key}"))


def wait_for_data(page, graph, condition: str, timeout: int = 60_000) -> None:
    """Wait until the JS expression `condition` over `d` (the root's dataset) holds; fail showing the dataset."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(
            f"(root) => {{ const d = root.dataset; return {condition}; }}", arg=graph.element_handle(), timeout=timeout
        )
    except PlaywrightTimeout:
        raise AssertionError(f"graph view never had {condition}: {graph.evaluate('r => ({...r.dataset})')}") from None


def node_at(graph, node_id: str, where: str = "centre") -> tuple[float, float] | None:
    """Page coordinates of a shown node's centre (or inside its frame's left edge), None when not shown; a node
    outside the canvas is centred first."""
    return graph.evaluate(NODE_AT, [node_id, where])


def run_in_kernel(page, code: str) -> str:
    """Run `code` in the open notebook's kernel (not as a cell) and return what it printed."""
    return page.evaluate(RUN_IN_KERNEL, code)


def wait_in_kernel(page, code: str, expected: str, timeout_s: float = 30.0) -> str:
    """Run `code` in the kernel until it prints `expected` (stripped) or `timeout_s` passes; the last output. A
    widget's change reaches the kernel after the one before it was acknowledged (ipywidgets sends one message at a
    time), so a value the page already shows can arrive a moment later."""
    deadline = time.monotonic() + timeout_s
    while True:
        printed = run_in_kernel(page, code).strip()
        if printed == expected or time.monotonic() > deadline:
            return printed
        page.wait_for_timeout(200)


def run_new_cell(page, code: str) -> None:
    """Add a cell holding `code` at the end of the open notebook and run it (its output shows in the page)."""
    page.evaluate(NEW_CELL, code)


LABELS_SHOWN = """(root) => {
  const cy = root.devcopyCy, zoom = cy.zoom();
  return cy.nodes().filter((n) => {
    const b = n.renderedBoundingBox({includeLabels: false});
    const onScreen = b.x2 > 0 && b.y2 > 0 && b.x1 < cy.width() && b.y1 < cy.height();
    const px = parseFloat(n.style('font-size')) * zoom;
    return onScreen && n.data('label') && px >= parseFloat(n.style('min-zoomed-font-size'));
  }).map((n) => n.id());
}"""
SCROLL_NOTEBOOK = """(dy) => {
  const scroller = window.jupyterapp.shell.currentWidget.content.node.closest('.jp-WindowedPanel-outer')
    || window.jupyterapp.shell.currentWidget.content.node;
  scroller.scrollTop += dy;
  return scroller.scrollTop;
}"""
CHANGE_THEME = "(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})"


def labels_shown(graph) -> list[str]:
    """Ids of the nodes on screen whose label cytoscape draws at the current zoom (text of at least 10 px)."""
    return graph.evaluate(LABELS_SHOWN)


def scroll_notebook(page, dy: int) -> int:
    """Scroll the open notebook's own scrolling element (not the window) by `dy` pixels; its new scrollTop."""
    return page.evaluate(SCROLL_NOTEBOOK, dy)


def change_theme(page, theme: str) -> None:
    """Switch JupyterLab's theme ('JupyterLab Dark', 'JupyterLab Light') as its Settings menu does."""
    page.evaluate(CHANGE_THEME, theme)


def brightness(css_colour: str) -> float:
    """0 (black) to 1 (white) from a computed `rgb(r, g, b)` colour."""
    channels = [float(v) for v in css_colour[css_colour.index("(") + 1 : css_colour.index(")")].split(",")[:3]]
    return sum(channels) / (3 * 255)


def run_all_cells(page, lab, notebook: str) -> None:
    """Open `notebook` (alone), wait for its kernel, run every cell and wait until each has an execution count."""
    page.goto(f"{lab.url}/lab/tree/{notebook}?reset&token={lab.token}")  # reset: no tab of an earlier page
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook")
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(CELLS_DONE, timeout=180_000)


KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def write_notebook(path, *cells: str) -> None:
    """A notebook of these code cells on the default Python kernel (no kernel-picker dialog when it opens)."""
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    notebook.metadata["kernelspec"] = KERNELSPEC
    nbformat.write(notebook, str(path))


# For a graph view's root element and "top" (its top-level items) or "all": every node outside the canvas (rendered
# box, label included), the nodes whose label shows smaller than 10 px, and the view's zoom and size.
OUTSIDE_CANVAS = """(root, which) => {
  const cy = root.devcopyCy, zoom = cy.zoom();
  const nodes = which === 'top' ? cy.nodes().orphans() : cy.nodes();
  const out = nodes.filter((n) => { const b = n.renderedBoundingBox({includeOverlays: false,
    includeUnderlays: false}); return b.x1 < -0.5 || b.y1 < -0.5 || b.x2 > cy.width() + 0.5
    || b.y2 > cy.height() + 0.5; }).map((n) => n.id());
  const small = nodes.filter((n) => n.data('label') && parseFloat(n.style('font-size')) * zoom < 10)
    .map((n) => n.id());
  return {out, small, shown: nodes.length, zoom, width: cy.width(), height: cy.height()};
}"""
