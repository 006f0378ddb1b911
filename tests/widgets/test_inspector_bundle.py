"""The built bundle (widgets/static/graph_view.js) renders the inspector's rows as Python sends them, in headless
Chromium with a stand-in for the anywidget model (no JupyterLab): a copy's rows in order, its what-if row saying how
to ask for it (the explorer computes it on its "what if?" button and shows it under the graph), a delegate's rows,
and a hand-made node without rows through the fallback fields."""

from __future__ import annotations

from pathlib import Path

import pytest
from bundle_page import bundle_page
from devcopy_widgets import PlacementExplorer
from devcopy_widgets.graph_inspector import PENDING

pytestmark = pytest.mark.browser

BUNDLE = Path(__file__).resolve().parents[2] / "widgets" / "static" / "graph_view.js"
PAGE = """<html><body><div id="host" style="width:1200px"></div><script type="module">
import view from "./graph_view.js";
const values = await (await fetch("state.json")).json();
const handlers = {};
const model = { get: (k) => values[k], set: (k, v) => { values[k] = v; }, save_changes() {}, send() {},
  on: (event, f) => { (handlers[event] ||= []).push(f); }, off() {} };
view.render({ model, el: document.getElementById("host") });
window.change = (key, value) => { values[key] = value; (handlers[`change:${key}`] || []).forEach((f) => f()); };
window.ready = true;
</script></body></html>"""
TRAITS = ("nodes", "elements", "layout_version", "collapsed", "selected", "legend", "counts", "height")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    explorer = PlacementExplorer(model="cpu_between")
    state = {k: getattr(explorer.graph, k) for k in TRAITS}
    with bundle_page(tmp_path_factory.mktemp("bundle"), BUNDLE, PAGE, state) as tab:
        yield tab, explorer


def shown_rows(tab) -> list[list[str]]:
    return tab.eval_on_selector_all(
        ".dgv-inspector tr", "rows => rows.map(r => [r.querySelector('th').innerText, r.querySelector('td').innerText])"
    )


def test_a_copys_rows_show_in_order_and_its_what_if_row_says_how_to_ask(page):
    tab, explorer = page
    sent = next(n for n in explorer.graph.nodes if n["id"] == "cumsum_h2d")
    tab.evaluate("change('selected', 'cumsum_h2d')")
    expected = [list(row) for row in sent["rows"] if row[1]]  # empty texts are left out
    assert shown_rows(tab)[: len(expected)] == expected and len(expected) > 10
    assert tab.inner_text(".dgv-row-what-if td") == PENDING  # a click places nothing; the button does


def test_a_delegates_rows_and_a_node_without_rows(page):
    tab, explorer = page
    tab.evaluate("change('selected', 'delegate_1')")
    rows = dict(shown_rows(tab))
    assert (rows["ops"], rows["reads"], rows["device"]) == ("1: mul.Tensor", "2 values, 128 B", "cuda:0")
    bare = [{k: v for k, v in n.items() if k != "rows"} for n in explorer.graph.nodes]
    tab.evaluate("(nodes) => change('nodes', nodes)", bare)
    assert dict(shown_rows(tab))["op"] == "delegate_1"  # the fallback fields of a node shown by hand
