"""The graph view's data and widget: nodes from a placed graph with their module, groups that collapse past a
threshold and open within a budget, and recolouring that keeps the layout."""

import itertools

import pytest
from devcopy_widgets import PlacementExplorer, PlacementState, graph_view
from devcopy_widgets import graph_view_data as data
from devcopy_widgets.graph_view import COLLAPSED_ITEMS, OPEN_ITEMS, OPEN_RANKS, SHOW_ALL_UP_TO, GraphView, chain_length
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.names import DIRECTIONS

# matmuls, views and softmax delegated; layer norms and the qkv split stay on CPU, so copies cross module borders
BLOCK_OPS = (
    "view.default",
    "permute.default",
    "addmm.default",
    "expand.default",
    "bmm.default",
    "div.Tensor",
    "_softmax.default",
    "clone.default",
    "add.Tensor",
    "relu.default",
)


@pytest.fixture(scope="module")
def block():
    """transformer_block placed with ExecuTorch's strategy: its nodes and edges as the view gets them."""
    placed = PlacementState(model="transformer_block", delegate_ops=BLOCK_OPS).placed()
    nodes, edges = data.graph_elements(placed)
    return placed, {n["id"]: n for n in nodes}, edges


def layered(layers: int, per_module: int) -> tuple[list[dict], list[tuple[str, str]]]:
    """A chain through `layers` blocks `h.i` of two modules (attn, mlp) of `per_module` nodes each, then a copy."""
    nodes = [{"id": "x", "label": "x", "kind": "input", "device": "cpu", "module": ""}]
    for i in range(layers):
        for part in ("attn", "mlp"):
            nodes += [
                {"id": f"h{i}_{part}_{k}", "label": "op", "kind": "cpu_op", "device": "cpu", "module": f"h.{i}.{part}"}
                for k in range(per_module)
            ]
    nodes.append({"id": "out_h2d", "label": "copy", "kind": "h2d", "device": "cuda:0", "module": nodes[-1]["module"]})
    return nodes, [(a["id"], b["id"]) for a, b in itertools.pairwise(nodes)]


def shown(view: GraphView) -> set[str]:
    return {e["data"]["id"] for e in view.elements if "source" not in e["data"]}


def test_every_node_and_data_edge_of_the_placed_graph_is_there(block):
    placed, nodes, edges = block
    graph = placed.graph_module.graph
    assert list(nodes) == [n.name for n in graph.nodes]
    assert len(edges) == sum(len(n.all_input_nodes) for n in graph.nodes)
    assert nodes["delegate_0"]["users"] == ("view_1",) and nodes["view_1_d2h"]["inputs"] == ("view_1",)


def test_nodes_sit_in_their_innermost_module_and_copies_in_the_module_of_what_they_copy(block):
    _, nodes, _ = block
    assert nodes["native_layer_norm"]["module"] == "norm1"
    assert nodes["delegate_0"]["module"] == "qkv"  # all its ops are qkv's Linear
    assert nodes["p_norm2_weight"]["module"] == "norm2"  # a constant sits with its only reader
    copies = [n for n in nodes.values() if n["kind"] in DIRECTIONS]
    assert len(copies) == 9
    for copy in copies:
        assert copy["module"] == nodes[copy["inputs"][0]]["module"], copy["id"]
    assert nodes["getitem_h2d"]["module"] == "norm1" and nodes["view_1_d2h"]["module"] == "qkv"


def test_copies_carry_bytes_with_units_and_their_predicted_time(block):
    _, nodes, _ = block
    copy = nodes["view_1_d2h"]
    assert (copy["bytes"], copy["bytes_text"]) == (768, "768 B")
    assert copy["predicted_s"] > 0  # the price and its basis (bench.cost_model.price_text)
    assert copy["predicted_text"].endswith(
        f"as on NVIDIA H200 (cupy), not a time of the simulated backend, pageable host memory, wall clock: "
        f"{copy['predicted_s'] * 1e6:.1f} us"
    )
    assert copy["label"] == "D2H view_1_d2h\nf32[1,4,48] 768 B"


def test_groups_nest_by_module_path_and_count_every_node_below_them():
    nodes, _ = layered(layers=2, per_module=3)
    groups = data.module_groups(nodes)
    assert set(groups) == {"h", "h.0", "h.1", "h.0.attn", "h.0.mlp", "h.1.attn", "h.1.mlp"}
    assert (groups["h.0.attn"].parent, groups["h.0"].parent) == ("h.0", "h")
    assert (groups["h"].size, groups["h.1"].size, groups["h.1.mlp"].size) == (13, 7, 4)  # the copy is in h.1.mlp
    assert groups["h.1"].label == "h.1"


