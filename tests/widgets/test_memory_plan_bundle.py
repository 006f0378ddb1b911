"""The memory-plan picture renders in a browser (widgets/static/memory_plan.js, headless Chromium, a stand-in for
the anywidget model, as test_inspector_bundle.py does for the graph view): the blocks Python drew are on the page,
hovering one names its tensor, and a click sends its value back as `selected`."""

from __future__ import annotations

from pathlib import Path

import pytest
from bundle_page import bundle_page
from devcopy_widgets import PlacementExplorer

pytestmark = pytest.mark.browser

SCRIPT = Path(__file__).resolve().parents[2] / "widgets" / "static" / "memory_plan.js"
PAGE = """<html><body><div id="host" style="width:600px"></div><script type="module">
import view from "./memory_plan.js";
const values = await (await fetch("state.json")).json();
window.saved = [];
const model = { get: (k) => values[k], set: (k, v) => { values[k] = v; }, on() {}, off() {},
  save_changes() { window.saved.push(values.selected); } };
view.render({ model, el: document.getElementById("host") });
window.ready = true;
</script></body></html>"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    explorer = PlacementExplorer(model="cpu_between")
    state = {"svg": explorer.memory.svg, "summary": explorer.memory.summary}
    with bundle_page(tmp_path_factory.mktemp("memory_plan"), SCRIPT, PAGE, state) as tab:
        yield tab, explorer


def test_the_blocks_render_name_themselves_and_send_a_click(page):
    tab, explorer = page
    blocks = [b for lane in explorer.memory.picture.lanes for b in lane.blocks if b.nbytes]
    assert tab.get_attribute(".devcopy-memory-plan", "data-blocks") == str(len(blocks)) != "0"
    assert tab.inner_text(".dmp-summary") == explorer.memory.summary
    sin = next(b for b in blocks if b.node == "sin")
    rect = tab.locator(f'.dmp-block[data-value="{sin.value}"]')
    box = rect.bounding_box()
    assert box["width"] > 1 and box["height"] > 1  # drawn, not collapsed to nothing
    rect.hover()
    assert tab.inner_text(".dmp-hover") == sin.label
    rect.click()
    assert tab.evaluate("window.saved") == [str(sin.value)]
