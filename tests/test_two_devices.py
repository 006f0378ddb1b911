"""Programs whose delegates run on two or three device indices: `(a + b) + c` over cuda:0 and cuda:1, one input
feeding delegates on two devices, and random DAGs with a target per delegate. Every strategy's program runs on the
simulated backend and equals eager; memory is planned per index; `peer` moves fewer bytes through the host; no
copy made for one device is read on another (docs/semantics.md §6)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_dags import random_dags

from devcopy_lib import SimulatedCudaAllocator, export_and_lower, export_program, lower, place_devices
from devcopy_lib.devices import scoped_allocators
from devcopy_lib.load import load_method
from devcopy_lib.lowering.nodes import call_device, device_of, node_kind
from devcopy_lib.names import STRATEGIES

LIBS = {"portable": None, "aten": ["native", "device_copy_ops_aten_lib", "peer_copy_ops_aten_lib"]}


class AddAdd(torch.nn.Module):
    def forward(self, a, b, c):
        return (a + b) + c


@pytest.fixture(scope="module")
def lowered():
    inputs = tuple(torch.randn(4, 3) for _ in range(3))
    targets = {"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    return export_and_lower(AddAdd(), inputs, partition="per_node", target_device=targets), inputs


@pytest.mark.parametrize("mode", ["portable", "aten"])
@pytest.mark.parametrize("strategy", ["executorch", "dedupe", "peer"])
def test_two_device_program_equals_eager(lowered, mode, strategy):
    program, inputs = lowered
    sim = SimulatedCudaAllocator()
    with scoped_allocators(sim), load_method(place_devices(program, strategy=strategy), mode, LIBS[mode]) as method:
        (out,) = method(*inputs)
        assert set(method.arena_sizes) == {"cpu", "cuda:0", "cuda:1"}
        executed = dict(method.copies_executed)
    torch.testing.assert_close(out, AddAdd()(*inputs))
    if strategy == "peer":
        assert executed == {"h2d": 3, "d2h": 1, "d2d": 1} and (sim.stats.d2d_count, sim.stats.d2d_bytes) == (1, 48)
    else:
        assert executed == {"h2d": 4, "d2h": 2} and sim.stats.d2d_count == 0


def test_peer_moves_fewer_copies_through_the_host(lowered):
    program, inputs = lowered
    counts = {}
    for strategy in ("executorch", "peer"):
        sim = SimulatedCudaAllocator()
        with scoped_allocators(sim), load_method(place_devices(program, strategy=strategy)) as method:
            method(*inputs)
        counts[strategy] = (sim.stats.h2d_count + sim.stats.d2h_count, sim.stats.d2d_count)
    assert counts["peer"][0] == counts["executorch"][0] - 2 and counts["peer"][1] == 1


def test_without_peer_access_the_allocator_hops_through_host(lowered):
    """Placement assumed peer access (none registered at placement); the allocator falls back at run time."""
    program, inputs = lowered
    sim = SimulatedCudaAllocator(peer_access=False)
    placed = place_devices(program, strategy="peer", peer_access=True)
    with scoped_allocators(sim), load_method(placed) as method:
        (out,) = method(*inputs)
    torch.testing.assert_close(out, AddAdd()(*inputs))
    assert (sim.stats.d2d_count, sim.stats.d2d_host_hops) == (1, 1)


def test_aten_mode_default_libs_follow_the_peer_strategy(lowered, sim):
    """libs=None links what the strategy emits: the peer lib for a program with a D2D copy, not for one without."""
    program, inputs = lowered
    with load_method(place_devices(program, strategy="peer", peer_access=True), "aten") as method:
        (out,) = method(*inputs)
        assert method.copies_executed["d2d"] == 1
        assert "peer_copy_ops_aten_lib" in {kernel.lib for kernel in method.kernels}
    torch.testing.assert_close(out, AddAdd()(*inputs))
    with load_method(place_devices(program), "aten") as method:
        assert "peer_copy_ops_aten_lib" not in {kernel.lib for kernel in method.kernels}


def test_aten_mode_with_libs_that_leave_out_the_peer_lib_names_the_lib_and_the_flag(lowered):
    from devcopy_lib.runtime.resolve import MissingOperatorError

    with pytest.raises(MissingOperatorError, match="link peer_copy_ops_aten_lib") as refused:
        load_method(place_devices(lowered[0], strategy="peer"), "aten", ["native", "device_copy_ops_aten_lib"])
    assert "Missing operator: [1] et_copy::_d2d_copy.out" in str(refused.value)
    assert "(--libs native,device_copy_ops_aten_lib,peer_copy_ops_aten_lib)" in str(refused.value)


class SharedInput(torch.nn.Module):
    """`a` feeds three delegates: two on cuda:0 (add, mul) and one on cuda:1 (sub)."""

    def forward(self, a, b):
        return a + b, a * b, a - b


def _device_reads_are_local(gm) -> None:
    """Every input of a device delegate lives on that delegate's device; copies go where their kind says."""
    for node in gm.graph.nodes:
        kind, device = node_kind(node), call_device(node)
        if kind == "delegate" and device is not None:
            assert all(device_of(arg) == device for arg in node.all_input_nodes), (node.name, device)
        if kind == "h2d":
            assert device_of(node.args[0]).is_cpu and not device_of(node).is_cpu, node.name
        if kind == "d2d":
            assert device_of(node.args[0]) != device_of(node), node.name


