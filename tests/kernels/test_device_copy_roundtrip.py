"""Property: H2D then D2H through the portable kernels returns the input bit for bit (random bit patterns: negatives,
NaN payloads, infinities, -0.0), over dtypes and shapes; a bad call leaves out untouched."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from random_dags import random_bits, same_bits

from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.kernels.device_copy import _d2h_copy_out, _h2d_copy_out
from devcopy_lib.names import device_string
from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism

DTYPES = [
    torch.bool,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]
SHAPES = st.one_of(
    st.just(()),
    st.just((0,)),
    st.just((0, 3)),
    st.just((257, 33)),
    st.lists(st.integers(1, 6), min_size=1, max_size=3).map(tuple),
)
BOUND = TensorShapeDynamism.DYNAMIC_BOUND


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(DTYPES), SHAPES, st.integers(0, 2**16), st.integers(0, 3), st.integers(0, 4))
def test_roundtrip_is_exact_and_bound_outs_shrink(dtype, shape, seed, index, slack):
    source = random_bits(dtype, shape, seed)
    numel = source.numel()
    with scoped_allocators(SimulatedCudaAllocator()):
        ctx = KernelRuntimeContext()
        device = PortableTensor.empty(dtype, shape, device_string(index))
        _h2d_copy_out(ctx, PortableTensor.from_torch(source), device)
        back = PortableTensor.empty(dtype, (numel + slack,) if shape else (), dynamism=BOUND, capacity=numel + slack)
        if shape:
            flat = PortableTensor(dtype, (numel,), device.storage, device=device.device)
            _d2h_copy_out(ctx, flat, back)
            result = back.host_view().reshape(shape)
        else:
            _d2h_copy_out(ctx, device, back)
            result = back.host_view()
    assert ctx.failure_state() is Error.Ok
    assert same_bits(result, source)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(1, 64), st.integers(0, 2**16))
def test_refused_copy_leaves_out_untouched(dtype, extra, seed):
    with scoped_allocators(SimulatedCudaAllocator()):
        out = PortableTensor.empty(dtype, [4], dynamism=BOUND)
        out.host_view().copy_(random_bits(dtype, (4,), seed))
        before = (out.sizes, out.storage.copy())
        src = PortableTensor.empty(dtype, [4 + extra], "cuda:0")
        ctx = KernelRuntimeContext()
        _d2h_copy_out(ctx, src, out)
    assert ctx.failure_state() is Error.InvalidArgument
    assert out.sizes == before[0] and (out.storage == before[1]).all()
