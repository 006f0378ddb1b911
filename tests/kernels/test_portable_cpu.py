"""Portable CPU kernels: torch.ops.aten on zero-copy host views of PortableTensors, failures on the context."""
from __future__ import annotations

import torch

from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error
from devcopy_lib.runtime.libs import portable_lib
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism

BOUND = TensorShapeDynamism.DYNAMIC_BOUND


def run(op, args):
    ctx = KernelRuntimeContext()
    return ctx, portable_lib().kernel(op)(ctx, args)


def test_add_writes_into_the_planned_out():
    a = PortableTensor.from_torch(torch.tensor([1.0, 2.0]))
    out = PortableTensor.empty(torch.float32, [2])
    ctx, result = run("aten::add.out", [a, a, 1, out])
    assert ctx.failure_state() is Error.Ok and result is out and out.host_view().tolist() == [2, 4]


def test_dynamic_bound_out_takes_the_result_sizes():
    out = PortableTensor.empty(torch.float32, [8], dynamism=BOUND)
    ctx, _ = run("aten::relu.out", [PortableTensor.from_torch(torch.tensor([-1.0, 2.0, -3.0])), out])
    assert ctx.failure_state() is Error.Ok and out.sizes == (3,) and out.host_view().tolist() == [0, 2, 0]


def test_result_beyond_capacity_is_invalid_argument():
    out = PortableTensor.empty(torch.float32, [2], dynamism=BOUND)
    ctx, _ = run("aten::relu.out", [PortableTensor.from_torch(torch.ones(4)), out])
    assert ctx.failure_state() is Error.InvalidArgument and out.sizes == (2,)


def test_device_tensor_input_is_invalid_argument(sim):
    out = PortableTensor.empty(torch.float32, [4])
    ctx, _ = run("aten::relu.out", [PortableTensor.empty(torch.float32, [4], "cuda:0"), out])
    assert ctx.failure_state() is Error.InvalidArgument and "D2H copy is missing" in ctx.message


def test_tensor_list_arguments():
    parts = [PortableTensor.from_torch(torch.ones(2)), PortableTensor.from_torch(torch.zeros(1))]
    out = PortableTensor.empty(torch.float32, [3])
    ctx, _ = run("aten::cat.out", [parts, 0, out])
    assert ctx.failure_state() is Error.Ok and out.host_view().tolist() == [1, 1, 0]
