"""The quantized add kernel of the quantized libs (`quantized_decomposed::add.out`, ops/quantized_add.py) against
ExecuTorch's own C++ kernel, which its quantized AOT lib registers in torch: random shapes, integer dtypes, scales,
zero points and ranges give the same bytes in both modes; bad arguments are refused naming them, `out` left as it
was. A .pte whose add ExecuTorch's QuantFusionPass fused runs in devcopy to what ExecuTorch's runtime gives."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_calls import call_kernel

from devcopy_lib import load_method
from devcopy_lib.runtime.libs import quantized_lib
from devcopy_lib.tensors.error import Error

pytestmark = [
    pytest.mark.reference,
    pytest.mark.skipif(importlib.util.find_spec("executorch") is None, reason="needs ExecuTorch's kernel"),
]
MODES = ["portable", "aten"]
OP = "quantized_decomposed::add.out"


def _run(mode: str, args: list, out: torch.Tensor) -> tuple[torch.Tensor, Error, str]:
    return call_kernel(quantized_lib(mode).kernel(OP), mode, args, out)


@st.composite
def _qrange(draw):
    low = draw(st.integers(0, 120))
    return low, draw(st.integers(low, 255))


@st.composite
def _operand(draw, shape, dtype):
    low, high = draw(_qrange())
    seed = draw(st.integers(0, 2**16))
    q = torch.randint(low, high + 1, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)
    scale = draw(  # doubles, as a .pte holds them: the kernel narrows them to float32
        st.floats(1e-4, 4.0)
    )
    return [q, scale, draw(st.integers(0, 255)), low, high]


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_add_kernel_equals_executorchs_own(mode, data):
    shape = data.draw(st.sampled_from([(1,), (7,), (3, 5), (2, 3, 4), (16, 64)]))
    dtype = data.draw(st.sampled_from([torch.uint8, torch.int16, torch.int32, torch.int64]))
    a, b = data.draw(_operand(shape, dtype)), data.draw(_operand(shape, dtype))
    out_low, out_high = data.draw(_qrange())
    out_params = [data.draw(st.floats(1e-3, 4.0)), data.draw(st.integers(0, 255)), out_low, out_high]
    args = [*a, *b, *out_params]
    expected = torch.full(shape, 3, dtype=dtype)
    torch.ops.quantized_decomposed.add.out(*args, out=expected)  # ExecuTorch's C++ kernel, from its AOT lib
    got, state, message = _run(mode, args, torch.full(shape, 3, dtype=dtype))
    assert state is Error.Ok, message
    assert torch.equal(got, expected)


# (a, b, out) scales and zero points: decimal scales (not exact in binary, so each rounding step shows) and dyadic ones
# (exact, so halves tie)
QPARAMS = [
    ((0.01, 0.2, 0.1), (132, 248, 207)),
    ((0.3, 0.03, 0.07), (0, 255, 128)),
    ((0.7, 0.1, 0.9), (17, 90, 3)),
    ((0.5, 0.25, 1.0), (128, 64, 0)),
    ((0.125, 0.5, 0.25), (255, 0, 100)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("scales", "zero_points"), QPARAMS)
def test_every_pair_of_uint8_values_adds_as_executorchs_kernel(mode, scales, zero_points):
    """All 65,536 pairs at once: the rounding steps (a double scale narrowed to float32, the product by the float32
    inverse of the out scale, ties to even) each decide a few of them (random draws seldom hit one)."""
    a = torch.arange(256, dtype=torch.uint8).repeat(256)
    b = torch.arange(256, dtype=torch.uint8).repeat_interleave(256)
    (sa, sb, so), (za, zb, zo) = scales, zero_points
    args = [a, sa, za, 0, 255, b, sb, zb, 0, 255, so, zo, 0, 255]
    expected = torch.empty_like(a)
    torch.ops.quantized_decomposed.add.out(*args, out=expected)
    got, state, message = _run(mode, args, torch.empty_like(a))
    assert state is Error.Ok, message
    assert torch.equal(got, expected)


def _good():
    q = torch.tensor([[10, 200], [0, 255]], dtype=torch.uint8)
    return [q, 0.1, 128, 0, 255, q.clone(), 0.05, 3, 0, 255, 0.2, 10, 0, 255]


BAD = {
    "other shapes": (5, torch.zeros(3, dtype=torch.uint8), ["b ([3], torch.uint8)", "one shape and dtype"]),
    "other dtypes": (5, torch.zeros(2, 2, dtype=torch.int16), ["torch.int16", "broadcast or cast"]),
    "float operands": (None, None, ["has dtype torch.float32", "integer"]),
    "a signed range": (3, -128, ["a_quant_min -128", "[0, 255]", "quant_min >= 0"]),
    "an out range past 255": (13, 256, ["out_quant_max 256", "[0, 255]"]),
    "a reversed range": (9, 100, ["b_quant_min 200 / b_quant_max 100", "ordered"]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_argument_is_refused_naming_it_and_out_is_left_as_it_was(mode, case):
    index, value, words = BAD[case]
    args = _good()
    if index is None:
        args[0], args[5] = args[0].float(), args[5].float()
    else:
        args[index] = value
    if case == "a reversed range":
        args[8] = 200
    dtype = args[0].dtype
    got, state, message = _run(mode, args, torch.full((2, 2), 9, dtype=dtype))
    assert state is Error.InvalidArgument
    assert all(word in message for word in words), message
    assert torch.equal(got, torch.full((2, 2), 9, dtype=dtype))


class _QuantizedAdd(torch.nn.Module):
    """An add between uint8 quantize/dequantize pairs: what QuantFusionPass fuses into quantized_decomposed::add."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        q = torch.ops.quantized_decomposed
        dx = q.dequantize_per_tensor(
            q.quantize_per_tensor(x, 0.02, 120, 0, 255, torch.uint8), 0.02, 120, 0, 255, torch.uint8
        )
        dy = q.dequantize_per_tensor(
            q.quantize_per_tensor(y, 0.03, 90, 0, 255, torch.uint8), 0.03, 90, 0, 255, torch.uint8
        )
        qz = q.quantize_per_tensor(dx + dy, 0.04, 100, 0, 255, torch.uint8)
        return q.dequantize_per_tensor(qz, 0.04, 100, 0, 255, torch.uint8)


def test_a_pte_with_executorchs_fused_add_runs_as_in_executorch():
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
    from executorch.exir.passes.quant_fusion_pass import QuantFusionPass

    from devcopy_lib import open_pte, pte_program, run_in_executorch

    inputs = (torch.randn(3, 4), torch.randn(3, 4))
    edge = to_edge(
        torch.export.export(_QuantizedAdd(), inputs), compile_config=EdgeCompileConfig(_check_ir_validity=False)
    )
    # where ExecuTorch's docs put the pass (its LLaVA export too): a to_executorch pass
    data = edge.to_executorch(ExecutorchBackendConfig(passes=[QuantFusionPass()])).buffer
    program = open_pte(data)
    assert OP in program.operators
    theirs = run_in_executorch(data, list(inputs), program.operators)
    assert theirs.ok, theirs.summary()
    for mode in MODES:
        with load_method(pte_program(program), mode) as method:
            (ours,) = method(*inputs)
        assert torch.equal(ours, theirs.outputs[0]), mode
