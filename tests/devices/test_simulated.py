"""The simulated accelerator and the DeviceAllocator base-class rules (docs/semantics.md §2)."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.devices import DeviceCopyError, DeviceMemoryAccessError, DeviceType, SimulatedCudaAllocator


@pytest.fixture
def alloc():
    return SimulatedCudaAllocator()


def test_says_it_is_simulated(alloc):
    assert alloc.backend == "simulated"
    assert alloc.device_type() is DeviceType.CUDA
    assert "simulated" in alloc.describe_devices()[0]["name"]


@settings(max_examples=60, deadline=None)
@given(nbytes=st.integers(0, 1 << 16), index=st.integers(0, 7), alignment=st.sampled_from([1, 2, 64, 256]))
def test_round_trip_over_sizes_and_indices(nbytes, index, alignment):
    alloc = SimulatedCudaAllocator()
    ptr = alloc.allocate(nbytes, index, alignment)
    assert ptr.index == index and ptr.address % alignment == 0 and ptr.nbytes == nbytes
    src = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    dst = np.zeros(nbytes, dtype=np.uint8)
    alloc.copy_host_to_device(ptr, src, nbytes, index)
    alloc.copy_device_to_host(dst, ptr, nbytes, index)
    np.testing.assert_array_equal(dst, src)
    assert (alloc.stats.last_h2d.size, alloc.stats.last_h2d.index) == (nbytes, index)
    alloc.deallocate(ptr)
    assert alloc.live_allocations() == 0 and alloc.stats.live_bytes == 0


def test_counters_follow_executorchs_mock(alloc):
    ptr = alloc.allocate(16)
    src = np.arange(4, dtype=np.float32)
    alloc.copy_host_to_device(ptr, src, 16, 0)
    alloc.copy_device_to_host(np.empty(4, np.float32), ptr, 16, 0)
    alloc.deallocate(ptr)
    s = alloc.stats
    assert (s.allocate_count, s.deallocate_count, s.h2d_count, s.d2h_count) == (1, 1, 1, 1)
    assert s.last_h2d.dst is ptr and s.last_h2d.src is src and s.last_d2h.src is ptr


def test_zero_byte_allocation_is_a_valid_handle(alloc):
    ptr = alloc.allocate(0)
    assert ptr is not None and ptr.address != 0
    alloc.deallocate(ptr)


def test_index_minus_one_is_the_current_device(alloc):
    alloc.set_current_index(3)
    ptr = alloc.allocate(8, index=-1)
    alloc.copy_host_to_device(ptr, np.zeros(8, np.uint8), 8, -1)
    assert ptr.index == 3 and alloc.stats.last_h2d.index == 3


def test_null_pointers_rejected_before_the_zero_byte_shortcut(alloc):
    ptr = alloc.allocate(4)
    with pytest.raises(ValueError, match="null"):
        alloc.copy_host_to_device(ptr, None, 0)
    with pytest.raises(ValueError, match="null"):
        alloc.copy_device_to_host(0, ptr, 0)
    alloc.copy_host_to_device(ptr, np.zeros(0, np.uint8), 0)  # 0 bytes with valid pointers succeed


@pytest.mark.parametrize("alignment", [0, 3, 48, 512, -64])
def test_alignment_must_be_a_power_of_two_up_to_256(alloc, alignment):
    with pytest.raises(ValueError, match="power of two no larger than 256"):
        alloc.allocate(8, 0, alignment)


def test_host_read_of_device_memory_fails_loudly(alloc):
    ptr = alloc.allocate(8)
    with pytest.raises(DeviceMemoryAccessError, match="D2H copy"):
        np.asarray(ptr)


def test_copy_past_the_allocation_is_refused(alloc):
    ptr = alloc.allocate(8)
    with pytest.raises(ValueError, match="do not fit"):
        alloc.copy_host_to_device(ptr + 4, np.zeros(8, np.uint8), 8)


def test_host_buffer_too_small_is_refused(alloc):
    ptr = alloc.allocate(8)
    with pytest.raises(ValueError, match="holds 4 bytes"):
        alloc.copy_device_to_host(np.zeros(4, np.uint8), ptr, 8)


def test_read_only_host_destination_is_refused(alloc):
    ptr = alloc.allocate(8)
    dst = np.zeros(8, np.uint8)
    dst.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        alloc.copy_device_to_host(dst, ptr, 8)


def test_double_free_and_foreign_pointers_are_refused(alloc):
    ptr = alloc.allocate(8)
    alloc.deallocate(ptr)
    with pytest.raises(ValueError, match="already freed"):
        alloc.deallocate(ptr)
    other = SimulatedCudaAllocator().allocate(8)
    with pytest.raises(ValueError, match="not allocated by this"):
        alloc.copy_host_to_device(other, np.zeros(8, np.uint8), 8)


def test_int_host_addresses_are_refused_and_the_buffers_themselves_accepted(alloc):
    """An int could point anywhere: the public copies take the buffer (array, bytearray, CPU tensor), never an int."""
    ptr = alloc.allocate(8)
    src = np.arange(8, dtype=np.uint8)
    with pytest.raises(TypeError, match="a bare int is never taken as an address"):
        alloc.copy_host_to_device(ptr, src.ctypes.data, 8)
    with pytest.raises(TypeError, match="a bare int is never taken as an address"):
        alloc.copy_device_to_host(np.zeros(8, np.uint8).ctypes.data, ptr, 8)
    alloc.copy_host_to_device(ptr, torch.arange(8, dtype=torch.uint8), 8)
    dst = bytearray(8)
    alloc.copy_device_to_host(dst, ptr, 8)
    assert bytes(dst) == bytes(range(8))


class _FlakyAllocator(SimulatedCudaAllocator):
    """Fails its first allocation with MemoryError, like a pool that must be flushed."""

    def __init__(self):
        super().__init__()
        self.trims = 0
        self.failures_left = 1

    def _allocate(self, nbytes, index, alignment):
        if self.failures_left:
            self.failures_left -= 1
            raise MemoryError
        return super()._allocate(nbytes, index, alignment)

    def _trim(self, index):
        self.trims += 1


def test_allocation_retries_once_after_trim():
    alloc = _FlakyAllocator()
    alloc.allocate(8)
    assert alloc.trims == 1


def test_second_failure_names_size_and_device():
    alloc = _FlakyAllocator()
    alloc.failures_left = 2
    with pytest.raises(MemoryError, match=r"1024 bytes on cuda:0"):
        alloc.allocate(1024)


def test_device_copy_error_is_a_runtime_error():
    assert issubclass(DeviceCopyError, RuntimeError)
