"""The registration cache for reused pageable buffers, on the CPU with a fake registrar: second sight registers,
owners' deaths and evictions unregister (least recently used first, never a buffer in use), bounds hold, memory that
could be freed under us is never registered, and it all holds under threads and random operation sequences."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.devices import SimulatedCudaAllocator
from devcopy_lib.devices.host_registration import HostRegistrations, host_owner

KiB = 1 << 10


class FakeRegistrar:
    """Records registrations like CUDA keeps them: a second registration of a live start, or an unregistration of
    one not registered, is an error (kept in `errors`, so a test sees double bookkeeping); `refuse` makes it fail."""

    def __init__(self, refuse: bool = False) -> None:
        self.live: dict[int, int] = {}
        self.log: list[tuple[str, int]] = []
        self.errors: list[str] = []
        self.refuse = refuse
        self.quiesced = 0
        self._lock = threading.Lock()

    def register(self, address: int, nbytes: int) -> None:
        if self.refuse:
            raise RuntimeError("cudaErrorHostMemoryAlreadyRegistered")
        with self._lock:
            if address in self.live:
                self.errors.append(f"double register 0x{address:x}")
            self.live[address] = nbytes
            self.log.append(("register", address))

    def unregister(self, address: int) -> None:
        with self._lock:
            if self.live.pop(address, None) is None:
                self.errors.append(f"unregister of unregistered 0x{address:x}")
            self.log.append(("unregister", address))

    def quiesce(self) -> None:
        self.quiesced += 1


def _cache(registrar: FakeRegistrar, **limits: int) -> HostRegistrations:
    bounds = {"min_bytes": 4 * KiB, "max_bytes": 1 << 30, "max_count": 8} | limits
    return HostRegistrations(registrar, **bounds)


def _copy(cache: HostRegistrations, host, nbytes: int | None = None) -> bool:
    """One copy through the cache: whether it ran registered."""
    size = (host.nbytes if isinstance(host, np.ndarray) else host.numel()) if nbytes is None else nbytes
    entry = cache.acquire(host, size)
    cache.release(entry)
    return entry is not None


def test_a_buffer_registers_on_its_second_sight_and_stays_registered():
    reg = FakeRegistrar()
    cache = _cache(reg)
    host = np.ones(64 * KiB, np.uint8)
    assert [_copy(cache, host) for _ in range(4)] == [False, True, True, True]
    assert reg.live == {host.ctypes.data: host.nbytes} and len(reg.log) == 1
    s = cache.stats
    assert (s.registered, s.registered_bytes, s.registrations, s.hits) == (1, host.nbytes, 1, 3)


def test_views_of_one_array_are_the_same_storage():
    reg = FakeRegistrar()
    cache = _cache(reg)
    root = np.ones(64 * KiB, np.uint8)
    assert not _copy(cache, root[: 32 * KiB])
    assert _copy(cache, root[16 * KiB :])  # another view of the same storage: its second sight
    assert reg.live == {root.ctypes.data: root.nbytes}  # the whole storage, once


def test_small_copies_and_a_disabled_cache_never_register():
    reg = FakeRegistrar()
    cache = _cache(reg, min_bytes=64 * KiB)
    host = np.ones(64 * KiB, np.uint8)
    assert [_copy(cache, host, 64 * KiB - 1) for _ in range(3)] == [False] * 3
    cache.enabled = False
    assert [_copy(cache, host) for _ in range(3)] == [False] * 3
    assert reg.log == [] and cache.stats.enabled is False


@pytest.mark.parametrize(
    "make",
    [
        lambda: bytearray(64 * KiB),
        lambda: memoryview(bytearray(64 * KiB)),
        lambda: np.frombuffer(bytearray(64 * KiB), np.uint8),  # an array over memory a bytearray owns
        lambda: 0x7F0000000000,  # a raw address: never taken
        lambda: np.ones(0, np.uint8),
    ],
    ids=["bytearray", "memoryview", "array-over-foreign-memory", "int-address", "empty-array"],
)
def test_memory_whose_lifetime_we_cannot_follow_is_never_registered(make):
    reg = FakeRegistrar()
    cache = _cache(reg, min_bytes=0)
    host = make()
    assert host_owner(host) is None
    assert [cache.acquire(host, 64 * KiB) for _ in range(3)] == [None] * 3
    assert reg.log == []


def test_the_owners_death_unregisters_before_its_memory_goes():
    reg = FakeRegistrar()
    cache = _cache(reg)
    host = np.ones(64 * KiB, np.uint8)
    view = host[8:]
    start = host.ctypes.data
    _copy(cache, host)
    _copy(cache, view)
    del host
    gc.collect()
    assert reg.live == {start: 64 * KiB}  # the view keeps the storage alive
    del view
    gc.collect()
    assert reg.live == {} and cache.stats.owner_deaths == 1 and len(cache) == 0
    assert reg.errors == []


def test_a_candidate_that_dies_is_forgotten_and_its_reused_id_starts_over():
    reg = FakeRegistrar()
    cache = _cache(reg)
    for _ in range(5):  # each array is seen once, dies, and another may take its id: never registered
        _copy(cache, np.ones(64 * KiB, np.uint8))
        gc.collect()
    assert reg.log == [] and len(cache._seen) == 0


def test_eviction_by_count_is_least_recently_used_first_and_waits_for_the_device():
    reg = FakeRegistrar()
    cache = _cache(reg, max_count=2)
    a, b, c = (np.ones(64 * KiB, np.uint8) for _ in range(3))
    for host in (a, b, a, b):
        _copy(cache, host)
    _copy(cache, a)  # a is now the most recently used
    _copy(cache, c)
    assert _copy(cache, c)
    assert set(reg.live) == {a.ctypes.data, c.ctypes.data}  # b went
    assert cache.stats.evictions == 1 and reg.quiesced == 1 and reg.errors == []


def test_eviction_by_bytes_keeps_the_total_in_bounds():
    reg = FakeRegistrar()
    cache = _cache(reg, max_bytes=100 * KiB)
    a, b = np.ones(64 * KiB, np.uint8), np.ones(48 * KiB, np.uint8)
    for host in (a, a, b, b):
        _copy(cache, host)
    assert reg.live == {b.ctypes.data: b.nbytes} and cache.stats.registered_bytes == b.nbytes
    too_big = np.ones(128 * KiB, np.uint8)
    assert not _copy(cache, too_big) and not _copy(cache, too_big)  # never fits: not even a candidate
    assert reg.live == {b.ctypes.data: b.nbytes}


def test_a_registration_in_use_is_never_evicted():
    reg = FakeRegistrar()
    cache = _cache(reg, max_count=1)
    a, b = np.ones(64 * KiB, np.uint8), np.ones(64 * KiB, np.uint8)
    _copy(cache, a)
    held = cache.acquire(a, a.nbytes)  # a copy through a is running
    assert held is not None
    _copy(cache, b)
    assert not _copy(cache, b)  # no room: b is copied as pageable
    assert set(reg.live) == {a.ctypes.data}
    cache.release(held)
    assert _copy(cache, b) and set(reg.live) == {b.ctypes.data}


def test_a_refused_registration_is_not_tried_again():
    reg = FakeRegistrar(refuse=True)
    cache = _cache(reg)
    host = np.ones(64 * KiB, np.uint8)
    assert [_copy(cache, host) for _ in range(4)] == [False] * 4
    assert cache.stats.refused == 1 and reg.live == {}


def test_numpy_refuses_to_move_a_registered_arrays_memory():
    """The weak reference the cache holds makes NumPy refuse `resize` in place: memory never moves under us."""
    cache = _cache(FakeRegistrar())
    host = np.ones(64 * KiB, np.uint8)
    _copy(cache, host)
    with pytest.raises(ValueError, match="cannot resize"):
        host.resize(4 << 20, refcheck=False)


def test_a_storage_whose_memory_moved_is_unregistered_and_seen_anew():
    torch = pytest.importorskip("torch")
    reg = FakeRegistrar()
    cache = _cache(reg)
    tensor = torch.ones(64 * KiB, dtype=torch.uint8)
    old = tensor.data_ptr()
    _copy(cache, tensor)
    _copy(cache, tensor)
    tensor.untyped_storage().resize_(4 << 20)  # reallocates: the old range must not stay registered
    assert tensor.data_ptr() != old
    _copy(cache, tensor)
    assert reg.live == {}
    _copy(cache, tensor)
    assert reg.live == {tensor.data_ptr(): 4 << 20}


def test_close_unregisters_everything_after_the_device_work_and_a_busy_one_when_its_copy_ends():
    reg = FakeRegistrar()
    cache = _cache(reg)
    a, b = np.ones(64 * KiB, np.uint8), np.ones(64 * KiB, np.uint8)
    for host in (a, a, b, b):
        _copy(cache, host)
    held = cache.acquire(b, b.nbytes)
    cache.close()
    assert set(reg.live) == {b.ctypes.data} and reg.quiesced == 1
    cache.release(held)
    assert reg.live == {} and reg.errors == []
    assert cache.acquire(a, a.nbytes) is None  # closed: copies run as pageable


def test_a_torch_tensors_storage_is_the_owner_and_its_death_unregisters():
    torch = pytest.importorskip("torch")
    reg = FakeRegistrar()
    cache = _cache(reg)
    tensor = torch.ones(64 * KiB, dtype=torch.uint8)
    start = tensor.data_ptr()
    _copy(cache, tensor)
    _copy(cache, tensor[4:])
    assert reg.live == {start: 64 * KiB}
    del tensor
    gc.collect()
    assert reg.live == {} and cache.stats.owner_deaths == 1


def test_the_simulated_allocator_copies_through_the_cache_and_close_unregisters():
    reg = FakeRegistrar()
    sim = SimulatedCudaAllocator(registrations=_cache(reg))
    src, out = np.arange(64 * KiB, dtype=np.uint8) % 251, np.zeros(64 * KiB, np.uint8)
    ptr = sim.allocate(src.nbytes)
    for _ in range(3):
        sim.copy_host_to_device(ptr, src, src.nbytes)
        sim.copy_device_to_host(out, ptr, out.nbytes)
    assert np.array_equal(out, src)
    assert set(reg.live) == {src.ctypes.data, out.ctypes.data}
    assert sim.stats.host_registration.hits == 4 and sim.stats.host_registration.registered == 2
    sim.close()
    assert reg.live == {} and reg.errors == []


OPS = st.lists(st.tuples(st.sampled_from(["copy", "hold", "release", "drop"]), st.integers(0, 4)), max_size=60)


@settings(max_examples=60, deadline=None)
@given(ops=OPS, max_count=st.integers(0, 3), max_kib=st.integers(0, 200))
def test_any_sequence_keeps_the_bounds_and_the_registrar_in_step(ops, max_count, max_kib):
    reg = FakeRegistrar()
    cache = _cache(reg, max_count=max_count, max_bytes=max_kib * KiB)
    buffers: dict[int, np.ndarray] = {}
    held: list = []  # (entry, buffer): a running copy holds its buffer
    for op, i in ops:
        if op == "drop":
            buffers.pop(i, None)
            gc.collect(0)  # a dropped buffer has no cycle; a full collection in a big suite costs ~0.1 s
            continue
        host = buffers.setdefault(i, np.ones((i + 1) * 16 * KiB, np.uint8))
        if op == "copy":
            _copy(cache, host)
        elif op == "hold":
            held.append((cache.acquire(host, host.nbytes), host))
        elif held:
            cache.release(held.pop()[0])
        s = cache.stats
        assert s.registered == len(reg.live) == len(cache) <= max_count
        assert s.registered_bytes == sum(reg.live.values()) <= max_kib * KiB
    for entry, _ in held:
        cache.release(entry)
    cache.close()
    assert reg.live == {} and reg.errors == []


def test_threads_copying_and_dropping_buffers_leave_no_registration_behind(run_concurrently):
    reg = FakeRegistrar()
    cache = _cache(reg, max_count=3, max_bytes=256 * KiB)
    shared = [np.ones(64 * KiB, np.uint8) for _ in range(4)]

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(300):
            if rng.random() < 0.2:
                _copy(cache, np.ones(32 * KiB, np.uint8))  # a short-lived buffer: dies right after
            else:
                _copy(cache, shared[rng.integers(len(shared))])
            assert cache.stats.registered <= 3

    run_concurrently(work, threads=6)
    assert reg.errors == []
    assert cache.stats.registered == len(reg.live) and cache.stats.registered_bytes == sum(reg.live.values())
    cache.close()
    assert reg.live == {}
