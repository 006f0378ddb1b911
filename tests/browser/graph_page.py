"""Reading and driving the graph view in a page: its data-* counts, where a node is on screen, the kernel's answer."""

from __future__ import annotations

import json

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


def run_new_cell(page, code: str) -> None:
    """Add a cell holding `code` at the end of the open notebook and run it (its output shows in the page)."""
    page.evaluate(NEW_CELL, code)
