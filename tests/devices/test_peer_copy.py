"""DeviceAllocator.copy_device_to_device: direct over peer access, a host hop without it; statistics kept."""

from __future__ import annotations

import numpy as np
import pytest

from devcopy_lib.devices import SimulatedCudaAllocator


def _filled(sim, index, data):
    ptr = sim.allocate(data.nbytes, index)
    sim.copy_host_to_device(ptr, data, data.nbytes, index)
    return ptr


def _read(sim, ptr, n):
    out = np.zeros(n, np.uint8)
    sim.copy_device_to_host(out, ptr, n, ptr.index)
    return out


def test_peer_access_copies_directly_and_counts_d2d():
    sim = SimulatedCudaAllocator()
    data = np.arange(64, dtype=np.uint8)
    src, dst = _filled(sim, 0, data), sim.allocate(64, 1)
    h2d, d2h = sim.stats.h2d_count, sim.stats.d2h_count
    assert sim.copy_device_to_device(dst, src, 64) == "peer"
    assert (sim.stats.d2d_count, sim.stats.d2d_bytes, sim.stats.d2d_host_hops) == (1, 64, 0)
    assert (sim.stats.h2d_count, sim.stats.d2h_count) == (h2d, d2h)
    assert np.array_equal(_read(sim, dst, 64), data)


@pytest.mark.parametrize("peer_access", [False, {(0, 2)}])
def test_without_peer_access_the_copy_hops_through_host(peer_access):
    sim = SimulatedCudaAllocator(peer_access=peer_access)
    data = np.arange(32, dtype=np.uint8)
    src, dst = _filled(sim, 0, data), sim.allocate(32, 1)
    h2d, d2h = sim.stats.h2d_count, sim.stats.d2h_count
    assert sim.copy_device_to_device(dst, src, 32) == "host"
    assert (sim.stats.d2d_count, sim.stats.d2d_bytes, sim.stats.d2d_host_hops) == (1, 0, 1)
    assert (sim.stats.h2d_count - h2d, sim.stats.d2h_count - d2h) == (1, 1)
    assert np.array_equal(_read(sim, dst, 32), data)


def test_pairs_grant_both_directions_and_same_device_always():
    sim = SimulatedCudaAllocator(peer_access={(0, 1)})
    assert sim.can_access_peer(0, 1) and sim.can_access_peer(1, 0) and sim.can_access_peer(2, 2)
    assert not sim.can_access_peer(0, 2)


def test_zero_bytes_and_bad_arguments():
    sim = SimulatedCudaAllocator()
    a, b = sim.allocate(8, 0), sim.allocate(4, 1)
    assert sim.copy_device_to_device(b, a, 0) == "empty"
    with pytest.raises(ValueError, match="do not fit"):
        sim.copy_device_to_device(b, a, 8)
    with pytest.raises(ValueError, match="null pointer"):
        sim.copy_device_to_device(None, a, 4)
    with pytest.raises(ValueError, match="peer_access pairs"):
        SimulatedCudaAllocator(peer_access={(0, -1)})