def _h2d_devices(gm) -> list[str]:
    return sorted(str(device_of(n)) for n in gm.graph.nodes if node_kind(n) == "h2d")


@pytest.mark.parametrize("mode", ["portable", "aten"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_one_input_feeding_delegates_on_two_devices(mode, strategy):
    """`dedupe` shares an input's H2D between the two cuda:0 delegates, never with the cuda:1 one."""
    inputs = (torch.tensor([1.0, -2.0, 3.0]), torch.tensor([0.5, 4.0, -0.0]))
    lowered = export_and_lower(
        SharedInput(),
        inputs,
        ["add.Tensor", "mul.Tensor", "sub.Tensor"],
        partition="per_node",
        target_device={"add.Tensor": "cuda:0", "mul.Tensor": "cuda:0", "sub.Tensor": "cuda:1"},
    )
    placed = place_devices(lowered, strategy=strategy)
    _device_reads_are_local(placed.graph_module)
    per_device = 2 if strategy == "dedupe" else 4  # a and b once per cuda:0 delegate, or once for both
    assert _h2d_devices(placed.graph_module) == ["cuda:0"] * per_device + ["cuda:1"] * 2
    sim = SimulatedCudaAllocator()
    with scoped_allocators(sim), load_method(placed, mode, LIBS[mode]) as method:
        got = method(*inputs)
        assert method.copies_executed["h2d"] == per_device + 2
    for out, want in zip(got, SharedInput()(*inputs), strict=True):
        torch.testing.assert_close(out, want)


def _targets(draw, names: int = 8) -> dict[str, str]:
    indices = draw(st.integers(2, 3))
    return {f"delegate_{i}": f"cuda:{draw(st.integers(0, indices - 1))}" for i in range(names)}


def check_random_multi_device_program(dag, data) -> None:
    """One random DAG, a random target per delegate over 2-3 indices: every strategy places it with local device
    reads, runs it on the simulated backend and equals eager."""
    module, inputs = dag
    ops = sorted({"add.Tensor", "mul.Tensor", "mm.default", "sin.default", "cos.default", "relu.default"})
    delegated = data.draw(st.sets(st.sampled_from(ops), min_size=1), label="delegated")
    partition = data.draw(st.sampled_from(["capability", "per_node"]), label="partition")
    lowered = lower(export_program(module, inputs), sorted(delegated), _targets(data.draw), partition)
    expected = module(*inputs)
    for strategy in STRATEGIES:
        placed = place_devices(lowered, strategy=strategy, peer_access=data.draw(st.booleans(), label="peer"))
        _device_reads_are_local(placed.graph_module)
        sim = SimulatedCudaAllocator()
        with scoped_allocators(sim), load_method(placed) as method:
            got = method(*inputs)
        for out, want in zip(got, expected, strict=True):
            torch.testing.assert_close(out, want, msg=lambda m, strategy=strategy: f"{strategy}: {m}")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=random_dags(), data=st.data())
def test_random_dags_over_two_or_three_devices_equal_eager(dag, data):
    check_random_multi_device_program(dag, data)


@pytest.mark.deep
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(dag=random_dags(), data=st.data())
def test_random_dags_over_two_or_three_devices_equal_eager_deep(dag, data):
    check_random_multi_device_program(dag, data)
