"""The DeviceAllocator contract at its edges: device indices honoured, bad values refused where they enter,
counters that count successful calls only, simulated addresses that never collide, close() and `with`."""

import threading
import time

import numpy as np
import pytest

from devcopy_lib.devices import (
    DeviceAllocator,
    DeviceType,
    SimulatedCudaAllocator,
    get_device_allocator,
    scoped_allocators,
)
from devcopy_lib.devices.simulated import _ADDRESS_SPACE


@pytest.fixture
def alloc():
    return SimulatedCudaAllocator()


def _counters(alloc):
    s = alloc.stats
    return (s.allocate_count, s.deallocate_count, s.h2d_count, s.d2h_count, s.h2d_bytes, s.d2h_bytes, s.live_bytes)


def test_a_copy_given_another_devices_index_is_refused(alloc):
    ptr = alloc.allocate(8, 0)
    with pytest.raises(ValueError, match=r"lives on cuda:0 but index 5 was passed; pass 0"):
        alloc.copy_host_to_device(ptr, np.ones(8, np.uint8), 8, index=5)
    with pytest.raises(ValueError, match=r"lives on cuda:0 but index 1 was passed"):
        alloc.copy_device_to_host(np.empty(8, np.uint8), ptr, 8, index=1)


def test_index_minus_one_reaches_the_pointers_own_memory(alloc):
    """-1 is the current device, as in CUDA's unified address space: the copy lands in the pointer's memory."""
    ptr = alloc.allocate(4, 2)
    alloc.copy_host_to_device(ptr, np.arange(4, dtype=np.uint8), 4, -1)
    out = np.zeros(4, np.uint8)
    alloc.copy_device_to_host(out, ptr, 4, 2)
    assert out.tolist() == [0, 1, 2, 3]


def test_device_code_reading_a_buffer_as_another_index_fails_loudly(alloc):
    ptr = alloc.allocate(16, 0)
    assert alloc.device_array(ptr, np.float32, (4,), index=0).shape == (4,)
    with pytest.raises(ValueError, match=r"device_array: .* lives on cuda:0 but index 1 was passed"):
        alloc.device_array(ptr, np.float32, (4,), index=1)


def test_device_array_is_part_of_the_base_contract():
    """Every backend must give device code a view (`_device_view`); the checks around it live once, in the base."""
    assert "_device_view" in DeviceAllocator.__abstractmethods__
    assert "device_array" not in vars(SimulatedCudaAllocator)


@pytest.mark.parametrize("index", ["junk", 1.0, None, -2, 3])
def test_deallocate_validates_its_index(alloc, index):
    ptr = alloc.allocate(8, 0)
    with pytest.raises(ValueError, match=r"device index must be an int|lives on cuda:0 but index 3"):
        alloc.deallocate(ptr, index=index)
    assert alloc.live_allocations() == 1 and alloc.stats.deallocate_count == 0
    alloc.deallocate(ptr, index=0)
    assert alloc.live_allocations() == 0


def test_failed_calls_are_not_counted(alloc):
    ptr = alloc.allocate(8)
    before = _counters(alloc)
    for bad in (
        lambda: alloc.copy_host_to_device(ptr, np.ones(16, np.uint8), 16, 0),  # too big for ptr
        lambda: alloc.copy_host_to_device(ptr, np.ones(4, np.uint8), 8, 0),  # host too small
        lambda: alloc.copy_device_to_host(np.ones(8, np.uint8)[::2], ptr, 4, 0),  # not contiguous
        lambda: alloc.copy_host_to_device(ptr, np.ones(8, np.uint8), 8, index=4),
        lambda: alloc.deallocate(ptr + 1),
        lambda: alloc.copy_device_to_device(ptr, ptr, 9),
    ):
        with pytest.raises(
            ValueError, match=r"^(copy_host_to_device|copy_device_to_host|deallocate|copy_device_to_device)"
        ):
            bad()
    assert _counters(alloc) == before and alloc.stats.d2d_count == 0


def test_zero_byte_copies_on_freed_pointers_are_refused(alloc):
    ptr = alloc.allocate(8)
    alloc.deallocate(ptr)
    with pytest.raises(ValueError, match="already freed"):
        alloc.copy_host_to_device(ptr, np.ones(1, np.uint8), 0, 0)
    with pytest.raises(ValueError, match="already freed"):
        alloc.copy_device_to_host(np.ones(1, np.uint8), ptr, 0, 0)
    with pytest.raises(ValueError, match="already freed"):
        alloc.copy_device_to_device(ptr, ptr, 0)


@pytest.mark.parametrize("step", [1.5, True, "1", None])
def test_pointer_arithmetic_takes_whole_bytes(alloc, step):
    with pytest.raises(TypeError, match="whole number of bytes"):
        alloc.allocate(8) + step
    assert (alloc.allocate(8) + np.int64(3)).offset == 3


