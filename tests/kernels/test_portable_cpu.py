"""Portable CPU kernels: torch.ops.aten on zero-copy host views of PortableTensors, failures on the context; and the
ATen-mode kernels built the same way. Each test builds its kernel afresh (`boxed_aten_kernel`), not from a lib's
cache, so what it checks is the kernel builder of this run."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

from devcopy_lib.kernels.portable_cpu import aten_overload, boxed_aten_kernel
from devcopy_lib.runtime.libs import native_lib, portable_lib
from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism

BOUND = TensorShapeDynamism.DYNAMIC_BOUND
CHANNELS_LAST = (0, 2, 3, 1)


def run(op, args):
    ctx = KernelRuntimeContext()
    kernel = boxed_aten_kernel(op, portable_lib().kernel(op).schema, portable=True)
    return ctx, kernel(ctx, args)


def aten_kernel(op):
    return boxed_aten_kernel(op, native_lib().kernel(op).schema, portable=False)


def empty(sizes, dim_order=None, dynamism=TensorShapeDynamism.STATIC):
    """A zeroed float32 CPU PortableTensor laid out in `dim_order`."""
    storage = np.zeros(int(np.prod(sizes)) * 4, np.uint8)
    return PortableTensor(torch.float32, sizes, storage, dim_order=dim_order, dynamism=dynamism)


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


def test_op_names_resolve_to_their_overloads():
    assert aten_overload("aten::relu") is torch.ops.aten.relu.default
    assert aten_overload("aten::add.out") is torch.ops.aten.add.out


def test_a_dynamic_out_is_resized_by_pytorch_without_a_warning(capfd):
    """A DYNAMIC out is handed over empty: PyTorch sizes it within the planned memory, silently (its "output ... was
    resized" warning comes from C++, on stderr, not through Python's warnings)."""
    out = PortableTensor.empty(torch.float32, [8], dynamism=BOUND)
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx, _ = run("aten::relu.out", [PortableTensor.from_torch(torch.tensor([-1.0, 2.0, -3.0])), out])
    assert ctx.ok and out.sizes == (3,) and [str(w.message) for w in caught] == []
    assert "resized" not in capfd.readouterr().err


def test_a_static_out_keeps_its_dim_order():
    """A STATIC channels-last out is written through its own strides, so its memory holds channels-last data."""
    x = torch.randn(1, 2, 2, 3)
    out = empty([1, 2, 2, 3], CHANNELS_LAST)
    ctx, _ = run("aten::relu.out", [PortableTensor.from_torch(x), out])
    assert ctx.ok
    torch.testing.assert_close(out.host_view(), torch.relu(x))
    assert out.host_view().stride() == out.strides == (12, 1, 6, 2)


def test_a_static_out_of_other_sizes_is_refused_and_keeps_its_sizes():
    out = PortableTensor.empty(torch.float32, [4])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # PyTorch's own "output was resized" on the host view
        ctx, _ = run("aten::relu.out", [PortableTensor.from_torch(torch.ones(2)), out])
    assert ctx.failure_state() is Error.InvalidArgument and out.sizes == (4,)
    assert ctx.message == (
        "aten::relu.out: out " + str(out) + ": a STATIC tensor of sizes (4,) cannot take sizes "
        "(2,); plan it DYNAMIC_BOUND"
    )


def test_a_dynamic_channels_last_out_written_contiguous_is_refused():
    out = empty([1, 2, 2, 2], CHANNELS_LAST, BOUND)
    ctx, _ = run("aten::relu.out", [PortableTensor.from_torch(torch.randn(1, 2, 2, 2)), out])
    assert ctx.failure_state() is Error.InvalidArgument
    assert ctx.message.endswith("PyTorch wrote strides (8, 4, 2, 1), out's dim order needs (8, 1, 4, 2)")


def test_strides_of_single_element_dimensions_do_not_matter():
    """A pooled [1, C, 1, 1] result fits a channels-last out: both layouts are the same memory."""
    out = empty([1, 4, 1, 1], CHANNELS_LAST, BOUND)
    x = torch.randn(1, 4, 1, 1)
    ctx, _ = run("aten::relu.out", [PortableTensor.from_torch(x), out])
    assert ctx.ok and out.host_view().flatten().tolist() == torch.relu(x).flatten().tolist()


def test_tensor_list_out():
    outs = [PortableTensor.empty(torch.float32, [1]), PortableTensor.empty(torch.float32, [2])]
    ctx, result = run(
        "aten::split_with_sizes_copy.out", [PortableTensor.from_torch(torch.tensor([1.0, 2.0, 3.0])), [1, 2], 0, outs]
    )
    assert ctx.ok and result is outs and [o.host_view().tolist() for o in outs] == [[1.0], [2.0, 3.0]]


def test_an_op_with_two_outs_returns_both():
    x = torch.arange(16.0).reshape(1, 1, 4, 4)
    values, indices = PortableTensor.empty(torch.float32, [1, 1, 2, 2]), PortableTensor.empty(torch.int64, [1, 1, 2, 2])
    ctx, result = run(
        "aten::max_pool2d_with_indices.out",
        [PortableTensor.from_torch(x), [2, 2], [2, 2], [0, 0], [1, 1], False, values, indices],
    )
    assert ctx.ok and len(result) == 2 and result[0] is values and result[1] is indices
    assert values.host_view().flatten().tolist() == [5.0, 7.0, 13.0, 15.0]


def test_a_wrong_argument_count_is_named():
    a = PortableTensor.from_torch(torch.ones(2))
    ctx, _ = run("aten::add.out", [a, a, a])
    expected = "add.out: expected 4 boxed args in schema order (self, other, alpha, out), got 3"
    assert ctx.failure_state() is Error.InvalidArgument and ctx.message == "aten::add.out: " + expected
    with pytest.raises(TypeError, match="^" + re.escape(expected) + "$"):
        aten_kernel("aten::add.out")(None, [torch.ones(2), torch.ones(2), torch.ones(2)])


def test_aten_mode_passes_keyword_only_arguments_and_the_out():
    x, out = torch.arange(6.0).reshape(2, 3), torch.zeros(3, dtype=torch.float64)
    result = aten_kernel("aten::sum.IntList_out")(None, [x, [0], False, torch.float64, out])
    assert result is out and out.tolist() == [3.0, 5.0, 7.0]
