"""CopyEngine over host-thread streams (HostTransport): exact data at every chunk boundary, direct vs staged paths,
concurrent copies, and staging buffers never rewritten before their last copy has run."""

import numpy as np
import pytest

from devcopy_lib.devices.copy_engine import CopyEngine, EngineConfig
from devcopy_lib.devices.host_transport import HostTransport
from devcopy_lib.devices.pinned import PinnedRegistry, tracked_array

KiB = 1 << 10
CHUNK = 64 * KiB
CONFIG = EngineConfig(chunk_bytes=CHUNK, min_chunk_bytes=CHUNK, buffers=2, threads=3, direct_bytes=KiB)
BOUNDARY_SIZES = [1, KiB, KiB + 1, CHUNK - 1, CHUNK, CHUNK + 1, 7 * CHUNK + 3, 40 * CHUNK]


@pytest.fixture
def slow():
    """An engine whose DMA runs 0.5 ms late, so early reuse of a staging buffer would corrupt data."""
    transport = HostTransport(delay_s=0.0005)
    engine = CopyEngine(transport, CONFIG)
    yield engine
    engine.close()


def _data(n, seed=0):
    return np.random.default_rng(n + seed).integers(0, 256, n, dtype=np.uint8)


def _round_trip(engine, src):
    n = src.size
    device, out = np.full(n + 1, 0xEE, np.uint8), np.zeros(n, np.uint8)
    engine.h2d(device.ctypes.data, src.ctypes.data, n)
    engine.d2h(out.ctypes.data, device.ctypes.data, n)
    return device, out


@pytest.mark.parametrize("n", BOUNDARY_SIZES)
def test_pageable_round_trip_is_exact_at_chunk_boundaries(slow, n):
    src = _data(n)
    device, out = _round_trip(slow, src)
    assert np.array_equal(device[:n], src) and device[n] == 0xEE and np.array_equal(out, src)


def test_pinned_host_memory_takes_one_direct_copy(slow):
    n = 10 * CHUNK
    src = slow.transport.host_alloc(n)
    src[:] = _data(n)
    device, before = np.zeros(n, np.uint8), slow.transport.copies
    slow.h2d(device.ctypes.data, src.ctypes.data, n)
    assert slow.transport.copies - before == 1 and np.array_equal(device, src)


def test_pageable_memory_is_staged_chunk_by_chunk(slow):
    before = slow.transport.copies
    _round_trip(slow, _data(10 * CHUNK))
    assert slow.transport.copies - before == 2 * 10


def test_small_pageable_copy_is_direct(slow):
    before = slow.transport.copies
    _round_trip(slow, _data(KiB))
    assert slow.transport.copies - before == 2


def test_async_pageable_source_is_consumed_before_return(slow):
    n = 9 * CHUNK + 5
    src = _data(n)
    expected, device = src.copy(), np.zeros(n, np.uint8)
    ticket = slow.h2d_async(device.ctypes.data, src.ctypes.data, n)
    src[:] = 0
    ticket.wait()
    assert ticket.done and np.array_equal(device, expected)


def test_back_to_back_async_copies_wait_for_staging_buffers(slow):
    sources = [_data(6 * CHUNK, seed) for seed in range(5)]
    devices = [np.zeros(6 * CHUNK, np.uint8) for _ in sources]
    tickets = [slow.h2d_async(d.ctypes.data, s.ctypes.data, s.size) for d, s in zip(devices, sources, strict=True)]
    for ticket in tickets:
        ticket.wait()
    assert all(np.array_equal(d, s) for d, s in zip(devices, sources, strict=True))


def test_pinned_async_d2h_lands_when_the_ticket_is_done(slow):
    n = 4 * CHUNK
    device, out = _data(n), slow.transport.host_alloc(n)
    ticket = slow.d2h_async(out.ctypes.data, device.ctypes.data, n)
    ticket.wait()
    assert np.array_equal(out, device)


def test_concurrent_copies_from_threads_are_each_exact(slow, run_concurrently):
    errors = []

    def worker(seed):
        src = _data(11 * CHUNK + seed, seed)
        for _ in range(3):
            device, out = _round_trip(slow, src)
            if not np.array_equal(out, src):
                errors.append(seed)

    run_concurrently(worker)
    assert errors == []


def test_chunk_size_is_two_per_thread_within_bounds():
    config = EngineConfig(chunk_bytes=8 << 20, min_chunk_bytes=512 * KiB, threads=8)
    assert config.chunk_for(64 << 20) == 4 << 20
    assert config.chunk_for(1 << 30) == 8 << 20
    assert config.chunk_for(2 << 20) == 512 * KiB


def test_bad_config_names_the_field():
    with pytest.raises(ValueError, match="EngineConfig.threads must be an int >= 1, got 0"):
        EngineConfig(threads=0)
    with pytest.raises(ValueError, match="min_chunk_bytes .* exceeds chunk_bytes"):
        EngineConfig(chunk_bytes=KiB, min_chunk_bytes=2 * KiB)


def test_pinned_registry_tracks_ranges_while_the_array_lives():
    registry = PinnedRegistry()
    array = tracked_array(bytearray, lambda m: np.frombuffer(m, np.uint8).ctypes.data, 1000, 256, registry)
    start = array.ctypes.data
    assert start % 256 == 0 and registry.contains(start, 1000) and not registry.contains(start, 5000)
    view = array[10:20]
    del array
    assert registry.contains(view.ctypes.data, 10)
    del view
    import gc

    gc.collect()
    assert len(registry) == 0 and not registry.contains(start, 1)
