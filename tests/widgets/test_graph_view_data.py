"""The inspector's rows (docs/explorer.md, "The inspector"): a copy says its value, shape, dtype, bytes, devices, the
op that is not delegated (or the method boundary) behind it and what delegating that op saves, which equals placing
again with the op delegated; a delegate says its ops, bytes in and out and device, and sits in the frame of the
module most of its ops come from. On the sample models and on GPT-2 with 2 layers."""

from __future__ import annotations

import os
import re
from collections import Counter
from types import SimpleNamespace

import pytest
from devcopy_widgets import PlacementExplorer, PlacementState
from devcopy_widgets import graph_inspector as inspector
from devcopy_widgets import graph_view_data as data
from hypothesis import given
from hypothesis import strategies as st

from devcopy_lib import delegate_of, lower, models, place_devices
from devcopy_lib.names import COPY_OPS, DIRECTIONS, format_bytes

pytestmark = pytest.mark.filterwarnings("ignore:torchvision's compiled ops did not load:RuntimeWarning")


def rows_of(node: dict) -> dict[str, str]:
    return {label: text for label, text in node["rows"]}


def selected(explorer: PlacementExplorer, node_id: str) -> dict:
    """Select `node_id` as a click does, and return its node as the browser now has it."""
    explorer.graph.selected = node_id
    return next(n for n in explorer.graph.nodes if n["id"] == node_id)


def asked(explorer: PlacementExplorer, node_id: str) -> dict[str, str]:
    """The copy's rows with its what-if computed, as the explorer's "what if?" button does (a click places nothing)."""
    return {**rows_of(selected(explorer, node_id)), **dict(explorer.what_if())}


def replaced(state: PlacementState, op: str):
    """The state's placement again, with `op` delegated too, through the library's public API alone."""
    lowered = lower(state.exported(), (*state.ticked_ops(), op), state.target_device, state.partition)
    return place_devices(lowered, strategy=state.strategy).report


def expected_saving(before, after) -> str:
    """What the what-if row must say: the copies and bytes of the two placements, worded as the row words them."""
    saved = {d: before.copies.get(d, 0) - after.copies.get(d, 0) for d in DIRECTIONS}
    assert all(n >= 0 for n in saved.values()), saved  # these cases only remove copies
    fewer = " and ".join(f"{n} {d.upper()}" for d, n in saved.items() if n)
    nbytes = sum(before.copy_bytes.values()) - sum(after.copy_bytes.values())
    return f"saves {fewer} ({format_bytes(nbytes)} less per call)"


@pytest.fixture(scope="module")
def cpu_between():
    return PlacementExplorer(model="cpu_between")


@pytest.fixture(scope="module")
def gpt2():
    try:
        module, inputs = models.gpt2_2l(seq_len=32)
    except models.ModelsExtraMissing as exc:
        pytest.skip(f"the models extra is not installed: {exc}")
    return PlacementExplorer.for_model(module, inputs, name="gpt2_2l")


def test_a_copy_says_value_shape_dtype_bytes_devices_and_the_op_that_is_not_delegated(cpu_between):
    node = selected(cpu_between, "cumsum_h2d")
    rows = rows_of(node)
    assert (rows["op"], rows["shape"], rows["dtype"], rows["bytes"]) == (COPY_OPS["h2d"], "[4, 4]", "float32", "64 B")
    assert rows["value"] == "cumsum (cumsum.default)"
    assert (rows["from"], rows["to"]) == ("cpu (cumsum)", "cuda:0 (delegate_1)")
    assert rows["why"].startswith("cumsum.default (cumsum) is not delegated")
    assert rows["predicted"] == node["predicted_text"] != ""
    assert node["label"] == "H2D cumsum_h2d\nf32[4,4] 64 B"


