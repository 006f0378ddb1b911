"""docs/semantics.md §6 / §6b: ExecuTorch's PropagateDevicePass behaviours, each with counts and node order; then
dedupe."""

import pytest
import torch
from placement_helpers import Fn, count, inputs, kinds, nodes_of

from devcopy_lib import Device, export_and_lower, models, place_devices
from devcopy_lib.devices import CPU
from devcopy_lib.lowering.nodes import device_of, is_d2h, is_h2d
from devcopy_lib.placement.place import PlaceDevicesPass, PlacementError, copy_graph_module

ADD = ["add.Tensor"]
CUDA0, CUDA1 = Device.parse("cuda:0"), Device.parse("cuda:1")
DELEGATE = ["delegate", "getitem"]  # a delegate call and the getitem that reads its output


def place(fn, n_inputs, ops=ADD, target="cuda:0", partition="capability", **options):
    x = inputs(n_inputs)
    lowered = export_and_lower(Fn(fn), x, ops, target_device=target, partition=partition)
    placed = place_devices(lowered, **options)
    torch.testing.assert_close(placed(*x), Fn(fn)(*x))
    return placed.graph_module


def add(a, b):
    return a + b


def shared(a, b):
    t = a + b
    u = t + a
    w = t + b
    return u + w


def test_add_on_cuda0_gives_two_h2d_one_delegate_one_d2h_in_order():
    gm = place(add, 2)
    assert kinds(gm) == ["input", "input", "h2d", "h2d", *DELEGATE, "d2h", "output"]
    assert {device_of(n) for n in nodes_of(gm, "h2d")} == {CUDA0}
    assert [device_of(n) for n in nodes_of(gm, "d2h")] == [CPU]


def test_cuda1_target_propagates_index_1():
    gm = place(add, 2, target="cuda:1")
    assert {device_of(n) for n in (*nodes_of(gm, "h2d"), *nodes_of(gm, "delegate"), *nodes_of(gm, "getitem"))} == {
        CUDA1
    }


@pytest.mark.parametrize(
    "text,expected",
    [("cuda:0", "cuda:0"), ("cuda:1", "cuda:1"), ("cpu", "cpu"), ("CUDA:0", "cuda:0"), ("Cuda:2", "cuda:2")],
)
def test_target_strings_parse(text, expected):
    lowered = export_and_lower(Fn(add), inputs(2), ADD, target_device=text)
    assert str(lowered.delegates["delegate_0"].target_device) == expected


def test_unknown_target_type_is_refused():
    with pytest.raises(ValueError, match="Unknown device type 'tpu'. Valid types: CPU, CUDA"):
        export_and_lower(Fn(add), inputs(2), ADD, target_device="tpu:0")


@pytest.mark.parametrize("target", [None, "cpu"])
def test_no_target_device_means_no_copies_and_everything_on_cpu(target):
    gm = place(add, 2, target=target)
    assert kinds(gm) == ["input", "input", *DELEGATE, "output"]
    assert {device_of(n) for n in gm.graph.nodes} == {CPU}


def test_non_cpu_memory_planning_off_tags_only():
    gm = place(add, 2, non_cpu_memory_planning=False)
    assert count(gm, "h2d") == count(gm, "d2h") == 0
    assert [str(device_of(n)) for n in gm.graph.nodes] == ["cuda:0", "cuda:0", "cuda:0", "cuda:0", "cpu"]


def test_skip_options_need_non_cpu_memory_planning():
    with pytest.raises(ValueError) as info:
        PlaceDevicesPass(skip_h2d_for_method_inputs=True, non_cpu_memory_planning=False)
    assert str(info.value) == (
        "skip_h2d_for_method_inputs and skip_d2h_for_method_outputs are only meaningful with non_cpu_memory_planning="
        "True: they skip copies, and copies are inserted only when non-CPU memory is planned. Set "
        "non_cpu_memory_planning=True, or leave both skip options False. (With skips, graph inputs/outputs must not be "
        "memory-planned: the caller provides them on the device.)"
    )
    with pytest.raises(ValueError, match="non_cpu_memory_planning=True"):
        place_devices(
            export_and_lower(Fn(add), inputs(2), ADD), skip_d2h_for_method_outputs=True, non_cpu_memory_planning=False
        )


def test_skip_h2d_retags_an_input_feeding_a_delegate_with_no_copy():
    gm = place(add, 2, skip_h2d_for_method_inputs=True)
    assert kinds(gm) == ["input", "input", *DELEGATE, "d2h", "output"]
    assert {device_of(n) for n in nodes_of(gm, "input")} == {CUDA0}


def test_skip_h2d_refuses_an_input_with_two_users():
    with pytest.raises(PlacementError, match=r"graph input '\w+' to have exactly one user, but it has 2"):
        place(shared, 2, partition="per_node", skip_h2d_for_method_inputs=True)


def test_skip_h2d_still_copies_an_intermediate():
    gm = place(lambda a, b: torch.sin(a) + b, 2, skip_h2d_for_method_inputs=True)
    assert kinds(gm) == ["input", "input", "cpu_op", "h2d", *DELEGATE, "d2h", "output"]
    assert [str(device_of(n)) for n in nodes_of(gm, "input")] == ["cpu", "cuda:0"]


