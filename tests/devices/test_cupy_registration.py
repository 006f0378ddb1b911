"""Reused pageable buffers on CUDA: registered in place on their second copy, the data exact through registered
buffers both ways, and every registration given back on eviction, on the owner's death and on close (CUDA's own
pointer attributes say so, and the same memory registers again afterwards)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

MiB = 1 << 20
_HOST = 1  # cudaMemoryTypeHost: page-locked (registered or allocated pinned)


def _registered(address: int) -> bool:
    """Whether CUDA sees host `address` as page-locked."""
    import cupy

    try:
        return cupy.cuda.runtime.pointerGetAttributes(address).type == _HOST
    except cupy.cuda.runtime.CUDARuntimeError:  # older drivers: an error for plain pageable memory
        return False


def _allocator(**config):
    from devcopy_lib.devices.copy_engine import EngineConfig
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    return CupyCudaAllocator(EngineConfig(**config))


def _random(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def _forget_records(alloc, ptr) -> None:
    """Replace the statistics' last-copy records (they hold the last host buffers) with a tiny copy each way."""
    tiny = np.zeros(1, np.uint8)
    alloc.copy_host_to_device(ptr, tiny, 1)
    alloc.copy_device_to_host(tiny, ptr, 1)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [MiB, 4 * MiB + 3, 64 * MiB])
def test_reused_buffers_register_and_copy_exactly_both_ways(n):
    with _allocator() as alloc:
        ptr = alloc.allocate(n)
        src, out = np.empty(n, np.uint8), np.empty(n, np.uint8)
        rounds = 4
        for seed in range(rounds):  # new contents every time: a registered buffer is read and written in place
            src[:] = _random(n, seed)
            alloc.copy_host_to_device(ptr, src, n)
            alloc.copy_device_to_host(out, ptr, n)
            assert np.array_equal(out, src)
        assert _registered(src.ctypes.data) and _registered(out.ctypes.data)
        # each buffer is staged at first sight and registered at its second: every later copy of either is a hit
        assert alloc.is_pinned(src) and alloc.stats.host_registration.hits == 2 * (rounds - 1)


@pytest.mark.gpu
def test_a_reused_torch_tensor_registers_and_copies_exactly():
    torch = pytest.importorskip("torch")
    n = 2 * MiB
    with _allocator() as alloc:
        ptr = alloc.allocate(n)
        src, out = torch.empty(n, dtype=torch.uint8), torch.empty(n, dtype=torch.uint8)
        for seed in range(3):
            src.copy_(torch.from_numpy(_random(n, seed)))
            alloc.copy_host_to_device(ptr, src, n)
            alloc.copy_device_to_host(out, ptr, n)
            assert torch.equal(out, src)
        assert _registered(src.data_ptr()) and alloc.stats.host_registration.registered == 2


@pytest.mark.gpu
def test_eviction_unregisters_the_least_recently_used_buffer():
    with _allocator(register_max_count=1) as alloc:
        ptr = alloc.allocate(2 * MiB)
        a, b = _random(2 * MiB, 1), _random(2 * MiB, 2)
        for host in (a, a, b, b):
            alloc.copy_host_to_device(ptr, host, host.nbytes)
        assert not _registered(a.ctypes.data) and _registered(b.ctypes.data)
        out = np.empty_like(a)
        alloc.copy_host_to_device(ptr, a, a.nbytes)  # a again: still right, copied as pageable or re-registered
        alloc.copy_device_to_host(out, ptr, out.nbytes)
        assert np.array_equal(out, a) and alloc.stats.host_registration.evictions >= 1


@pytest.mark.gpu
def test_the_owners_death_unregisters_and_leaks_nothing():
    with _allocator() as alloc:
        ptr = alloc.allocate(2 * MiB)
        before = len(alloc.transport.registry)
        host = _random(2 * MiB, 3)
        alloc.copy_host_to_device(ptr, host, host.nbytes)
        alloc.copy_host_to_device(ptr, host, host.nbytes)
        assert alloc.stats.host_registration.registered == 1
        del host
        _forget_records(alloc, ptr)
        gc.collect()
        stats = alloc.stats.host_registration
        assert (stats.registered, stats.owner_deaths, stats.unregistrations) == (0, 1, 1)
        assert len(alloc.transport.registry) == before


@pytest.mark.gpu
def test_close_unregisters_everything_so_the_memory_registers_again():
    hosts = [_random(2 * MiB, 4), _random(2 * MiB, 5)]
    alloc = _allocator()
    ptr = alloc.allocate(2 * MiB)
    for host in hosts + hosts:
        alloc.copy_host_to_device(ptr, host, host.nbytes)
    assert all(_registered(h.ctypes.data) for h in hosts)
    alloc.close()
    assert not any(_registered(h.ctypes.data) for h in hosts)
    with _allocator() as again:  # CUDA refuses a second registration of memory still registered: none is
        ptr = again.allocate(2 * MiB)
        for host in hosts + hosts:
            again.copy_host_to_device(ptr, host, host.nbytes)
        assert again.stats.host_registration.registered == 2 and again.stats.host_registration.refused == 0


@pytest.mark.gpu
def test_registration_off_in_the_config_copies_as_pageable():
    with _allocator(register_reused=False) as alloc:
        ptr = alloc.allocate(2 * MiB)
        host = _random(2 * MiB, 6)
        for _ in range(3):
            alloc.copy_host_to_device(ptr, host, host.nbytes)
        assert not _registered(host.ctypes.data) and alloc.stats.host_registration.registrations == 0


@pytest.mark.gpu
@pytest.mark.parametrize("n", [4096, 64 << 10, MiB])
def test_small_pinned_copies_through_the_quick_path_are_exact(n):
    with _allocator() as alloc:
        ptr = alloc.allocate(n)
        src, out = alloc.allocate_host(n), alloc.allocate_host(n)
        for seed in range(3):
            src[:] = _random(n, seed)
            alloc.copy_host_to_device(ptr, src, n)
            alloc.copy_device_to_host(out, ptr, n)
            assert np.array_equal(out, src)
        assert alloc.stats.h2d_count == alloc.stats.d2h_count == 3