def test_delegating_the_blocking_op_saves_what_a_re_placement_says(cpu_between):
    state = cpu_between.state
    node = selected(cpu_between, "sin_d2h")  # cumsum reads sin on the CPU
    assert node["what_if"] == ({"delegate": "cumsum.default"},)
    expected = expected_saving(state.placed().report, replaced(state, "cumsum.default"))
    assert asked(cpu_between, "sin_d2h")["what if"] == f"delegate cumsum.default: {expected}"
    assert expected.startswith("saves 2 H2D and 1 D2H")  # cumsum's own H2D, b's second H2D, sin's D2H
    assert state.ticked_ops() == PlacementState(model="cpu_between").ticked_ops()  # asking changed nothing


def test_a_method_boundary_names_the_switch_and_what_it_saves(cpu_between):
    rows = asked(cpu_between, "mul_d2h")
    assert rows["why"].startswith("method boundary: the program returns mul")
    assert rows["what if"] == "skip_d2h_for_method_outputs=True: saves 1 D2H (64 B less per call)"
    refused = asked(cpu_between, "b_h2d")["what if"]  # b feeds two delegates: the pass refuses the switch
    assert refused.startswith("skip_h2d_for_method_inputs=True: refused (PlacementError: ") and "'b'" in refused
    add = PlacementExplorer(model="add")
    assert asked(add, "a_h2d")["what if"] == "skip_h2d_for_method_inputs=True: saves 2 H2D (128 B less per call)"


def test_no_copy_anywhere_is_named_by_its_default_overload():
    for name in models.MODELS:
        nodes, _ = data.graph_elements(PlacementState(model=name).placed())
        for node in nodes:
            if node["kind"] in DIRECTIONS:
                assert node["op"] == COPY_OPS[node["kind"]] and node["op"].endswith(".out"), (name, node["id"])


def test_a_delegate_says_its_ops_the_bytes_it_reads_and_writes_and_its_device(cpu_between):
    placed = cpu_between.placed
    call = next(n for n in placed.graph_module.graph.nodes if n.name == "delegate_1")
    node = next(n for n in cpu_between.graph.nodes if n["id"] == "delegate_1")
    rows, nbytes = rows_of(node), {r.name: r.bytes for r in placed.report.rows}
    assert rows["device"] == "cuda:0" and rows["ops"] == "1: mul.Tensor"
    assert (
        rows["reads"]
        == f"2 values, {format_bytes(sum(nbytes[i.name] for i in call.all_input_nodes))}"
        == "2 values, 128 B"
    )
    assert rows["writes"] == "1 value, 64 B" and rows["constants"] == "none"
    assert "bytes" not in rows and node["label"] == "delegate_1\n1 op"


def test_every_row_is_a_label_and_a_text(cpu_between):
    for node in cpu_between.graph.nodes:
        assert all(len(row) == 2 and all(isinstance(part, str) for part in row) for row in node["rows"]), node["id"]


def test_gpt2_slice_copy_is_explained_and_its_saving_equals_a_re_placement(gpt2):
    rows = asked(gpt2, "slice_1_h2d")
    assert (rows["shape"], rows["dtype"], rows["bytes"]) == ("[1, 1]", "int64", "8 B")
    assert rows["why"].startswith("slice.Tensor (slice_1) is not delegated")
    expected = expected_saving(gpt2.state.placed().report, replaced(gpt2.state, "slice.Tensor"))
    assert rows["what if"] == f"delegate slice.Tensor: {expected}"
    assert expected.startswith("saves 3 H2D and 2 D2H")


def test_gpt2_delegates_show_bytes_and_sit_where_most_of_their_ops_come_from(gpt2):
    graph = gpt2.placed.graph_module.graph
    shown = {n["id"]: n for n in gpt2.graph.nodes}
    deeper = 0
    for call in (n for n in graph.nodes if delegate_of(n) is not None):
        inner = [
            list(n.meta["nn_module_stack"].values())[-1][0]
            for n in delegate_of(call).graph_module.graph.nodes
            if n.op == "call_function" and n.meta.get("nn_module_stack")
        ]
        home = shown[call.name]["module"]
        held = Counter(child for p in inner for child in data.ancestors(p))
        assert home == "" or 2 * held[home] > len(inner), (call.name, home)  # most of its ops are inside
        children = [c for c in held if c.rpartition(".")[0] == home]
        assert all(2 * held[c] <= len(inner) for c in children), (call.name, home)  # and in no deeper module
        deeper += home != ".".join(os.path.commonprefix([p.split(".") for p in inner]))  # the module holding all
        rows = rows_of(shown[call.name])
        assert not rows["reads"].endswith(" 0 B") and not rows["writes"].endswith(" 0 B"), rows
        owned = delegate_of(call).constants.values()
        assert rows["constants"].startswith(f"{len(owned)}, {format_bytes(sum(t.nbytes for t in owned))} ") or (
            not owned and rows["constants"] == "none"
        )
    assert deeper > 0  # some delegate spans two modules and now sits in the one holding most of it


