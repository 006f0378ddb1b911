"""What `place_devices` hands back (docs/semantics.md §6): every node tagged with a Device, the strategy and options
recorded, the graph module's class kept, a report whose comparison places the other strategies under the same
options, and a pass that can run again after the graph was edited."""

import pytest
import torch
from placement_helpers import Fn, TransposedWeight, count, inputs

from devcopy_lib.devices import Device
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.lowering.nodes import call_device, device_of, is_d2h, node_kind
from devcopy_lib.placement.place import PlaceDevicesPass, PlacementError, place_devices

TWO = {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}


def _lowered(fn, n, ops=("add.Tensor",), **lower):
    return export_and_lower(Fn(fn), inputs(n), list(ops), **{"target_device": "cuda:0", **lower})


def test_every_node_is_tagged_with_a_device():
    placed = place_devices(_lowered(lambda a, b: torch.relu(a + b), 2))
    assert all(isinstance(node.meta.get("device"), Device) for node in placed.graph_module.graph.nodes)
    assert {row.device for row in placed.report.rows} == {"cpu", "cuda:0"}


@pytest.mark.parametrize("strategy", ["executorch", "dedupe", "peer"])
def test_strategy_and_options_are_recorded(strategy):
    placed = place_devices(_lowered(lambda a, b: a + b, 2), strategy=strategy, skip_d2h_for_method_outputs=True)
    expected = {
        "skip_h2d_for_method_inputs": False,
        "skip_d2h_for_method_outputs": True,
        "non_cpu_memory_planning": True,
        "hoist_constants": False,
        "resident_buffers": False,
    }
    assert placed.strategy == placed.report.strategy == strategy
    assert placed.options == placed.report.options == expected


def test_the_placed_module_keeps_its_class_name():
    lowered = _lowered(lambda a, b: a + b, 2)
    assert type(place_devices(lowered).graph_module).__name__ == type(lowered.graph_module).__name__ == "LoweredGraph"


def test_constants_are_hoisted_only_when_asked():
    lowered = export_and_lower(TransposedWeight(), inputs(1), ["mm.default"])
    plain, hoisted = place_devices(lowered), place_devices(lowered, hoist_constants=True)
    assert (plain.report.constant_derived["hoisted"], hoisted.report.constant_derived["hoisted"]) == (0, 1)
    assert (count(plain.graph_module, "h2d"), count(hoisted.graph_module, "h2d")) == (2, 2)
    assert all("error" not in entry for entry in hoisted.report.comparison)
    per_call_h2d = [[entry["copies"]["h2d"] for entry in placed.report.comparison] for placed in (plain, hoisted)]
    assert per_call_h2d == [[2, 2], [1, 1]]  # the other strategies hoist (or not) likewise


def _shared_input():
    """a feeds two delegates on cuda:0; only `dedupe` may skip its H2D."""
    return _lowered(lambda a, b: (a + b) * a, 2, ["add.Tensor", "mul.Tensor"], partition="per_node")


@pytest.mark.parametrize(
    "lowered, options",
    [
        (_shared_input, {"skip_h2d_for_method_inputs": True}),
        (
            lambda: _lowered(lambda a, b, c: (a + b) + c, 3, partition="per_node", target_device=TWO),
            {"peer_access": False},
        ),
        (
            lambda: _lowered(lambda a, b, c: (a + b) + c, 3, partition="per_node", target_device=TWO),
            {"peer_access": {("cuda:0", "cuda:1")}, "skip_d2h_for_method_outputs": True},
        ),
    ],
    ids=["skip_h2d", "no_peer_access", "peer_pairs"],
)
def test_the_comparison_places_each_strategy_under_the_same_options(lowered, options):
    """The report's entry for another strategy is that strategy placed with the same options."""
    program = lowered()
    placed = []
    for strategy in ("executorch", "dedupe", "peer"):
        try:
            placed.append(place_devices(program, strategy=strategy, **options).report)
        except PlacementError:  # this strategy refuses these options; the others' comparisons show that
            continue
    assert placed
    for report in placed:
        for entry in report.comparison:
            try:
                other = place_devices(program, strategy=entry["strategy"], **options).report
            except PlacementError as exc:  # a refusal is part of the comparison
                assert entry == {"strategy": entry["strategy"], "error": str(exc)}
                continue
            assert (entry["copies"], entry["copy_bytes"]) == (other.copies, other.copy_bytes), (report.strategy, entry)


