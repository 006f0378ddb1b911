"""The quantized libs (`quantized`, `quantized_ops_aten_lib`): ExecuTorch's quantized out variants (ops/quantized.yaml)
registered in each mode and linked by default. A PT2E XNNPACK-quantized linear, convolution and tiny Llama place with
ExecuTorch 1.5.1's counts and run in both modes equal to the quantized model's own eager output; a runtime that does
not link the quantized lib fails to load with `Missing operator`, naming the lib and how to link it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, load_method, models, place_devices
from devcopy_lib.runtime.libs import lib_by_name, quantized_lib
from devcopy_lib.runtime.resolve import MissingOperatorError
from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor

MODES = ["portable", "aten"]
ROOT = Path(__file__).resolve().parents[2]
MATRIX = ("mm.default", "addmm.default", "bmm.default")
Q = torch.ops.quantized_decomposed


# ---- the kernels, against torch's functional ops (no ExecuTorch needed) ----------------------------------------
def _cases():
    x = torch.randn(4, 6)
    scales, zero_points = torch.rand(4) / 50 + 0.01, torch.randint(-3, 3, (4,))
    q = Q.quantize_per_tensor.default(x, 0.02, 3, -128, 127, torch.int8)
    qc = Q.quantize_per_channel.default(x, scales, zero_points, 0, -128, 127, torch.int8)
    scale_t, zero_t = torch.tensor([0.02], dtype=torch.double), torch.tensor([3])
    return {
        "quantize_per_tensor.out": ([x, 0.02, 3, -128, 127, torch.int8], [torch.int8]),
        "quantize_per_tensor.Tensor_out": ([x, scale_t, zero_t, -128, 127, torch.int8], [torch.int8]),
        "dequantize_per_tensor.out": ([q, 0.02, 3, -128, 127, torch.int8, None], [torch.float32]),
        "dequantize_per_tensor.Tensor_out": ([q, scale_t, zero_t, -128, 127, torch.int8, None], [torch.float32]),
        "quantize_per_channel.out": ([x, scales, zero_points, 0, -128, 127, torch.int8], [torch.int8]),
        "dequantize_per_channel.out": (
            [qc, scales, zero_points, 0, -128, 127, torch.int8, None],
            [torch.float32],
        ),
        "choose_qparams.Tensor_out": ([x, -128, 127, 1e-5, torch.int8], [torch.float64, torch.int64]),
    }


def _functional(name, args):
    from devcopy_lib.ops.quantized import functional_of

    op = f"quantized_decomposed::{name}"
    schema = quantized_lib().kernel(op).schema
    n_positional = len(schema.arguments.flat_positional)
    keywords = {a.name: v for a, v in zip(schema.arguments.flat_kwarg_only, args[n_positional:], strict=True)}
    result = functional_of(op)(*args[:n_positional], **keywords)
    return result if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(_cases()))
def test_each_kernel_computes_what_torch_computes_eagerly(mode, name):
    args, out_dtypes = _cases()[name]
    expected = _functional(name, args)
    kernel = quantized_lib(mode).kernel(f"quantized_decomposed::{name}")
    if mode == "portable":
        boxed = [PortableTensor.from_torch(a) if isinstance(a, torch.Tensor) else a for a in args]
        outs = [PortableTensor.empty(dtype, list(e.shape)) for dtype, e in zip(out_dtypes, expected, strict=True)]
        ctx = KernelRuntimeContext()
        kernel(ctx, [*boxed, *outs])
        assert ctx.failure_state() is Error.Ok, ctx.message
        got = [out.host_view() for out in outs]
    else:
        got = [torch.empty(e.shape, dtype=dtype) for dtype, e in zip(out_dtypes, expected, strict=True)]
        kernel(KernelRuntimeContext(), [*args, *got])
    for mine, eager in zip(got, expected, strict=True):
        assert torch.equal(mine, eager.to(mine.dtype)), name


def test_a_static_out_of_other_sizes_is_refused_naming_the_op_and_left_as_it_was():
    x = torch.randn(4, 6)
    kernel = quantized_lib().kernel("quantized_decomposed::quantize_per_tensor.out")
    out = PortableTensor.from_torch(torch.full((2, 6), 7, dtype=torch.int8))
    ctx = KernelRuntimeContext()
    kernel(ctx, [PortableTensor.from_torch(x), 0.02, 0, -128, 127, torch.int8, out])
    assert ctx.failure_state() is Error.InvalidArgument
    assert "quantized_decomposed::quantize_per_tensor.out" in ctx.message
    assert out.sizes == (2, 6) and bool((out.host_view() == 7).all())


def test_the_libs_are_linkable_by_name_in_their_mode():
    assert lib_by_name("quantized") is quantized_lib("portable") and quantized_lib("portable").mode == "portable"
    assert lib_by_name("quantized_ops_aten_lib") is quantized_lib("aten") and quantized_lib("aten").mode == "aten"
    assert set(quantized_lib("portable").ops) == set(quantized_lib("aten").ops)
    assert "quantized_decomposed::choose_qparams.Tensor_out" in quantized_lib().ops


# ---- a hand-written quantize/dequantize program, without ExecuTorch ----------------------------------------------
class RoundTrip(torch.nn.Module):
    """What a quantized model does around a float op: quantize an activation, dequantize it, compute."""

    def forward(self, x):
        q = Q.quantize_per_tensor.default(x, 0.05, 2, -128, 127, torch.int8)
        return torch.sin(Q.dequantize_per_tensor.default(q, 0.05, 2, -128, 127, torch.int8))


@pytest.mark.parametrize("mode", MODES)
def test_quantize_and_dequantize_run_by_default_equal_to_eager(sim, mode):
    x = torch.randn(3, 5)
    placed = place_devices(export_and_lower(RoundTrip(), (x,)))
    with load_method(placed, mode) as method:
        (got,) = method(x)
        assert {"quantized", "quantized_ops_aten_lib"} & {kernel.lib for kernel in method.kernels}
    assert torch.equal(got, RoundTrip()(x))


def test_without_the_quantized_lib_the_load_names_it_in_each_mode():
    placed = place_devices(export_and_lower(RoundTrip(), (torch.randn(3, 5),)))
    with pytest.raises(MissingOperatorError) as portable:
        load_method(placed, "portable", ["portable"])
    message = str(portable.value)
    assert "Missing operator: [0] quantized_decomposed::quantize_per_tensor.out" in message
    assert "Missing operator: [1] quantized_decomposed::dequantize_per_tensor.out" in message
    assert "There are 2 instructions don't have corresponding operator registered" in message
    assert "To fix: link quantized (ExecuTorch's quantized kernels" in message
    with pytest.raises(MissingOperatorError) as aten:
        load_method(placed, "aten", ["native", "device_copy_ops_aten_lib"])
    assert "To fix: link quantized_ops_aten_lib" in str(aten.value)
    assert "(--libs native,device_copy_ops_aten_lib,quantized_ops_aten_lib)" in str(aten.value)


def test_without_executorch_devcopy_defines_the_out_variants_itself(tmp_path):
    """ExecuTorch's AOT lib aborts the process if an out variant was defined before it loads, so devcopy loads it
    when ExecuTorch is installed; without ExecuTorch devcopy defines the out variants itself and still runs."""
    code = textwrap.dedent(
        """
        import importlib.util, sys
        find_spec = importlib.util.find_spec
        importlib.util.find_spec = lambda name, *a: None if name.split(".")[0] == "executorch" else find_spec(name, *a)
        import torch
        from devcopy_lib.ops import quantized
        from devcopy_lib import export_and_lower, load_method, place_devices
        Q = torch.ops.quantized_decomposed

        class RoundTrip(torch.nn.Module):
            def forward(self, x):
                q = Q.quantize_per_tensor.default(x, 0.05, 2, -128, 127, torch.int8)
                return torch.sin(Q.dequantize_per_tensor.default(q, 0.05, 2, -128, 127, torch.int8))

        x = torch.randn(3, 5)
        out = torch.empty(3, 5, dtype=torch.int8)
        Q.quantize_per_tensor.out(x, 0.05, 2, -128, 127, torch.int8, out=out)
        assert torch.equal(out, Q.quantize_per_tensor.default(x, 0.05, 2, -128, 127, torch.int8))
        placed = place_devices(export_and_lower(RoundTrip(), (x,)))
        for mode in ("portable", "aten"):
            with load_method(placed, mode, backend="simulated") as method:
                assert torch.equal(method(x)[0], RoundTrip()(x))
        print(quantized.DEFINED_BY, "executorch" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["devcopy", "False"]


# ---- PT2E XNNPACK-quantized models against ExecuTorch -------------------------------------------------------------
def _quantized(factory, **options):
    pytest.importorskip("executorch")
    try:
        return models.QUANTIZED_MODELS[factory](**options)
    except models.ModelsExtraMissing as exc:
        pytest.skip(str(exc))


def _agree(module, inputs, ops):
    from test_executorch_reference import assert_agree, both

    mine, theirs = both(module, inputs, ops)
    assert_agree(mine, theirs, ops)
    return mine


def _runs_equal_to_eager(module, inputs, ops):
    placed = place_devices(export_and_lower(module, inputs, ops))
    expected = module(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for mode in MODES:
        with load_method(placed, mode, backend="simulated") as method:
            got = method(*inputs)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True)), mode


