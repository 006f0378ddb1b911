"""ExecuTorch's dim-order copy kernels (kernels/dim_order.py) in both modes: `_to_dim_order_copy.out` equals torch's
`.to(dtype, memory_format=...)` and `_clone_dim_order.out` equals `.clone(memory_format=...)`, element for element and
laid out in the dim order asked for, over dtypes, shapes and dim orders; what ExecuTorch's kernels refuse is refused
with the values and the fix, `out` left as it was. Each test builds its kernel afresh (`dim_order_kernel`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.kernels.dim_order import (
    CLONE_DIM_ORDER,
    DTYPES,
    TO_DIM_ORDER_COPY,
    channels_last,
    dim_order_kernel,
)
from devcopy_lib.kernels.prepared import KernelFailure
from devcopy_lib.runtime.libs import native_lib, portable_lib
from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism

OPS = (TO_DIM_ORDER_COPY, CLONE_DIM_ORDER)
BOUND = TensorShapeDynamism.DYNAMIC_BOUND
_FORMAT = {4: torch.channels_last, 5: torch.channels_last_3d}


def memory_format(order: tuple[int, ...]) -> torch.memory_format:
    return _FORMAT[len(order)] if order == channels_last(len(order)) else torch.contiguous_format


def values(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Values every dtype holds exactly and casts the same way everywhere (small, non-negative where unsigned)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    low = 0 if dtype == torch.uint8 else -60
    raw = torch.randint(low, 100, shape, generator=g)
    return (raw / 4).to(dtype) if dtype.is_floating_point else raw.to(dtype)


def portable(t: torch.Tensor, order: tuple[int, ...], dynamism=TensorShapeDynamism.STATIC, capacity=None):
    """A CPU PortableTensor laid out in `order` holding `t`."""
    capacity = t.numel() if capacity is None else capacity
    storage = np.zeros(capacity * t.element_size(), np.uint8)
    p = PortableTensor(t.dtype, t.shape, storage, dim_order=order, dynamism=dynamism, capacity=capacity)
    p.host_view().copy_(t)
    return p


def blank(shape, dtype, order, dynamism=TensorShapeDynamism.STATIC, capacity=None):
    return portable(torch.zeros(shape, dtype=dtype), order, dynamism, capacity)


def call_portable(op, args):
    ctx = KernelRuntimeContext()
    return ctx, dim_order_kernel(op, portable_lib().kernel(op).schema, portable=True)(ctx, args)


def call_aten(op, args):
    return dim_order_kernel(op, native_lib().kernel(op).schema, portable=False)(KernelRuntimeContext(), args)


SHAPE = st.lists(st.integers(0, 4), min_size=0, max_size=5).map(tuple)


@st.composite
def cases(draw, op):
    shape = draw(SHAPE)
    rank = len(shape)
    orders = [tuple(range(rank))] + ([channels_last(rank)] if channels_last(rank) else [])
    self_order, out_order = draw(st.sampled_from(orders)), draw(st.sampled_from(orders))
    src = draw(st.sampled_from(DTYPES))
    dst = src if op == CLONE_DIM_ORDER else draw(st.sampled_from(DTYPES))
    given_order = draw(st.booleans()) or self_order != out_order  # None only where out keeps self's dim order
    return shape, src, dst, self_order, out_order, (list(out_order) if given_order else None), draw(st.integers(0, 99))


def expected(op, x, dst, out_order):
    fmt = memory_format(out_order)
    return x.to(dst, memory_format=fmt) if op == TO_DIM_ORDER_COPY else x.clone(memory_format=fmt)


def _strides_match(view: torch.Tensor, want: torch.Tensor) -> bool:
    """Laid out alike: the strides of every dimension of more than one element agree (an empty tensor has no
    layout to compare: devcopy's view of no bytes is a fresh empty tensor)."""
    return view.numel() == 0 or all(
        size <= 1 or a == b for size, a, b in zip(view.shape, view.stride(), want.stride(), strict=True)
    )


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_portable_kernel_equals_torch(op, data):
    shape, src, dst, self_order, out_order, dim_order, seed = data.draw(cases(op))
    x = values(shape, src, seed).contiguous(memory_format=memory_format(self_order))
    out = blank(shape, dst, out_order)
    ctx, result = call_portable(op, [portable(x, self_order), False, dim_order, out])
    assert ctx.ok, ctx.message
    assert result is out and out.dim_order == out_order and out.sizes == shape
    want = expected(op, x, dst, out_order)
    view = out.host_view()
    assert view.dtype == want.dtype and torch.equal(view, want) and _strides_match(view, want)


@pytest.mark.parametrize("op", OPS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_aten_kernel_equals_torch(op, data):
    shape, src, dst, self_order, out_order, dim_order, seed = data.draw(cases(op))
    x = values(shape, src, seed).contiguous(memory_format=memory_format(self_order))
    out = torch.zeros(shape, dtype=dst).contiguous(memory_format=memory_format(out_order))
    result = call_aten(op, [x, False, dim_order, out])
    want = expected(op, x, dst, out_order)
    assert result is out and out.dtype == want.dtype and torch.equal(out, want) and _strides_match(out, want)


@pytest.mark.parametrize("op", OPS)
def test_a_dynamic_out_takes_selfs_sizes_in_its_dim_order(op):
    x = values((2, 3, 4, 5), torch.float32, 0)
    order = channels_last(4)
    out = blank((1, 1, 1, 1), torch.float32, order, BOUND, capacity=x.numel())
    ctx, _ = call_portable(op, [portable(x, tuple(range(4))), False, list(order), out])
    assert ctx.ok, ctx.message
    assert out.sizes == (2, 3, 4, 5) and out.dim_order == order
    assert torch.equal(out.host_view(), x)
    assert out.host_view().is_contiguous(memory_format=torch.channels_last)


def test_the_aten_kernel_resizes_a_dynamic_out_in_channels_last():
    x = values((2, 3, 4, 5), torch.float16, 1)
    out = torch.empty((0, 0, 0, 0), dtype=torch.float32)
    call_aten(TO_DIM_ORDER_COPY, [x, False, list(channels_last(4)), out])
    assert out.shape == x.shape and out.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(out, x.float())


# (op, self, out, non_blocking, dim_order, words the message must hold)
F32, F64 = torch.float32, torch.float64
REFUSED = {
    "non_blocking": (TO_DIM_ORDER_COPY, ((2, 3), F32, (0, 1)), ((2, 3), F64, (0, 1)), True, None,
                     ["non_blocking=True", "Pass non_blocking=False"]),
    "dim_order_length": (TO_DIM_ORDER_COPY, ((2, 3), F32, (0, 1)), ((2, 3), F32, (0, 1)), False, [0, 1, 2],
                         ["dim_order [0, 1, 2] has 3 entries for a 2-D self", "[0, 1]"]),
    "dim_order_other_permutation": (CLONE_DIM_ORDER, ((2, 3, 4), F32, (0, 1, 2)), ((2, 3, 4), F32, (0, 2, 1)), False,
                                    [0, 2, 1], ["dim_order [0, 2, 1] is neither contiguous nor channels-last",
                                                "[0, 1, 2]"]),
    "out_not_in_dim_order": (TO_DIM_ORDER_COPY, ((2, 3, 4, 5), F32, (0, 1, 2, 3)), ((2, 3, 4, 5), F32, (0, 1, 2, 3)),
                             False, [0, 2, 3, 1], ["dim_order [0, 2, 3, 1] but out is laid out (0, 1, 2, 3)",
                                                   "pass dim_order=[0, 1, 2, 3]"]),
    "none_but_out_differs": (CLONE_DIM_ORDER, ((2, 3, 4, 5), F32, (0, 1, 2, 3)), ((2, 3, 4, 5), F32, (0, 2, 3, 1)),
                             False, None, ["out must keep self's dim order (0, 1, 2, 3)", "dim_order=[0, 2, 3, 1]"]),
    "clone_casts": (CLONE_DIM_ORDER, ((2, 3), F32, (0, 1)), ((2, 3), F64, (0, 1)), False, None,
                    ["self has dtype torch.float32 but out has torch.float64", "_to_dim_order_copy"]),
    "complex": (TO_DIM_ORDER_COPY, ((2, 3), torch.complex64, (0, 1)), ((2, 3), F32, (0, 1)), False, None,
                ["self has dtype torch.complex64", "float32"]),
    "static_out_other_sizes": (TO_DIM_ORDER_COPY, ((2, 3), F32, (0, 1)), ((3, 2), F64, (0, 1)), False, None,
                               ["out", "(3, 2)"]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_bad_call_is_refused_naming_the_values_and_out_is_untouched(case):
    op, (shape, dtype, order), (out_shape, out_dtype, out_order), non_blocking, dim_order, words = REFUSED[case]
    x = portable(torch.ones(shape, dtype=dtype), order)
    out = portable(torch.full(out_shape, 7, dtype=out_dtype), out_order)
    before = out.storage.copy()
    ctx, result = call_portable(op, [x, non_blocking, dim_order, out])
    assert ctx.failure_state() == Error.InvalidArgument and result is out
    assert ctx.message.startswith(op) and all(w in ctx.message for w in words), ctx.message
    assert np.array_equal(out.storage, before) and out.sizes == out_shape


@pytest.mark.parametrize("case", sorted(set(REFUSED) - {"static_out_other_sizes"}))
def test_the_aten_kernel_raises_what_the_portable_one_records(case):
    op, (shape, dtype, order), (out_shape, out_dtype, out_order), non_blocking, dim_order, words = REFUSED[case]
    x = torch.ones(shape, dtype=dtype).contiguous(memory_format=memory_format(order))
    out = torch.full(out_shape, 7, dtype=out_dtype).contiguous(memory_format=memory_format(out_order))
    with pytest.raises(KernelFailure) as info:
        call_aten(op, [x, non_blocking, dim_order, out])
    assert info.value.error == Error.InvalidArgument and all(w in str(info.value) for w in words)
    assert torch.equal(out, torch.full(out_shape, 7, dtype=out_dtype))


def test_both_modes_libs_hold_the_ops_with_executorchs_schemas():
    """ExecuTorch 1.5.1's portable functions.yaml schemas; the portable lib and the ATen-mode native lib (as
    ExecuTorch's ATen generated_lib links edge_dialect_aten_op.yaml) build devcopy's kernels for them."""
    schema = "(Tensor self, *, bool non_blocking=False, int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)"
    for lib, portable_mode in ((portable_lib(), True), (native_lib(), False)):
        for op in OPS:
            kernel = lib.kernel(op)
            assert str(kernel.schema) == op.split("::")[1] + schema
            assert kernel.fn.portable is portable_mode and kernel.fn.__name__ == op
