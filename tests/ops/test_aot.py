"""AOT et_copy ops: both import orders work, and eager .out calls reach devcopy's ATen-mode kernel."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import devcopy_lib.kernels  # noqa: F401 - defines torch.ops.et_copy and registers devcopy's kernels
from devcopy_lib.tensors.aten_tensor import device_tensor

CHECK = """
import torch
{first}
{second}
a = torch.arange(4.0)
assert torch.equal(torch.ops.et_copy._h2d_copy(a), a)
out = torch.zeros(4)
assert torch.ops.et_copy._d2h_copy.out(a, out=out) is out and torch.equal(out, a)
print("ok")
"""
ET = "import executorch.exir"
DEVCOPY = "import devcopy_lib.ops.aot"


@pytest.mark.reference
@pytest.mark.parametrize("first, second", [(ET, DEVCOPY), (DEVCOPY, ET)], ids=["executorch_first", "devcopy_first"])
def test_both_import_orders_define_et_copy_once(first, second):
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(first=first, second=second)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_trace_time_out_resizes_and_copies():
    out = torch.zeros(5)
    torch.ops.et_copy._h2d_copy.out(torch.ones(3), out=out)
    assert out.tolist() == [1, 1, 1]


def test_eager_out_on_a_simulated_device_tensor_runs_devcopy_kernel(sim):
    out = device_tensor(sim.allocate(16, index=1), torch.float32, [4])
    assert torch.ops.et_copy._h2d_copy.out(torch.ones(4), out=out) is out
    assert (sim.stats.h2d_count, sim.stats.last_h2d.index) == (1, 1)


@pytest.mark.gpu
def test_eager_out_on_cuda_runs_devcopy_kernel_through_the_allocator():
    from devcopy_lib.devices import scoped_allocators
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    allocator = CupyCudaAllocator()
    with scoped_allocators(allocator):
        out = torch.zeros(4, device="cuda:0")
        torch.ops.et_copy._h2d_copy.out(torch.arange(4.0), out=out)
        back = torch.zeros(4)
        torch.ops.et_copy._d2h_copy.out(out, out=back)
    assert (allocator.stats.h2d_count, allocator.stats.d2h_count) == (1, 1)
    assert back.tolist() == [0, 1, 2, 3]