def test_a_pass_not_yet_run_has_no_cross_device_pairs():
    assert PlaceDevicesPass().cross_device == []
    assert place_devices(_lowered(lambda a, b: a + b, 2), non_cpu_memory_planning=False).report.cross_device == []


def test_a_skipped_input_next_to_one_to_copy():
    """dedupe + skip-H2D: `a` is already re-tagged for the first delegate when the second one reads it next to a
    CPU value; that value still gets its H2D."""
    fn = lambda a, b, c: ((a + b), a * torch.sin(c))  # noqa: E731
    lowered = _lowered(fn, 3, ["add.Tensor", "mul.Tensor"], partition="per_node")
    placed = place_devices(lowered, strategy="dedupe", skip_h2d_for_method_inputs=True)
    gm = placed.graph_module
    for node in gm.graph.nodes:
        if (device := call_device(node)) is not None:
            assert [device_of(a) for a in node.all_input_nodes] == [device] * len(node.all_input_nodes), node.name
    assert count(gm, "h2d") == 1
    torch.testing.assert_close(placed(*inputs(3)), Fn(fn)(*inputs(3)))


def _add_cpu_reader(gm, item):
    """An edit after placement: a CPU relu reading a delegate's output directly, its result returned as well."""
    output = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(output):
        relu = gm.graph.call_function(torch.ops.aten.relu.default, (item,))
    output.args = ((*output.args[0], relu),)
    return relu


def test_a_new_cpu_reader_reuses_the_existing_d2h():
    gm = place_devices(_lowered(lambda a, b: a + b, 2)).graph_module
    item = next(n for n in gm.graph.nodes if node_kind(n) == "getitem")
    relu = _add_cpu_reader(gm, item)
    assert PlaceDevicesPass()(gm).modified is True
    assert count(gm, "d2h") == 1 and is_d2h(relu.args[0])


def test_a_new_cpu_reader_of_a_later_output_gets_a_d2h():
    """A delegate with two outputs, both already copied back: the reader of the second one still gets a D2H."""
    lowered = _lowered(lambda a, b: (lambda t: (t, t * b))(a + b), 2, ["add.Tensor", "mul.Tensor"])
    gm = place_devices(lowered).graph_module
    last = [n for n in gm.graph.nodes if node_kind(n) == "getitem"][-1]
    relu = _add_cpu_reader(gm, last)
    PlaceDevicesPass()(gm)
    assert is_d2h(relu.args[0]) and relu.args[0].args[0] is last


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: (lambda t: (lambda u: (t, u, torch.sin(u)))(t * b))(a + b),
        lambda a, b: (lambda t: (lambda u: (torch.sin(t), u, t))(t * b))(a + b),
    ],
    ids=["first_output_only_returned", "second_output_only_returned"],
)
def test_skip_d2h_judges_each_output_of_a_delegate_alone(fn):
    """One delegate, two outputs: the one only the graph output reads stays on the device, the one a CPU op also
    reads gets its D2H - whichever comes first."""
    lowered = _lowered(fn, 2, ["add.Tensor", "mul.Tensor"])
    gm = place_devices(lowered, skip_d2h_for_method_outputs=True).graph_module
    items = [n for n in gm.graph.nodes if node_kind(n) == "getitem"]
    assert len(items) == 2
    sin = next(n for n in gm.graph.nodes if node_kind(n) == "cpu_op")
    assert is_d2h(sin.args[0]) and sin.args[0].args[0] in items
    (returned_only,) = [item for item in items if item is not sin.args[0].args[0]]
    assert [u.op for u in returned_only.users] == ["output"]
