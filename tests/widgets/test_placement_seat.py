"""The explorer on big models ("The seat, round 2"): a click on a copy places nothing (its what-if is computed on
the "what if?" button, once per placement and copy, and sends only its own rows), every action that can take over
0.3 s marks the graph busy, the graph has the whole width, the diff's headers sit over their columns, a failed export
clears the last export's note, and a first run does its work once."""

from __future__ import annotations

import json
from typing import Any

import comm
import ipywidgets as w
import pytest
from devcopy_widgets import PlacementExplorer, PlacementState, placement, placement_state
from devcopy_widgets.graph_inspector import PENDING


def counted(monkeypatch: pytest.MonkeyPatch, name: str) -> list[Any]:
    """Count calls of `name` (place_devices, lower or export_program) as the explorer's state makes them."""
    calls: list[Any] = []
    real = getattr(placement_state, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(placement_state, name, counting)
    return calls


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every message the widgets send to the browser, through a fake comm: its state keys and its size in bytes."""
    messages: list[dict[str, Any]] = []

    def send(self: Any, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        size = len(json.dumps(data, default=str)) + sum(len(b) for b in buffers or ())
        messages.append({"keys": sorted((data or {}).get("state", {})), "bytes": size})

    monkeypatch.setattr(comm.DummyComm, "send", send)
    return messages


def busy_changes(explorer: PlacementExplorer) -> list[bool]:
    seen: list[bool] = []
    explorer.graph.observe(lambda change: seen.append(change["new"]), names="busy")
    return seen


def test_a_click_on_a_copy_places_nothing_and_its_what_if_is_computed_once_per_placement(monkeypatch):
    explorer = PlacementExplorer(model="cpu_between")
    places = counted(monkeypatch, "place_devices")
    explorer.graph.selected = "sin_d2h"
    assert places == []  # before: every click placed the program again (2.2-3.5 s on a 96-layer model)
    node = next(n for n in explorer.graph.nodes if n["id"] == "sin_d2h")
    assert dict(node["rows"])["what if"] == PENDING and not explorer.what_if_button.disabled
    pending = explorer.what_if_html.value
    assert "press &#x27;what if?&#x27;" in pending and "(delegate cumsum.default)" in pending
    explorer.what_if_button.click()
    assert len(places) == 1 and explorer.error is None
    rows = explorer.what_if()
    assert rows == [["what if", "delegate cumsum.default: saves 2 H2D and 1 D2H (192 B less per call)"]]
    assert "saves 2 H2D and 1 D2H" in explorer.what_if_html.value and explorer.what_if_button.disabled
    explorer.graph.selected = "mul"  # not a copy: nothing to ask
    assert explorer.what_if_html.value == "" and explorer.what_if_button.disabled
    explorer.graph.selected = "sin_d2h"  # back: the cached rows show at once
    assert len(places) == 1 and "saves 2 H2D and 1 D2H" in explorer.what_if_html.value
    explorer.strategy.value = "dedupe"  # another placement: its own what-if, asked for again
    placed = len(places)
    explorer.graph.selected = "sin_d2h"
    assert len(places) == placed and not explorer.what_if_button.disabled
    explorer.strategy.value = "executorch"  # the first placement again: its what-if is still known
    explorer.graph.selected = "sin_d2h"
    assert "saves 2 H2D and 1 D2H" in explorer.what_if_html.value and explorer.what_if_button.disabled


def test_asking_for_the_what_if_of_no_copy_says_what_to_select():
    explorer = PlacementExplorer(model="cpu_between")
    explorer.what_if()
    assert "select a copy" in explorer.error_html.value and explorer.placed is not None


def test_the_what_if_sends_only_its_own_rows_never_the_graphs_nodes(sent):
    explorer = PlacementExplorer(model="cpu_between")
    nodes_bytes = len(json.dumps(explorer.graph.nodes))
    sent.clear()
    explorer.graph.selected = "sin_d2h"  # the click: the selection and the memory plan's highlight
    assert not any("nodes" in m["keys"] or "elements" in m["keys"] for m in sent), sent
    sent.clear()
    explorer.what_if_button.click()
    assert explorer.error is None and "saves 2 H2D" in explorer.what_if_html.value
    assert not any("nodes" in m["keys"] or "elements" in m["keys"] for m in sent), sent
    # before: the what-if re-sent every node with its rows (7.5 MB on a 96-layer GPT-2)
    assert sum(m["bytes"] for m in sent) < min(2048, nodes_bytes / 4), sent


def test_every_action_that_can_take_long_marks_the_graph_busy_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    explorer = PlacementExplorer(model="mlp")
    seen = busy_changes(explorer)
    explorer.preset.value = "matrix"  # a new delegate set: lowered again (1.7-4.8 s on a 96-layer model)
    assert seen == [True, False] and explorer.state.ticked_ops() == ("addmm.default",)
    explorer.select_none.click()
    explorer.select_all.click()
    assert seen == [True, False] * 3
    explorer.model.value = "cpu_between"
    explorer.graph.selected = "sin_d2h"
    explorer.what_if_button.click()
    explorer.export_button.click()
    explorer.trace_button.click()
    assert seen == [True, False] * 7 and explorer.error is None and not explorer.graph.busy


def test_the_graph_has_the_whole_width_and_the_memory_plan_folds_below_it():
    explorer = PlacementExplorer(model="cpu_between")
    assert explorer.graph in explorer.children  # a row of its own, not beside the memory plan
    assert explorer.graph.layout.width == "100%" and explorer.graph.layout.flex is None
    below = explorer.children[explorer.children.index(explorer.graph) + 1 :]
    assert explorer.memory_section in below and isinstance(explorer.memory_section, w.Accordion)
    assert explorer.memory_section.children == (explorer.memory,) and explorer.memory_section.selected_index == 0
    boxes = [c for c in explorer.children if isinstance(c, w.Box) and not isinstance(c, w.Accordion)]
    assert not any(explorer.memory in box.children for box in boxes)
    assert any(explorer.what_if_button in box.children for box in boxes)  # every control stays reachable
    explorer.memory_section.selected_index = None  # folded: the graph keeps its place
    assert explorer.memory.picture is not None


def test_the_diffs_headers_are_aligned_and_padded_as_its_cells():
    view = PlacementExplorer(model="cpu_between")
    view.compare_with.value = "dedupe"
    assert view.diff.value.startswith('<div class="devcopy-diff"><style>')
    rule = view.diff.value.split(".devcopy-diff th,.devcopy-diff td{", 1)[1].split("}", 1)[0]
    assert "text-align:left" in rule and "padding:1px 10px 1px 0" in rule


def test_a_failed_export_leaves_only_its_error_not_the_last_exports_note(tmp_path):
    view = PlacementExplorer(model="add")
    written = view.export_report(str(tmp_path / "r.html"))
    assert f"report written to {written}" in view.export_note.value
    view.report_path.value = str(tmp_path / "missing" / "r.html")
    view.export_button.click()
    assert "does not exist" in view.error_html.value and view.export_note.value == ""
    view.export_trace(str(tmp_path / "t.json"))
    assert "written to" in view.export_note.value and view.error is None
    view.export_trace(str(tmp_path / "missing" / "t.json"))
    assert view.error is not None and view.export_note.value == ""


def test_a_state_says_what_its_placement_depends_on():
    state = PlacementState(model="cpu_between")
    key = state.placed_key()
    assert state.placed() is state.placed() and state.placed_key() == key
    state.strategy = "dedupe"
    assert state.placed_key() != key


def test_a_folded_memory_plan_sends_nothing_on_a_click_and_draws_the_highlight_when_opened(sent):
    explorer = PlacementExplorer(model="cpu_between")
    explorer.memory_section.selected_index = None
    sent.clear()
    explorer.graph.selected = "sin_d2h"
    assert not any("svg" in m["keys"] for m in sent), sent  # before: every click re-sent the whole SVG
    assert 'dmp-picked" data-value' not in explorer.memory.svg
    explorer.memory_section.selected_index = 0
    assert any("svg" in m["keys"] for m in sent) and 'data-node="sin_d2h"' in explorer.memory.svg
    assert 'dmp-picked" data-value' in explorer.memory.svg


def test_a_big_program_opens_with_its_memory_plan_folded_and_undrawn(monkeypatch):
    monkeypatch.setattr(placement, "MEMORY_OPEN_UP_TO", 10)
    big = PlacementExplorer(model="cpu_between")  # 14 placed nodes
    assert big.memory_section.selected_index is None and big.memory.svg == "" and big.memory.picture is None
    big.strategy.value = "dedupe"  # while folded, nothing of the memory plan is computed
    assert big.memory.picture is None
    seen = busy_changes(big)
    big.memory_section.selected_index = 0  # opened: the placement shown now is drawn
    assert big.memory.picture is not None and seen == [True, False]
    assert big.memory.summary.startswith("cpu: buffer 1") and "dmp-block" in big.memory.svg
    big.graph.selected = "sin_d2h"
    assert 'dmp-picked" data-value' in big.memory.svg
    monkeypatch.setattr(placement, "MEMORY_OPEN_UP_TO", 100)
    assert PlacementExplorer(model="cpu_between").memory_section.selected_index == 0


def test_opening_an_explorer_exports_lowers_and_places_once(monkeypatch):
    """A guard, not a fix: profiled in a kernel (nbclient), a first run of `PlacementExplorer(model="gpt2_12l")` and
    a first selection of it in the dropdown each export, lower and place once; what a first run adds is imports."""
    counts = {name: counted(monkeypatch, name) for name in ("export_program", "lower", "place_devices")}
    explorer = PlacementExplorer(model="cpu_between")
    assert {name: len(calls) for name, calls in counts.items()} == dict.fromkeys(counts, 1)
    explorer.model.value = "mlp"
    assert {name: len(calls) for name, calls in counts.items()} == dict.fromkeys(counts, 2)


def test_the_bytes_by_placement_table_is_made_only_when_shown(monkeypatch):
    explorer = PlacementExplorer(model="cpu_between")
    assert "<td>plain</td>" in explorer.placements.value and "<td>resident</td>" in explorer.placements.value
    explorer.placements_section.selected_index = None
    read: list[Any] = []
    real = placement.summary.placement_rows
    monkeypatch.setattr(placement.summary, "placement_rows", lambda report: read.append(report) or real(report))
    explorer.strategy.value = "dedupe"  # folded: the three extra placements are not made
    assert read == [] and explorer.placements.value == ""
    seen = busy_changes(explorer)
    explorer.placements_section.selected_index = 0
    assert read == [explorer.placed.report] and "<td>plain</td>" in explorer.placements.value and seen == [True, False]
    monkeypatch.setattr(placement, "MEMORY_OPEN_UP_TO", 10)
    big = PlacementExplorer(model="cpu_between")
    assert big.placements_section.selected_index is None and big.placements.value == ""


def test_the_table_of_nodes_of_a_big_program_opens_folded_and_is_made_only_when_shown(monkeypatch):
    monkeypatch.setattr(placement, "MEMORY_OPEN_UP_TO", 10)
    big = PlacementExplorer(model="cpu_between")  # 14 placed nodes
    assert big.table_section.children == (big.table,) and big.table_section in big.children
    assert big.table_section.selected_index is None and big.table.value == ""
    read: list[Any] = []
    real = placement.summary.table_rows
    monkeypatch.setattr(placement.summary, "table_rows", lambda report: read.append(report) or real(report))
    big.strategy.value = "dedupe"  # folded: no row is made or sent
    assert read == [] and big.table.value == ""
    big.table_section.selected_index = 0
    assert read == [big.placed.report] and "sin_d2h" in big.table.value
    monkeypatch.setattr(placement, "MEMORY_OPEN_UP_TO", 100)
    assert "sin_d2h" in PlacementExplorer(model="cpu_between").table.value


def test_an_op_toggled_back_shows_its_graph_without_making_its_nodes_again(monkeypatch):
    explorer = PlacementExplorer(model="cpu_between")
    made: list[Any] = []
    real = placement.graph_elements
    monkeypatch.setattr(placement, "graph_elements", lambda placed: made.append(placed) or real(placed))
    box = next(b for b in explorer.op_boxes if b.value)
    shown = explorer.graph.nodes
    box.value = False  # a new delegate set: its nodes are made
    assert made == [explorer.placed] and explorer.graph.nodes != shown
    box.value = True  # back: the placement and its nodes were kept
    assert made == [made[0]] and explorer.graph.nodes == shown
    box.value = False
    assert made == [made[0]] and explorer.graph.nodes == real(explorer.placed)[0]