def test_labels_carry_dtype_and_shape(gpt2):
    node = next(n for n in gpt2.graph.nodes if n["id"] == "view_39_d2h")
    assert node["label"] == "D2H view_39_d2h\nf32[1,32,50257] 6.1 MiB" and node["shape"] == "f32[1,32,50257]"


def report(h2d: int, d2h: int, h2d_bytes: int, d2h_bytes: int) -> SimpleNamespace:
    return SimpleNamespace(copies={"h2d": h2d, "d2h": d2h}, copy_bytes={"h2d": h2d_bytes, "d2h": d2h_bytes})


counts = st.integers(0, 9)
sizes = st.integers(0, 1 << 24)


@given(st.tuples(counts, counts, sizes, sizes), st.tuples(counts, counts, sizes, sizes))
def test_change_text_states_every_difference(first, second):
    before, after = report(*first), report(*second)
    text = inspector.change_text(before, after)
    said = {
        (verb, d.lower()): int(n)
        for verb, group in re.findall(r"(saves|adds) ((?:\d+ \w+(?: and )?)+)", text)
        for n, d in re.findall(r"(\d+) (H2D|D2H)", group)
    }
    for d in ("h2d", "d2h"):
        change = before.copies[d] - after.copies[d]
        assert said.get(("saves", d), 0) - said.get(("adds", d), 0) == change, text
    nbytes = sum(before.copy_bytes.values()) - sum(after.copy_bytes.values())
    if nbytes:
        assert text.endswith(f"({format_bytes(abs(nbytes))} {'less' if nbytes > 0 else 'more'} per call)")
    elif any(before.copies[d] - after.copies[d] for d in ("h2d", "d2h")):
        assert text.endswith("(same bytes per call)")
    else:
        assert text == "saves no copy"


def test_the_explorer_offers_the_real_models_and_the_delegate_presets():
    explorer = PlacementExplorer(model="mlp")
    assert set(models.REAL_MODELS) <= set(explorer.model.options)
    assert set(models.DELEGATE_SETS) <= set(explorer.preset.options)
    assert explorer.preset.value == "default"  # the default ops are ticked at first
    explorer.preset.value = "matrix"
    ticked = {box.description for box in explorer.op_boxes if box.value}
    assert ticked == set(explorer.state.model_ops()) & set(models.DELEGATE_SETS["matrix"]) == {"addmm.default"}
    assert explorer.placed.delegate_ops == ("addmm.default",)
    explorer.select_none.click()
    assert not any(box.value for box in explorer.op_boxes) and explorer.placed.report.delegates == 0
    assert explorer.preset.value == "custom"
    explorer.select_all.click()
    assert all(box.value for box in explorer.op_boxes)
    assert explorer.placed.delegate_ops == explorer.state.model_ops()


def test_a_what_if_the_state_does_not_know_is_refused_naming_the_valid_ones():
    state = PlacementState(model="add")
    with pytest.raises(ValueError, match=r"Unknown what-if \{'switch': 'hoist'\}.*skip_h2d_for_method_inputs"):
        state.placed_if({"switch": "hoist"})


