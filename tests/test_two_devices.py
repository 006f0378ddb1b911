"""`(a + b) + c` with delegates on cuda:0 and cuda:1: every strategy in both modes equals eager on the simulated
backend; memory planned per index; `peer` copies device to device and moves fewer bytes through the host."""
from __future__ import annotations

import pytest
import torch

from devcopy_lib import SimulatedCudaAllocator, export_and_lower, place_devices
from devcopy_lib.devices import scoped_allocators
from devcopy_lib.load import load_method

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


def test_aten_mode_without_the_peer_lib_names_the_fix(lowered):
    from devcopy_lib.runtime.resolve import MissingOperatorError

    with pytest.raises(MissingOperatorError, match="link peer_copy_ops_aten_lib"):
        load_method(place_devices(lowered[0], strategy="peer"), "aten")
