"""et_copy::_d2d_copy.out (devcopy's addition): portable and ATen-mode kernels, checks in docs/semantics.md §3/§4's
order, `out` untouched on failure; and the ATen-mode H2D device rules on two simulated indices."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devcopy_lib.devices import Device, DeviceCopyError, SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.kernels.device_copy import PORTABLE_KERNELS, d2d_copy_out, h2d_copy_out
from devcopy_lib.ops import aot  # noqa: F401 - defines torch.ops.et_copy (import for its side effect)
from devcopy_lib.tensors.aten_tensor import device_tensor
from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor

CUDA0, CUDA1 = Device.parse("cuda:0"), Device.parse("cuda:1")


def _device_portable(sim, values, device):
    data = torch.tensor(values, dtype=torch.float32)
    ptr = sim.allocate(data.numel() * 4, device.index)
    sim.copy_host_to_device(ptr, data.numpy(), data.numel() * 4, device.index)
    return PortableTensor(torch.float32, tuple(data.shape), ptr, device=device)


def _read(sim, ptr, n):
    out = np.zeros(n, np.float32)
    sim.copy_device_to_host(out, ptr, n * 4, ptr.index)
    return out.tolist()


def test_portable_d2d_copies_cuda0_to_cuda1_directly():
    sim = SimulatedCudaAllocator()
    with scoped_allocators(sim):
        src = _device_portable(sim, [1.0, 2.0, 3.0, 4.0], CUDA0)
        out = _device_portable(sim, [0.0] * 4, CUDA1)
        ctx = KernelRuntimeContext()
        assert PORTABLE_KERNELS["_d2d_copy_out"](ctx, src, out) is out and ctx.ok
        assert (sim.stats.d2d_count, sim.stats.d2d_bytes) == (1, 16)
        assert _read(sim, out.storage, 4) == [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize(
    "self_cpu, out_cpu, error", [(True, False, Error.InvalidArgument), (False, True, Error.InvalidArgument)]
)
def test_portable_d2d_rejects_a_cpu_side_and_copies_nothing(self_cpu, out_cpu, error):
    sim = SimulatedCudaAllocator()
    with scoped_allocators(sim):
        cpu = PortableTensor.from_torch(torch.ones(4))
        src = cpu if self_cpu else _device_portable(sim, [1.0] * 4, CUDA0)
        out = PortableTensor.from_torch(torch.zeros(4)) if out_cpu else _device_portable(sim, [0.0] * 4, CUDA1)
        ctx = KernelRuntimeContext()
        PORTABLE_KERNELS["_d2d_copy_out"](ctx, src, out)
        assert ctx.failure_state() == error and "device->device" in ctx.message and sim.stats.d2d_count == 0


class _FailingPeer(SimulatedCudaAllocator):
    def _copy_peer(self, dst, src, nbytes):
        raise DeviceCopyError("peer link down")


def test_portable_d2d_failure_names_both_devices_and_restores_out():
    sim = _FailingPeer()
    with scoped_allocators(sim):
        src, out = _device_portable(sim, [1.0, 2.0], CUDA0), _device_portable(sim, [0.0] * 2, CUDA1)
        ctx = KernelRuntimeContext()
        PORTABLE_KERNELS["_d2d_copy_out"](ctx, src, out)
    assert ctx.failure_state() is Error.Internal and out.sizes == (2,)
    assert ctx.message.startswith("et_copy::_d2d_copy.out: device copy of 8 bytes cuda:0 -> cuda:1 failed: ")


def test_portable_d2d_without_allocator_is_not_found_and_out_untouched():
    sim = SimulatedCudaAllocator()
    src, out = _device_portable(sim, [1.0] * 4, CUDA0), _device_portable(sim, [0.0] * 4, CUDA1)
    with scoped_allocators():
        ctx = KernelRuntimeContext()
        PORTABLE_KERNELS["_d2d_copy_out"](ctx, src, out)
    assert ctx.failure_state() == Error.NotFound and sim.stats.d2d_count == 0
    assert _read(sim, out.storage, 4) == [0.0] * 4


def _aten(sim, values, index, carry=True):
    data = torch.tensor(values, dtype=torch.float32)
    ptr = sim.allocate(max(data.numel() * 4, 4), index)
    sim.copy_host_to_device(ptr, data.numpy(), data.numel() * 4, index)
    return device_tensor(ptr, torch.float32, tuple(data.shape), carry_device=carry)


@pytest.mark.parametrize("rule", ["seed", "tensor"])
def test_aten_d2d_takes_both_devices_from_the_memory(rule):
    sim = SimulatedCudaAllocator(peer_access=False)
    with scoped_allocators(sim):
        src, out = _aten(sim, [5.0, 6.0], 0), _aten(sim, [0.0, 0.0], 1)
        assert d2d_copy_out(src, out, rule) is out
        assert (sim.stats.d2d_count, sim.stats.d2d_host_hops) == (1, 1)
        assert _read(sim, out.ptr, 2) == [5.0, 6.0]


def test_aten_d2d_checks_before_copying_and_leaves_out_untouched():
    sim = SimulatedCudaAllocator()
    with scoped_allocators(sim):
        src, out = _aten(sim, [1.0] * 4, 0), _aten(sim, [0.0] * 2, 1)
        with pytest.raises(RuntimeError, match="_d2d_copy.out: self needs 16 bytes"):
            d2d_copy_out(src, out)
        assert tuple(out.shape) == (2,) and sim.stats.d2d_count == 0


def test_eager_d2d_on_simulated_tensors_runs_devcopys_kernel():
    sim = SimulatedCudaAllocator()
    with scoped_allocators(sim):
        src, out = _aten(sim, [7.0], 0), _aten(sim, [0.0], 1)
        torch.ops.et_copy._d2d_copy.out(src, out=out)
        assert _read(sim, out.ptr, 1) == [7.0] and sim.stats.d2d_bytes == 4


def test_trace_time_d2d_is_a_clone():
    x = torch.arange(3.0)
    assert torch.equal(torch.ops.et_copy._d2d_copy(x), x)


@pytest.mark.parametrize("rule, index", [("tensor", 1), ("seed", 0)])
def test_aten_h2d_device_rule_on_two_indices(rule, index):
    """Current device 0, out on cuda:1: `tensor` copies at index 1 (what out carries), `seed` at the current one."""
    sim = SimulatedCudaAllocator()
    sim.set_current_index(0)
    with scoped_allocators(sim):
        out = _aten(sim, [0.0, 0.0], 1)
        h2d_copy_out(torch.tensor([1.0, 2.0]), out, rule)
        assert sim.stats.last_h2d.index == index


@pytest.mark.gpu
def test_tensor_rule_copies_into_the_second_real_gpu():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs (nvidia-h200-x2 not lent)")
    from devcopy_lib.devices.backend import make_allocator

    gpu = make_allocator("cupy")
    with scoped_allocators(gpu):
        torch.cuda.set_device(0)
        out = torch.zeros(4, device="cuda:1")
        torch.ops.et_copy._h2d_copy.out(torch.arange(4.0), out=out)
        assert out.device.index == 1 and out.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
        moved = torch.zeros(4, device="cuda:0")
        torch.ops.et_copy._d2d_copy.out(out, out=moved)
        assert moved.cpu().tolist() == [0.0, 1.0, 2.0, 3.0] and gpu.stats.d2d_count == 1