def test_a_failed_huge_allocation_leaves_the_address_counter_alone(alloc):
    first = alloc.allocate(64, 0)
    for huge in (1 << 62, np.int64(1 << 62), _ADDRESS_SPACE):
        with pytest.raises(MemoryError, match="Out of device memory"):
            alloc.allocate(huge, 0)
    after = alloc.allocate(64, 0)
    assert after.address == first.address + 64
    assert _ADDRESS_SPACE <= after.address < 2 * _ADDRESS_SPACE  # inside cuda:0's range, not cuda:1's
    assert alloc.allocate(64, 1).address == 2 * _ADDRESS_SPACE
    assert alloc.stats.allocate_count == 3 and alloc.stats.live_bytes == 192


def test_close_frees_every_allocation_and_refuses_later_use():
    alloc = SimulatedCudaAllocator()
    ptr = alloc.allocate(32)
    alloc.close()
    assert alloc.closed and alloc.live_allocations() == 0 and alloc.stats.live_bytes == 0
    alloc.close()  # a second close does nothing
    with pytest.raises(ValueError, match="allocator was closed"):
        alloc.allocate(8)
    with pytest.raises(ValueError, match="allocator was closed"):
        alloc.copy_host_to_device(ptr, np.ones(32, np.uint8), 32, 0)


def test_with_block_closes_the_allocator():
    with SimulatedCudaAllocator() as alloc:
        alloc.allocate(8)
    assert alloc.closed and alloc.live_allocations() == 0


def test_a_scope_is_seen_by_its_own_thread_only():
    """A background thread (a timing sweep, another thread's Method) keeps the process-wide allocator."""
    outer, inner = SimulatedCudaAllocator(), SimulatedCudaAllocator()
    entered, leave, seen = threading.Event(), threading.Event(), {}

    def scoped():
        with scoped_allocators(inner):
            seen["scoped"] = get_device_allocator(DeviceType.CUDA)
            entered.set()
            leave.wait(5)

    with scoped_allocators(outer):
        thread = threading.Thread(target=scoped)
        thread.start()
        assert entered.wait(5)
        seen["main"] = get_device_allocator(DeviceType.CUDA)  # while the other thread is inside its scope
        leave.set()
        thread.join()
    assert seen == {"scoped": inner, "main": outer}


def test_threads_without_a_scope_see_the_process_registry():
    from devcopy_lib.devices import register_device_allocator, registry

    glob = SimulatedCudaAllocator()
    saved = dict(registry._registry)
    registry._registry.clear()
    try:
        register_device_allocator(glob)
        seen = []
        with scoped_allocators(SimulatedCudaAllocator()):
            thread = threading.Thread(target=lambda: seen.append(get_device_allocator(DeviceType.CUDA)))
            thread.start()
            thread.join()
        assert seen == [glob]
    finally:
        registry._registry.clear()
        registry._registry.update(saved)


def test_one_allocator_shared_by_threads_keeps_exact_data_and_counters(alloc, run_concurrently):
    rounds = 300

    def worker(seed):
        data = np.full(64, seed, np.uint8)
        for _ in range(rounds):
            ptr = alloc.allocate(64, seed % 2)
            alloc.copy_host_to_device(ptr, data, 64, ptr.index)
            out = np.empty(64, np.uint8)
            alloc.copy_device_to_host(out, ptr, 64, ptr.index)
            assert (out == seed).all()
            alloc.deallocate(ptr)

    run_concurrently(worker, switch_interval=1e-6)
    s = alloc.stats
    assert (s.allocate_count, s.deallocate_count, s.h2d_count, s.d2h_count) == (4 * rounds,) * 4
    assert (s.h2d_bytes, s.live_bytes, alloc.live_allocations()) == (4 * rounds * 64, 0, 0)


class _SlowChecks(SimulatedCudaAllocator):
    """Fault injection: freeing takes long enough for another thread to run in the middle of a deallocate."""

    def _free(self, block):
        time.sleep(0.001)
        super()._free(block)


def test_two_threads_freeing_one_pointer_free_it_once(run_concurrently):
    alloc = _SlowChecks()
    for _ in range(20):
        ptr, outcomes = alloc.allocate(8), []

        def free(seed, ptr=ptr, outcomes=outcomes):
            try:
                alloc.deallocate(ptr)
                outcomes.append("freed")
            except ValueError as exc:
                assert "already freed" in str(exc)
                outcomes.append("refused")

        run_concurrently(free, threads=2, switch_interval=1e-6)
        assert sorted(outcomes) == ["freed", "refused"]
    assert alloc.stats.deallocate_count == 20 and alloc.stats.live_bytes == 0


def test_device_indices_fit_executorchs_int8_device_index(alloc):
    from devcopy_lib.devices import Device

    assert alloc.allocate(8, 127).index == 127
    with pytest.raises(ValueError, match=r"device index must be an int in -1\.\.127"):
        alloc.allocate(8, 128)
    with pytest.raises(ValueError, match=r"Device index must be an int in 0\.\.127 \(a DeviceIndex is an int8\)"):
        Device.parse("cuda:99999999999999999999")
