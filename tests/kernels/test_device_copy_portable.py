"""The portable et_copy kernels: ExecuTorch's nine cases (docs/semantics.md §4b) and the branches it leaves untested."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devcopy_lib.devices import DeviceCopyError, SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.kernels.device_copy import _d2h_copy_out, _h2d_copy_out
from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism

BOUND = TensorShapeDynamism.DYNAMIC_BOUND


def cpu(values) -> PortableTensor:
    return PortableTensor.from_torch(torch.as_tensor(values, dtype=torch.float32))


def on_device(sizes, device="cuda:0", **kw) -> PortableTensor:
    return PortableTensor.empty(torch.float32, sizes, device, **kw)


def device_values(sim, t: PortableTensor) -> np.ndarray:
    return sim.device_array(t.storage, np.float32, t.sizes)


def h2d(self, out):
    ctx = KernelRuntimeContext()
    return ctx, _h2d_copy_out(ctx, self, out)


def d2h(self, out):
    ctx = KernelRuntimeContext()
    return ctx, _d2h_copy_out(ctx, self, out)


def test_h2d_copies_data_and_calls_allocator(sim):
    self, out = cpu([1.0, 2.0, 3.0, 4.0]), on_device([4])
    ctx, result = h2d(self, out)
    assert ctx.failure_state() is Error.Ok and result is out
    assert (sim.stats.h2d_count, sim.stats.d2h_count) == (1, 0)
    assert (sim.stats.last_h2d.size, sim.stats.last_h2d.index) == (16, 0)
    np.testing.assert_array_equal(device_values(sim, out), [1, 2, 3, 4])


def test_d2h_copies_data_and_calls_allocator(sim):
    src = on_device([4])
    h2d(cpu([5.0, 6.0, 7.0, 8.0]), src)
    out = cpu([0.0] * 4)
    ctx, result = d2h(src, out)
    assert ctx.failure_state() is Error.Ok and result is out
    assert (sim.stats.d2h_count, sim.stats.last_d2h.size, sim.stats.last_d2h.index) == (1, 16, 0)
    assert out.host_view().tolist() == [5, 6, 7, 8]


def test_h2d_takes_device_index_from_out(sim):
    ctx, _ = h2d(cpu([1.0, 2.0, 3.0, 4.0]), on_device([4], "cuda:1"))
    assert ctx.failure_state() is Error.Ok and sim.stats.last_h2d.index == 1


def test_h2d_copies_a_2x3_tensor(sim):
    out = on_device([2, 3])
    ctx, _ = h2d(cpu([[1.0, 2, 3], [4, 5, 6]]), out)
    assert ctx.failure_state() is Error.Ok and sim.stats.last_h2d.size == 24
    np.testing.assert_array_equal(device_values(sim, out), [[1, 2, 3], [4, 5, 6]])


def test_h2d_shrinks_dynamic_bound_out(sim):
    out = on_device([8], dynamism=BOUND)
    ctx, _ = h2d(cpu([1.0, 2, 3, 4]), out)
    assert ctx.failure_state() is Error.Ok and out.sizes == (4,) and sim.stats.last_h2d.size == 16


def test_d2h_shrinks_dynamic_bound_out(sim):
    src = on_device([4])
    out = PortableTensor.empty(torch.float32, [8], dynamism=BOUND)
    ctx, _ = d2h(src, out)
    assert ctx.failure_state() is Error.Ok and out.sizes == (4,) and sim.stats.last_d2h.size == 16


def test_h2d_refuses_self_beyond_dynamic_bound_capacity(sim):
    out = on_device([2], dynamism=BOUND)
    ctx, _ = h2d(cpu([1.0, 2, 3, 4]), out)
    assert ctx.failure_state() is Error.InvalidArgument and sim.stats.h2d_count == 0 and out.sizes == (2,)


def test_d2h_refuses_self_beyond_dynamic_bound_capacity(sim):
    out = PortableTensor.empty(torch.float32, [2], dynamism=BOUND)
    ctx, _ = d2h(on_device([4]), out)
    assert ctx.failure_state() is Error.InvalidArgument and sim.stats.d2h_count == 0 and out.sizes == (2,)


def test_h2d_into_dynamic_bound_out_of_equal_size(sim):
    ctx, _ = h2d(cpu([1.0, 2, 3, 4]), on_device([4], dynamism=BOUND))
    assert ctx.failure_state() is Error.Ok and sim.stats.h2d_count == 1


@pytest.mark.parametrize("case", ["h2d_self_on_device", "h2d_out_on_cpu", "d2h_self_on_cpu", "d2h_out_on_device"])
def test_placement_violation_is_invalid_argument(sim, case):
    kernel, self, out = {
        "h2d_self_on_device": (_h2d_copy_out, on_device([4]), on_device([4])),
        "h2d_out_on_cpu": (_h2d_copy_out, cpu([1.0] * 4), cpu([0.0] * 4)),
        "d2h_self_on_cpu": (_d2h_copy_out, cpu([1.0] * 4), cpu([0.0] * 4)),
        "d2h_out_on_device": (_d2h_copy_out, on_device([4]), on_device([4])),
    }[case]
    ctx = KernelRuntimeContext()
    assert kernel(ctx, self, out) is out
    assert ctx.failure_state() is Error.InvalidArgument and "must be" in ctx.message
    assert sim.stats.h2d_count == sim.stats.d2h_count == 0


def test_static_out_of_other_sizes_is_invalid_argument(sim):
    out = on_device([8])
    ctx, _ = h2d(cpu([1.0, 2, 3, 4]), out)
    assert ctx.failure_state() is Error.InvalidArgument and "STATIC" in ctx.message and out.sizes == (8,)


def test_dtype_mismatch_is_invalid_argument_devcopy_addition(sim):
    out = PortableTensor.empty(torch.int32, [4], "cuda:0")
    ctx, _ = h2d(cpu([1.0, 2, 3, 4]), out)
    assert ctx.failure_state() is Error.InvalidArgument and "dtype mismatch" in ctx.message


def test_no_allocator_is_not_found_and_out_untouched(sim):
    out = on_device([8], dynamism=BOUND)
    with scoped_allocators():
        ctx, _ = h2d(cpu([1.0, 2, 3, 4]), out)
    assert ctx.failure_state() is Error.NotFound and out.sizes == (8,)
    assert ctx.message == "et_copy::_h2d_copy.out: no DeviceAllocator registered for CUDA; register one first"


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_a_resize_failure_comes_before_the_missing_allocator(sim, direction):
    """Two checks fail at once: a STATIC out of other sizes (step 3) and no allocator (step 4). ExecuTorch's order
    reports the resize, InvalidArgument, and leaves out as it was, its bytes included."""
    if direction == "h2d":
        self, out, call = cpu([1.0, 2, 3, 4]), on_device([8]), h2d
        before = device_values(sim, out).copy()
    else:
        self, out, call = on_device([4]), cpu([9.0] * 8), d2h
        before = out.host_view().numpy().copy()
    with scoped_allocators():
        ctx, result = call(self, out)
    assert (ctx.failure_state(), result, out.sizes) == (Error.InvalidArgument, out, (8,))
    assert "cannot resize" in ctx.message and "DeviceAllocator" not in ctx.message
    after = device_values(sim, out) if direction == "h2d" else out.host_view().numpy()
    np.testing.assert_array_equal(after, before)
    assert sim.stats.h2d_count == sim.stats.d2h_count == 0


class FailingCopies(SimulatedCudaAllocator):
    def _copy_in(self, dst, src_address, nbytes, index):
        raise DeviceCopyError("simulated link failure")

    _copy_out = _copy_in


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_failing_copy_is_internal_and_out_restored(direction):
    with scoped_allocators(FailingCopies()):
        if direction == "h2d":
            self, out, call = cpu([1.0, 2, 3, 4]), on_device([8], dynamism=BOUND), h2d
        else:
            self, out, call = on_device([4]), PortableTensor.empty(torch.float32, [8], dynamism=BOUND), d2h
        ctx, result = call(self, out)
    assert ctx.failure_state() is Error.Internal and result is out and out.sizes == (8,)
    assert "simulated link failure" in ctx.message
    op = "_h2d_copy.out" if direction == "h2d" else "_d2h_copy.out"
    assert ctx.message.startswith(f"et_copy::{op}: device copy of 16 bytes on cuda:0 failed: ")


def test_d2h_takes_device_index_from_self(sim):
    src = on_device([4], "cuda:1")
    h2d(cpu([1.0, 2.0, 3.0, 4.0]), src)
    sim.set_current_index(0)
    ctx, out = d2h(src, cpu([0.0] * 4))
    assert ctx.failure_state() is Error.Ok and sim.stats.last_d2h.index == 1
    assert out.host_view().tolist() == [1, 2, 3, 4]