def test_small_graphs_open_with_no_group_collapsed():
    nodes, edges = layered(layers=2, per_module=(SHOW_ALL_UP_TO - 2) // 4)
    assert len(nodes) <= SHOW_ALL_UP_TO
    view = GraphView(nodes, edges)
    assert view.collapsed == []
    assert shown(view) >= {n["id"] for n in nodes}


@settings(max_examples=25, deadline=None)
@given(layers=st.integers(2, 24), per_module=st.integers(10, 140))
def test_big_graphs_open_collapsed_and_any_node_shows_after_opening_the_group_that_holds_it(layers, per_module):
    nodes, edges = layered(layers, per_module)
    view = GraphView(nodes, edges)
    if len(nodes) <= SHOW_ALL_UP_TO:
        assert view.collapsed == []
        return
    items = shown(view) - {f"{data.GROUP_PREFIX}{g}" for g in view._groups if g not in view.collapsed}
    assert len(items) <= OPEN_ITEMS and (view.collapsed or len(nodes) <= OPEN_ITEMS)
    boxes = {g for g in view.collapsed if data.representative(g, set(view.collapsed)) == g}
    assert len({g.count(".") for g in boxes}) <= 1  # whole levels open: the layers are boxes, none half open
    for node in (nodes[1], nodes[len(nodes) // 2], nodes[-1]):  # first click: the box that stands for it
        view.reset_groups()
        box = data.representative(node["module"], set(view.collapsed))
        if box is not None:
            view._on_msg(view, {"action": "open", "group": data.GROUP_PREFIX + box}, [])
        assert node["id"] in shown(view)


def test_a_deep_model_opens_at_the_level_whose_longest_chain_fits_the_canvas():
    """Twelve layers in a row are ~20 ranks: more than fit the canvas with readable text, so the model opens on the
    level above them (the layers inside one box), not on 12 boxes running off the canvas."""
    nodes, edges = layered(layers=12, per_module=12)
    view = GraphView(nodes, edges)
    assert chain_length(nodes, edges, set(view.collapsed)) <= OPEN_RANKS
    assert "h" in view.collapsed  # the layers stay inside their box
    view.open_group("h")
    assert chain_length(nodes, edges, set(view.collapsed)) > OPEN_RANKS  # opening them is the user's choice


def test_a_change_goes_to_the_page_as_a_patch_of_what_changed_and_the_state_keeps_the_whole_lists():
    nodes, edges = layered(layers=2, per_module=3)
    view = GraphView(nodes, edges)
    sent: list[dict] = []
    view.send = lambda content, buffers=None: sent.append(content)  # type: ignore[method-assign]
    revision = view.revision
    view.update_nodes({"h0_mlp_1": {"device": "cuda:1"}})
    [patch] = sent
    assert (patch["kind"], patch["base"], patch["revision"]) == ("graph_patch", revision, view.revision)
    assert patch["nodes"]["update"] == [["h0_mlp_1", {"device": "cuda:1"}]]  # the changed field, not the node
    assert patch["nodes"]["set"] == [] and patch["nodes"]["order"] is None
    assert [e["data"]["id"] for e in patch["elements"]["set"]] == ["h0_mlp_1"] and not patch["elements"]["remove"]
    assert not any(view._should_send_property(k, getattr(view, k)) for k in GraphView.PATCHED)
    state = view.get_state()
    assert (state["nodes"], state["elements"], state["data_revision"]) == (view.nodes, view.elements, view.revision)
    view.close_group("h.1")  # a structural change: ids go, a box comes, the order is sent
    assert sent[-1]["elements"]["order"] == [e["data"]["id"] for e in view.elements]
    assert "h1_mlp_0" in sent[-1]["elements"]["remove"] and sent[-1]["nodes"] == {
        "set": [],
        "update": [],
        "remove": [],
        "order": None,
    }


def test_collapse_groups_collapses_a_graph_shown_whole_to_its_top_modules():
    nodes, edges = layered(layers=2, per_module=(SHOW_ALL_UP_TO - 2) // 4)
    view = GraphView(nodes, edges)
    assert view.collapsed == []
    view._on_msg(view, {"action": "reset"}, [])  # the "collapse groups" button
    assert view.collapsed == ["h.0.attn", "h.0.mlp", "h.1.attn", "h.1.mlp"]
    assert shown(view) - {"group:h", "group:h.0", "group:h.1"} == {"x"} | {f"group:{g}" for g in view.collapsed}
    assert view.counts["visible_nodes"] <= COLLAPSED_ITEMS


def test_edges_into_a_collapsed_group_end_at_its_box_once():
    nodes, edges = layered(layers=2, per_module=3)
    view = GraphView(nodes, edges)
    view.close_group("h.0")
    ends = [(e["data"]["source"], e["data"]["target"]) for e in view.elements if "source" in e["data"]]
    assert ("x", "group:h.0") in ends and ("group:h.0", "h1_attn_0") in ends
    assert not any(n.startswith("h0_") for n in shown(view))
    assert len(ends) == len(set(ends)) == view.counts["visible_edges"]


def test_recolouring_the_same_nodes_restyles_without_a_new_layout():
    nodes, edges = layered(layers=2, per_module=3)
    view = GraphView(nodes, edges)
    version = view.layout_version
    view.update_nodes({"h0_mlp_1": {"device": "cuda:1", "kind": "delegate"}})
    element = next(e for e in view.elements if e["data"]["id"] == "h0_mlp_1")
    assert (element["data"]["colour"], element["classes"]) == (data.DEVICE_COLOURS["cuda:1"], "delegate")
    assert view.counts["devices"]["cuda:1"] == 1
    view.show([{**n, "device": "cuda:0"} for n in nodes], edges)
    assert view.layout_version == version
    assert view.legend == [{"device": "cuda:0", "colour": data.DEVICE_COLOURS["cuda:0"], "count": len(nodes)}]
    view.show(nodes[:-1], edges[:-1])
    assert view.layout_version == version + 1


def test_selecting_a_hidden_node_opens_the_groups_around_it():
    nodes, edges = layered(layers=8, per_module=30)
    view = GraphView(nodes, edges)
    assert "h7_mlp_29" not in shown(view)
    view.selected = "h7_mlp_29"
    assert "h7_mlp_29" in shown(view)
    assert not {"h", "h.7", "h.7.mlp"} & set(view.collapsed)


def test_bad_input_names_what_was_wrong():
    nodes, edges = layered(layers=1, per_module=2)
    with pytest.raises(ValueError, match=r"unknown nodes \['ghost'\]"):
        GraphView(nodes, [*edges, ("x", "ghost")])
    view = GraphView(nodes, edges)
    with pytest.raises(ValueError, match=r"unknown node ids \['ghost'\] or fields \['colour'\]"):
        view.update_nodes({"ghost": {"colour": "red"}})
    with pytest.raises(ValueError, match="No module group 'h.9'"):
        view.open_group("h.9")


def test_the_explorer_relays_out_on_a_strategy_switch_and_only_recolours_on_a_new_target():
    explorer = PlacementExplorer(model="shared_input", partition="per_node")
    graph = explorer.graph
    version, kinds = graph.layout_version, graph.counts["kinds"]
    assert (kinds["h2d"], kinds["delegate"]) == (4, 4)
    explorer.target.value = "cuda:1"
    assert graph.layout_version == version
    assert graph.counts["devices"]["cuda:1"] > 0 and "cuda:0" not in graph.counts["devices"]
    explorer.strategy.value = "dedupe"
    assert graph.layout_version == version + 1 and graph.counts["kinds"]["h2d"] == 2


def test_the_graph_says_busy_while_the_explorer_recomputes_and_redraws_once():
    explorer = PlacementExplorer(model="shared_input", partition="per_node")
    graph, seen = explorer.graph, []
    show = graph.show
    graph.show = lambda *args: (seen.append(graph.busy), show(*args))  # type: ignore[method-assign]
    revision = graph.revision
    explorer.strategy.value = "dedupe"
    assert seen == [True] and not graph.busy
    assert graph.revision == revision + 1  # the browser draws once per revision and echoes it (data-render-done)


def test_a_comparison_for_older_settings_never_overwrites_the_current_one():
    explorer = PlacementExplorer(model="shared_input", partition="per_node")

    class Refusing:
        def executorch_counts(self):
            raise RuntimeError("no ExecuTorch here")

    explorer.executorch.value = "current"
    explorer._compare(explorer._comparison - 1, Refusing())  # type: ignore[arg-type]
    assert explorer.executorch.value == "current"
    explorer._compare(explorer._comparison, Refusing())  # type: ignore[arg-type]
    assert "no ExecuTorch here" in explorer.executorch.value


def test_new_nodes_in_the_same_modules_keep_the_groups_the_user_opened(monkeypatch):
    nodes, edges = layered(layers=8, per_module=30)
    view = GraphView(nodes, edges)
    view.open_group("h")
    view.open_group("h.3")
    view.close_group("h.5")
    opened = list(view.collapsed)
    asked: list[int] = []
    real = graph_view.initial_collapsed
    monkeypatch.setattr(graph_view, "initial_collapsed", lambda *a: asked.append(1) or real(*a))
    # another delegate set: one op of h.3.mlp renamed (a delegate now), a node of a new module h.3.mlp.act
    renamed = [{**n, "id": "delegate_0"} if n["id"] == "h3_mlp_4" else n for n in nodes]
    renamed.append({"id": "gelu", "label": "gelu", "kind": "cpu_op", "device": "cpu", "module": "h.3.mlp.act"})
    pairs = [tuple("delegate_0" if x == "h3_mlp_4" else x for x in e) for e in edges] + [("h3_mlp_0", "gelu")]
    view.show(renamed, pairs)
    assert asked == [] and view.collapsed == sorted({*opened, "h.3.mlp.act"})
    assert "delegate_0" in shown(view) and "group:h.5" in shown(view)
    other, other_edges = layered(layers=2, per_module=30)  # another model: opens as a new graph
    view.show([{**n, "module": n["module"].replace("h.", "blocks.")} for n in other], other_edges)
    assert asked == [1] and view.collapsed == real(view.nodes, view._groups, view._edges)