def test_skip_d2h_when_every_user_is_the_graph_output():
    gm = place(add, 2, skip_d2h_for_method_outputs=True)
    assert kinds(gm) == ["input", "input", "h2d", "h2d", *DELEGATE, "output"]
    assert device_of(nodes_of(gm, "getitem")[0]) == CUDA0


def test_skip_d2h_keeps_the_copy_when_a_cpu_op_also_reads_the_output():
    module, x = models.output_and_cpu_user()
    placed = place_devices(export_and_lower(module, x, ADD), skip_d2h_for_method_outputs=True)
    assert kinds(placed.graph_module) == ["input", "input", "h2d", "h2d", *DELEGATE, "d2h", "cpu_op", "output"]


def test_skip_both_leaves_no_copies():
    gm = place(add, 2, skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True)
    assert kinds(gm) == ["input", "input", *DELEGATE, "output"]
    assert {device_of(n) for n in gm.graph.nodes if n.op != "output"} == {CUDA0}


def test_back_to_back_same_device_round_trip_is_elided():
    gm = place(lambda a, b, c: (a + b) + c, 3, partition="per_node")
    assert kinds(gm) == ["input"] * 3 + ["h2d", "h2d", *DELEGATE, "h2d", *DELEGATE, "d2h", "output"]


def test_cross_device_pair_is_kept():
    gm = place(
        lambda a, b, c: (a + b) + c, 3, partition="per_node", target={"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    )
    assert (count(gm, "h2d"), count(gm, "d2h"), count(gm, "delegate")) == (4, 2, 2)
    assert [str(device_of(n)) for n in nodes_of(gm, "h2d")] == ["cuda:0", "cuda:0", "cuda:1", "cuda:1"]


def test_output_feeding_device_delegate_and_cpu_op_keeps_its_d2h():
    def fn(a, b):
        t = a + b
        return t + a, torch.relu(t)

    gm = place(fn, 2, partition="per_node")
    (d2h_to_relu,) = [n for n in nodes_of(gm, "d2h") if any("relu" in u.name for u in n.users)]
    assert d2h_to_relu.args[0].name == "add"
    second = nodes_of(gm, "delegate")[1]
    assert second.args[0].name == "add"  # reads the first delegate's output on the device
    assert not any(is_h2d(n) and is_d2h(n.args[0]) for n in gm.graph.nodes)


def test_same_and_cross_device_consumers_lose_only_the_same_device_h2d():
    def fn(a, b):
        t = a + b
        return t + a, t + b

    gm = place(
        fn, 2, partition="per_node", target={"delegate_0": "cuda:0", "delegate_1": "cuda:0", "delegate_2": "cuda:1"}
    )
    residual = [n for n in nodes_of(gm, "h2d") if is_d2h(n.args[0])]
    assert [str(device_of(n)) for n in residual] == ["cuda:1"]


def test_four_single_op_delegates_give_four_h2d_one_d2h():
    gm = place(shared, 2, partition="per_node")
    # the second and third delegates read a or b again, each copied anew; the fourth reads device values only
    again = ["h2d", *DELEGATE]
    assert kinds(gm) == ["input", "input", "h2d", "h2d", *DELEGATE, *again, *again, *DELEGATE, "d2h", "output"]
    assert not any(is_h2d(n) and is_d2h(n.args[0]) for n in gm.graph.nodes)


def test_capability_partition_makes_the_shared_graph_one_delegate():
    gm = place(shared, 2)
    assert (count(gm, "delegate"), count(gm, "h2d"), count(gm, "d2h")) == (1, 2, 1)


def test_constants_owned_by_a_delegate_get_no_h2d():
    module, x = models.mlp()
    placed = place_devices(export_and_lower(module, x))
    assert set(placed.delegates["delegate_0"].constants) == {"p_fc1_weight", "p_fc1_bias", "p_fc2_weight", "p_fc2_bias"}
    assert [n.args[0].name for n in nodes_of(placed.graph_module, "h2d")] == ["x"]
    assert placed.report.constant_bytes == sum(p.numel() * 4 for p in module.parameters())


def test_dedupe_shares_one_h2d_per_value_and_device():
    gm = place(shared, 2, partition="per_node", strategy="dedupe")
    assert kinds(gm) == ["input", "input", "h2d", "h2d"] + DELEGATE * 4 + ["d2h", "output"]


def test_dedupe_allows_skip_h2d_for_an_input_read_by_delegates_on_one_device():
    gm = place(shared, 2, partition="per_node", strategy="dedupe", skip_h2d_for_method_inputs=True)
    assert count(gm, "h2d") == 0 and {str(device_of(n)) for n in nodes_of(gm, "input")} == {"cuda:0"}


def test_pass_is_a_passbase_and_a_second_run_changes_nothing():
    lowered = export_and_lower(Fn(shared), inputs(2), ADD, partition="per_node")
    gm = copy_graph_module(lowered.graph_module)
    assert PlaceDevicesPass()(gm).modified is True
    code = gm.code
    again = PlaceDevicesPass()(gm)
    assert again.modified is False and again.graph_module.code == code


def test_lowered_program_is_not_mutated_by_placement():
    lowered = export_and_lower(Fn(add), inputs(2), ADD)
    place_devices(lowered)
    assert kinds(lowered.graph_module) == ["input", "input", *DELEGATE, "output"]


def test_unknown_strategy_lists_the_valid_ones():
    with pytest.raises(ValueError, match="Valid: executorch, dedupe"):
        PlaceDevicesPass("fastest")