@pytest.mark.reference
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("name", ["linear_quantized", "conv_quantized"])
def test_pt2e_quantized_layers_place_as_executorch_and_run_equal_to_eager(name, per_channel):
    module, inputs = _quantized(name, per_channel=per_channel)
    mine = _agree(module, inputs, DEFAULT_DELEGATE_OPS)
    assert (mine["delegates"], mine["h2d"], mine["d2h"]) == (1, 2, 1)
    _runs_equal_to_eager(module, inputs, DEFAULT_DELEGATE_OPS)


@pytest.mark.reference
@pytest.mark.deep  # a PT2E quantization and two ExecuTorch lowerings of a transformer: minutes on two cores
@pytest.mark.parametrize("ops", [DEFAULT_DELEGATE_OPS, MATRIX], ids=["default", "matrix"])
def test_a_pt2e_quantized_tiny_llama_places_as_executorch_and_runs_equal_to_eager(ops):
    module, inputs = _quantized("llama_tiny_quantized")
    mine = _agree(module, inputs, ops)
    expected = (62, 164, 96) if ops is DEFAULT_DELEGATE_OPS else (13, 38, 19)
    assert (mine["delegates"], mine["h2d"], mine["d2h"]) == expected
    _runs_equal_to_eager(module, inputs, ops)
