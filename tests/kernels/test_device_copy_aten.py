"""The ATen-mode et_copy kernels: ExecuTorch's seven cases (docs/semantics.md §4b), the other checks, and the device
rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devcopy_lib.devices import DeviceCopyError, SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.kernels.device_copy import d2h_copy_out, h2d_copy_out
from devcopy_lib.tensors.aten_tensor import device_tensor


def dev(sim, sizes, dtype=torch.float32, index=0, capacity=None, carry_device=True):
    numel = capacity if capacity is not None else int(np.prod(sizes, dtype=np.int64))
    return device_tensor(sim.allocate(numel * dtype.itemsize, index=index), dtype, sizes, carry_device=carry_device)


def values(sim, t):
    return sim.device_array(t.ptr, np.float32, tuple(t.shape))


def test_h2d_by_op_identity(sim):
    out = dev(sim, [4])
    result = h2d_copy_out(torch.tensor([1.0, 2, 3, 4]), out)
    assert result is out
    assert (sim.stats.h2d_count, sim.stats.d2h_count, sim.stats.last_h2d.size) == (1, 0, 16)
    assert sim.stats.last_h2d.index == sim.current_index()  # -1 resolved to the current device
    np.testing.assert_array_equal(values(sim, out), [1, 2, 3, 4])


def test_d2h_by_op_identity(sim):
    src = dev(sim, [4])
    h2d_copy_out(torch.tensor([1.0, 2, 3, 4]), src)
    out = torch.zeros(4)
    assert d2h_copy_out(src, out) is out
    assert (sim.stats.d2h_count, sim.stats.last_d2h.size) == (1, 16)
    assert out.tolist() == [1, 2, 3, 4]


def test_h2d_resizes_out_to_self(sim):
    out = dev(sim, [8])
    h2d_copy_out(torch.tensor([1.0, 2, 3]), out)
    assert tuple(out.shape) == (3,) and sim.stats.last_h2d.size == 12


def test_h2d_rejects_self_larger_than_out_storage(sim):
    out = dev(sim, [2])
    with pytest.raises(RuntimeError, match="16 bytes .* 8 writable bytes; plan out with at least self's size$"):
        h2d_copy_out(torch.ones(4), out)
    assert sim.stats.h2d_count == 0 and tuple(out.shape) == (2,)


def test_d2h_rejects_self_larger_than_out_storage(sim):
    with pytest.raises(RuntimeError, match="writable bytes"):
        d2h_copy_out(dev(sim, [4]), torch.zeros(2))
    assert sim.stats.d2h_count == 0


def test_h2d_rejects_dtype_mismatch(sim):
    with pytest.raises(RuntimeError, match=r"_h2d_copy.out: self/out dtype mismatch \(torch.float32 vs torch.int32\)"):
        h2d_copy_out(torch.ones(4), dev(sim, [4], torch.int32))
    assert sim.stats.h2d_count == 0


def test_zero_size_h2d_is_a_no_op(sim):
    out = dev(sim, [4])
    h2d_copy_out(torch.ones(0), out)
    assert out.numel() == 0 and sim.stats.h2d_count == 0


def test_non_contiguous_is_refused(sim):
    with pytest.raises(RuntimeError, match="contiguous"):
        h2d_copy_out(torch.ones(4, 2).t(), dev(sim, [2, 4]))


def test_no_allocator_is_refused_with_device_type(sim):
    out = dev(sim, [4])
    with scoped_allocators(), pytest.raises(RuntimeError, match="no device allocator registered for device_type=1"):
        h2d_copy_out(torch.ones(4), out)


class FailingCopies(SimulatedCudaAllocator):
    def _copy_in(self, dst, src_address, nbytes, index):
        raise DeviceCopyError("simulated link failure")


def test_failing_copy_is_reported_with_bytes_and_direction():
    sim = FailingCopies()
    with scoped_allocators(sim), pytest.raises(RuntimeError, match=r"device copy failed \(16 bytes, host->device\)"):
        h2d_copy_out(torch.ones(4), dev(sim, [4]))


def test_out_keeps_its_shape_when_the_allocator_is_missing(sim):
    out = dev(sim, [2, 4])
    with scoped_allocators(), pytest.raises(RuntimeError, match="no device allocator registered for device_type=1"):
        h2d_copy_out(torch.ones(3), out)
    assert tuple(out.shape) == (2, 4)  # devcopy difference: ExecuTorch leaves out resized here


def test_out_keeps_its_shape_when_the_copy_fails():
    sim = FailingCopies()
    with scoped_allocators(sim):
        out = dev(sim, [8])
        with pytest.raises(RuntimeError, match="device copy failed"):
            h2d_copy_out(torch.ones(3), out)
    assert tuple(out.shape) == (8,)


def test_seed_rule_copies_at_the_current_device(sim):
    h2d_copy_out(torch.ones(4), dev(sim, [4], index=1), device_rule="seed")
    assert sim.stats.last_h2d.index == 0


def test_tensor_rule_honours_the_carried_device(sim):
    h2d_copy_out(torch.ones(4), dev(sim, [4], index=1), device_rule="tensor")
    assert sim.stats.last_h2d.index == 1


def test_tensor_rule_honours_a_carried_cuda0_off_the_current_device(sim):
    sim.set_current_index(1)
    h2d_copy_out(torch.ones(4), dev(sim, [4], index=0), device_rule="tensor")
    assert sim.stats.last_h2d.index == 0


@pytest.mark.parametrize("rule, index", [("tensor", 1), ("seed", 0)])
def test_d2h_device_rule_picks_the_copy_index(sim, rule, index):
    """D2H from a tensor on cuda:1 while cuda:0 is current: `tensor` copies at index 1, `seed` at the current one."""
    src = dev(sim, [4], index=1)
    sim.set_current_index(0)
    d2h_copy_out(src, torch.zeros(4), device_rule=rule)
    assert sim.stats.last_d2h.index == index


def test_tensor_rule_falls_back_to_seed_without_a_carried_device(sim):
    sim.set_current_index(2)
    h2d_copy_out(torch.ones(4), dev(sim, [4], index=1, carry_device=False), device_rule="tensor")
    assert sim.stats.last_h2d.index == 2
