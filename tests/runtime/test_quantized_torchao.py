"""torchao quantization (`quantize_`) against ExecuTorch 1.5.1. int8 weight-only exports to plain ATen ops (an int8
weight cast to float, a matmul, a per-channel scale): it places with ExecuTorch's counts and runs in both modes to
exactly what ExecuTorch's edge program computes, which differs from eager by float rounding (the edge program
multiplies a contiguous copy of the transposed weight). Dynamic int8 activations keep torchao's
`choose_qparams_affine` / `quantize_affine`, which have no out variant: ExecuTorch's `to_executorch` and devcopy's
emitter both refuse, naming the op."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, load_method, place_devices

pytestmark = pytest.mark.reference
MODES = ["portable", "aten"]


def _quantized(config_name: str):
    quantization = pytest.importorskip("torchao.quantization")
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 4)).eval()
    quantization.quantize_(module, getattr(quantization, config_name)())
    return module, (torch.randn(2, 16),)


def _edge_program_output(module, inputs):
    from executorch.exir import EdgeCompileConfig, to_edge

    edge = to_edge(torch.export.export(module, inputs), compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return edge.exported_program().module()(*inputs)


def test_int8_weight_only_places_as_executorch_and_runs_as_its_edge_program():
    from test_executorch_reference import assert_agree, both

    module, inputs = _quantized("Int8WeightOnlyConfig")
    mine, theirs = both(module, inputs, DEFAULT_DELEGATE_OPS)
    assert_agree(mine, theirs, DEFAULT_DELEGATE_OPS)
    placed = place_devices(export_and_lower(module, inputs, DEFAULT_DELEGATE_OPS))
    edge, eager = _edge_program_output(module, inputs), module(*inputs)
    for mode in MODES:
        with load_method(placed, mode, backend="simulated") as method:
            (got,) = method(*inputs)
        assert torch.equal(got, edge), mode
        torch.testing.assert_close(got, eager)  # float32 rounding of another matmul layout, not an exact match


@pytest.mark.parametrize("mode", MODES)
def test_dynamic_int8_is_refused_naming_torchaos_op_in_each_mode(mode):
    module, inputs = _quantized("Int8DynamicActivationInt8WeightConfig")
    placed = place_devices(export_and_lower(module, inputs, DEFAULT_DELEGATE_OPS))
    with pytest.raises(NotImplementedError) as refused:
        load_method(placed, mode, backend="simulated")
    message = str(refused.value)
    assert "torchao.choose_qparams_affine.default has no out variant" in message
    assert "decompose the op or delegate it" in message


def test_executorch_refuses_dynamic_int8_for_the_same_ops():
    from executorch.exir import EdgeCompileConfig, to_edge

    module, inputs = _quantized("Int8DynamicActivationInt8WeightConfig")
    edge = to_edge(torch.export.export(module, inputs), compile_config=EdgeCompileConfig(_check_ir_validity=False))
    with pytest.raises(RuntimeError, match="Missing out variants") as refused:
        edge.to_executorch()
    assert "torchao::choose_qparams_affine" in str(refused.value)
