"""The graph drawing: columns by depth, copies outlined and labelled with bytes and predicted time."""
from devcopy_widgets.graph_svg import depths, graph_svg

NODES = [
    {"name": "a", "kind": "input", "device": "cpu", "bytes": 16},
    {"name": "a_h2d", "kind": "h2d", "device": "cuda:0", "bytes": 16, "predicted_s": 2.5e-5},
    {"name": "delegate_0", "kind": "delegate", "device": "cuda:0", "bytes": 0},
    {"name": "output", "kind": "output", "device": "cpu", "bytes": 0},
]
EDGES = [("a", "a_h2d"), ("a_h2d", "delegate_0"), ("delegate_0", "output")]


def test_a_node_sits_one_column_right_of_its_deepest_input():
    assert depths([n["name"] for n in NODES], [*EDGES, ("a", "output")]) == {
        "a": 0, "a_h2d": 1, "delegate_0": 2, "output": 3}


def test_copies_are_marked_with_bytes_and_predicted_time():
    svg = graph_svg(NODES, EDGES)
    assert svg.count('class="devcopy-node devcopy-h2d"') == 1
    assert "16 B, 25.0 us" in svg
    assert svg.count("<line") == len(EDGES)


def test_nodes_are_coloured_by_device_with_a_legend():
    svg = graph_svg(NODES, EDGES)
    assert 'fill="#c8e6c9"' in svg and 'fill="#e3eaf5"' in svg
    assert ">cuda:0</text>" in svg and ">cpu</text>" in svg
