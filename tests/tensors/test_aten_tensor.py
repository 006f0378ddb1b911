"""ATen-mode device tensors: simulated wrapper (metadata only, host reads raise) and CuPy-backed CUDA tensors."""

from __future__ import annotations

import pytest
import torch

from devcopy_lib.devices import DeviceMemoryAccessError, SimulatedCudaAllocator
from devcopy_lib.devices.capabilities import Capabilities
from devcopy_lib.tensors.aten_tensor import SimulatedDeviceTensor, device_ptr, device_tensor, resize_metadata


def test_simulated_tensor_reports_device_and_metadata(sim):
    t = device_tensor(sim.allocate(24, index=1), torch.float32, [2, 3])
    assert isinstance(t, SimulatedDeviceTensor) and str(t.device) == "cuda:1"
    assert (tuple(t.shape), t.numel(), t.is_contiguous()) == ((2, 3), 6, True)


def test_simulated_tensor_host_read_names_the_missing_d2h(sim):
    t = device_tensor(sim.allocate(16), torch.float32, [4])
    with pytest.raises(DeviceMemoryAccessError, match="D2H copy is missing"):
        t.sum()
    assert "cuda:0" in repr(t)


def test_tensor_without_carried_device_is_labelled_cpu(sim):
    t = device_tensor(sim.allocate(16, index=1), torch.float32, [4], carry_device=False)
    assert t.device.type == "cpu" and device_ptr(t).index == 1


def test_an_allocator_without_a_real_device_gives_the_wrapper(sim):
    t = device_tensor(sim.allocate(16, index=1), torch.float32, [4], allocator=sim)
    assert isinstance(t, SimulatedDeviceTensor) and str(t.device) == "cuda:1"


class _RealDevice(SimulatedCudaAllocator):
    """Claims a real device: device_tensor must take the DLPack path over `device_array` (here a NumPy view)."""

    capabilities = Capabilities(real_device=True, device_clock=False, pinned_host=False)


def test_an_allocator_with_a_real_device_gives_a_tensor_over_its_device_view():
    alloc = _RealDevice()
    ptr = alloc.allocate(32) + 8
    t = device_tensor(ptr, torch.float32, [2, 3], allocator=alloc)
    assert not isinstance(t, SimulatedDeviceTensor) and device_ptr(t) is ptr
    assert t.shape == (2, 3) and t.data_ptr() == alloc.device_array(ptr, "u1", (24,)).ctypes.data  # zero-copy
    t.fill_(2.0)  # lands in the allocation
    out = torch.zeros(6)
    alloc.copy_device_to_host(out.numpy(), ptr, 24)
    assert out.tolist() == [2.0] * 6


def test_resize_is_metadata_only(sim):
    ptr = sim.allocate(32)
    t = device_tensor(ptr, torch.float32, [8])
    resize_metadata(t, [2, 2])
    assert tuple(t.shape) == (2, 2) and device_ptr(t) is ptr and sim.stats.allocate_count == 1


@pytest.mark.gpu
def test_cupy_backed_tensor_shares_the_allocation():
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    allocator = CupyCudaAllocator()
    ptr = allocator.allocate(16)
    t = device_tensor(ptr, torch.float32, [4], allocator=allocator)
    assert t.is_cuda and t.data_ptr() == ptr.address and device_ptr(t) is ptr
    t.fill_(3.0)
    host = torch.zeros(4)
    allocator.copy_device_to_host(host.numpy(), ptr, 16)
    assert host.tolist() == [3, 3, 3, 3]