def test_the_preset_shown_follows_the_ticked_ops():
    explorer = PlacementExplorer(model="add")  # add.Tensor only: in the cnn and default sets, none of the matrix ones
    assert explorer.preset.value == "default"
    explorer.preset.value = "cnn"
    assert explorer.preset.value == "cnn" and explorer.state.ticked_ops() == ("add.Tensor",)
    explorer.preset.value = "matrix"
    assert explorer.preset.value == "custom" and explorer.state.ticked_ops() == ()  # nothing of add is a matrix op
    explorer.select_all.click()
    assert explorer.preset.value == "default"
    explorer.select_none.click()
    assert explorer.preset.value == "custom" and explorer.state.ticked_ops() == ()


def test_a_host_hop_between_two_devices_names_the_peer_strategy_and_what_it_saves():
    two = {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    hop = PlacementExplorer(model="back_to_back", partition="per_node", target_device=two)
    rows = asked(hop, "add_h2d")
    assert (rows["value"], rows["from"], rows["to"]) == (
        "add (through add_d2h)",
        "cpu (add_d2h)",
        "cuda:1 (delegate_1)",
    )
    assert rows["why"].startswith("add crosses from cuda:0 to cuda:1 through the host")
    peer = place_devices(hop.state.lowered(), strategy="peer").report
    before = hop.placed.report
    assert {d: before.copies.get(d, 0) - peer.copies.get(d, 0) for d in DIRECTIONS} == {"h2d": 1, "d2h": 1, "d2d": -1}
    saved = sum(before.copy_bytes.values()) - sum(peer.copy_bytes.values())
    assert rows["what if"] == f"strategy peer: saves 1 H2D and 1 D2H, adds 1 D2D ({format_bytes(saved)} less per call)"
    direct = PlacementExplorer(model="back_to_back", partition="per_node", target_device=two, strategy="peer")
    rows = rows_of(selected(direct, "add_d2d"))
    assert rows["op"] == COPY_OPS["d2d"] and "delegates on two devices" in rows["why"] and "what if" not in rows


module_path = st.lists(st.sampled_from(["h", "0", "1", "attn", "mlp"]), min_size=1, max_size=4).map(".".join)


@given(st.lists(module_path, min_size=1, max_size=12))
def test_a_delegate_sits_in_the_deepest_module_holding_most_of_its_ops(paths):
    home = data._majority(paths)
    inside = [p for p in paths if home == "" or p == home or p.startswith(home + ".")]
    assert home == "" or 2 * len(inside) > len(paths)
    children = {p[len(home) :].lstrip(".").split(".")[0] for p in inside} - {""}
    for child in children:
        deeper = f"{home}.{child}" if home else child
        held = [p for p in paths if p == deeper or p.startswith(deeper + ".")]
        assert 2 * len(held) <= len(paths), (paths, home, deeper)


@pytest.mark.parametrize("model", ["cpu_between", "transformer_block"])
def test_nodes_kept_from_an_earlier_placement_equal_the_ones_made_anew(model, monkeypatch):
    """graph_elements keeps the dict of a node that is no copy or delegate and reuses it where the node comes again
    unchanged (another delegate set, another strategy); every dict it hands out equals one made from scratch, and a
    node whose neighbours changed gets a new one."""
    state = PlacementState(model=model)
    ops = state.model_ops()
    settings = [(ops, "executorch"), (ops[1:], "executorch"), (ops[1:], "dedupe"), (ops[:1], "executorch")]
    placements = []
    for delegated, strategy in settings:
        state.delegate_ops, state.strategy = delegated, strategy
        placements.append(state.placed())
    warm = [data.graph_elements(placed) for placed in placements]
    monkeypatch.setattr(data, "_plain", {})
    for placed, (nodes, edges) in zip(placements, warm, strict=True):
        cold = data.graph_elements(placed)
        assert (nodes, edges) == cold
    first, second = ({n["id"]: n for n in nodes} for nodes, _ in warm[:2])
    reused = [i for i in first.keys() & second.keys() if first[i] is second[i]]
    assert reused and all(first[i]["kind"] in data.PLAIN_KINDS for i in reused)
    moved = [i for i in first.keys() & second.keys() if first[i]["users"] != second[i]["users"]]
    assert all(first[i] is not second[i] for i in moved)
