"""PortableTensor: construction over planned memory, resize rules (docs/semantics.md §3.1), host access only for CPU
tensors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devcopy_lib.devices import DeviceMemoryAccessError, scoped_allocators
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism

BOUND = TensorShapeDynamism.DYNAMIC_BOUND


def test_from_torch_is_zero_copy():
    source = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    view = PortableTensor.from_torch(source).host_view()
    assert view.data_ptr() == source.data_ptr() and torch.equal(view, source)


def test_from_torch_with_extra_capacity_copies():
    t = PortableTensor.from_torch(torch.ones(2), dynamism=BOUND, capacity=8)
    assert t.capacity == 8 and t.host_view().tolist() == [1, 1]


def test_planned_cpu_tensor_shares_the_arena():
    arena = np.zeros(64, dtype=np.uint8)
    t = PortableTensor(torch.int32, [2, 2], arena[16:32])
    t.host_view().fill_(7)
    assert arena[16:32].view(np.int32).tolist() == [7, 7, 7, 7] and arena[:16].sum() == 0


def test_planned_device_tensor_at_an_offset(sim):
    base = sim.allocate(64)
    t = PortableTensor(torch.float32, [4], base + 32, device="cuda:0")
    assert t.storage.offset == 32 and t.device.index == 0


def test_storage_too_small_is_refused():
    with pytest.raises(ValueError, match="holds 8 bytes but the tensor needs 16"):
        PortableTensor(torch.float32, [4], np.zeros(8, np.uint8))


def test_device_tensor_needs_a_device_ptr():
    with pytest.raises(TypeError, match="DevicePtr"):
        PortableTensor(torch.float32, [4], np.zeros(16, np.uint8), device="cuda:0")


def test_empty_device_tensor_without_allocator_is_refused():
    with scoped_allocators(), pytest.raises(LookupError, match="no DeviceAllocator registered for CUDA"):
        PortableTensor.empty(torch.float32, [4], "cuda:0")


def test_strides_follow_dim_order():
    t = PortableTensor(torch.float32, [2, 3, 4], np.zeros(96, np.uint8), dim_order=[0, 2, 1])
    assert t.strides == (12, 1, 3)


def test_host_read_of_device_tensor_names_the_missing_copy(sim):
    t = PortableTensor.empty(torch.float32, [4], "cuda:0")
    with pytest.raises(DeviceMemoryAccessError, match="D2H copy is missing"):
        t.host_view()


def test_static_resize_keeps_sizes():
    t = PortableTensor.empty(torch.float32, [4])
    assert t.resize([4]) is Error.Ok and t.resize([2]) is Error.InvalidArgument and t.sizes == (4,)


def test_dynamic_bound_resize_within_capacity():
    t = PortableTensor.empty(torch.float32, [8], dynamism=BOUND)
    assert t.resize([3]) is Error.Ok and t.sizes == (3,) and t.resize([8]) is Error.Ok


def test_dynamic_bound_resize_beyond_capacity_is_refused():
    t = PortableTensor.empty(torch.float32, [2], dynamism=BOUND)
    assert t.resize([3]) is Error.InvalidArgument and "capacity of 2" in t.resize_problem([3])


def test_resize_never_changes_rank():
    t = PortableTensor.empty(torch.float32, [4], dynamism=BOUND)
    assert t.resize([2, 2]) is Error.InvalidArgument and "rank" in t.resize_problem([2, 2])


def test_validate_only_resize_leaves_sizes():
    t = PortableTensor.empty(torch.float32, [8], dynamism=BOUND)
    assert t.resize([3], validate_only=True) is Error.Ok and t.sizes == (8,)


def test_zero_dim_and_empty_tensors_have_host_views():
    assert PortableTensor.from_torch(torch.tensor(3.0)).host_view().item() == 3.0
    assert PortableTensor.from_torch(torch.zeros(0, 3)).host_view().shape == (0, 3)


def test_read_only_storage_is_refused():
    frozen = bytes(16)
    with pytest.raises(ValueError, match="storage must be writable.*np.array"):
        PortableTensor(torch.uint8, (16,), np.frombuffer(frozen, np.uint8))
    assert frozen == bytes(16)
