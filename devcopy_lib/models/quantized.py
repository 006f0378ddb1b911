"""Quantized models the way ExecuTorch's docs make them: PT2E with the XNNPACK quantizer and a symmetric config,
one calibration call (`prepare_pt2e`, call, `convert_pt2e`). The converted module computes with
`quantized_decomposed` quantize/dequantize ops around float ops; devcopy places them on the CPU like any op no
delegate takes, and runs them with the `quantized` lib (docs/semantics.md §5).

Needs the `reference` extra (ExecuTorch 1.5.1 ships the XNNPACK quantizer and the torchao it runs on); each
factory raises ModelsExtraMissing naming the install command otherwise. `QUANTIZED_MODELS`: a linear and a
convolution (per tensor and per channel), `llama_tiny_quantized`, ExecuTorch's own example Llama
(`examples/models/llama`, the one its quantization docs export) with a small config, and `embedding_quantized`, an
embedding table quantized to 8, 4 or 2 bits the way ExecuTorch's Llama export does (`EmbeddingQuantHandler`), and
`llama_tiny_embedding_quantized`, the tiny Llama with its token embedding so quantized.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import torch
from torch import nn

from .extras import ModelsExtraMissing
from .samples import Sample, seeded

REFERENCE_HINT = "pip install 'devcopy[reference]'  (from a checkout: pip install -c constraints.txt -e '.[reference]')"
# ExecuTorch's example Llama at test size: 2 layers, 64 wide, 4 heads sharing 2 key/value heads, vocabulary 128
LLAMA_TINY_ARGS: dict[str, Any] = {
    "dim": 64,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 2,
    "vocab_size": 128,
    "hidden_dim": 128,
    "max_seq_len": 16,
    "max_context_len": 16,
    "use_kv_cache": False,
}


def _reference(module: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise ModelsExtraMissing(
            f"{what} needs ExecuTorch's XNNPACK quantizer ({exc}). Install the reference extra: {REFERENCE_HINT}"
        ) from exc


def pt2e_quantize(module: nn.Module, example_inputs: Sequence[torch.Tensor], per_channel: bool = False) -> nn.Module:
    """`module` quantized as ExecuTorch's docs teach: exported, `prepare_pt2e` with
    `XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=per_channel))`, one calibration
    call on `example_inputs`, `convert_pt2e`. The result is what to compare a run with (its own eager output)."""
    pt2e = _reference("torchao.quantization.pt2e.quantize_pt2e", "PT2E quantization")
    xnnpack = _reference("executorch.backends.xnnpack.quantizer.xnnpack_quantizer", "PT2E quantization")
    inputs = tuple(example_inputs)
    captured = torch.export.export(module.eval(), inputs).module()
    config = xnnpack.get_symmetric_quantization_config(is_per_channel=per_channel)
    prepared = pt2e.prepare_pt2e(captured, xnnpack.XNNPACKQuantizer().set_global(config))
    prepared(*inputs)  # the one calibration call
    converted: nn.Module = pt2e.convert_pt2e(prepared)
    return converted


def _quantized(build: Callable[[], Sample], per_channel: bool) -> Sample:
    module, inputs = build()
    return pt2e_quantize(module, inputs, per_channel), inputs


@seeded
def linear_quantized(per_channel: bool = False) -> Sample:
    """A linear layer and a ReLU, quantized (int8 activations and weights, per tensor or per output channel)."""
    return _quantized(lambda: (nn.Sequential(nn.Linear(8, 4), nn.ReLU()), (torch.randn(2, 8),)), per_channel)


@seeded
def conv_quantized(per_channel: bool = False) -> Sample:
    """A 3x3 convolution and a ReLU on a 1x3x8x8 image, quantized (per tensor or per output channel)."""
    return _quantized(lambda: (nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()), (torch.randn(1, 3, 8, 8),)), per_channel)


@seeded
def llama_tiny_quantized(seq_len: int = 8, per_channel: bool = True) -> Sample:
    """ExecuTorch's example Llama (`executorch.examples.models.llama`, `LLAMA_TINY_ARGS`: RMSNorm, rotary, grouped
    key/value heads, SwiGLU) quantized with per-channel weights; logits of the last token for `seq_len` tokens."""
    transformer = _reference("executorch.examples.models.llama.llama_transformer", "llama_tiny_quantized")
    model_args = _reference("executorch.examples.models.llama.model_args", "llama_tiny_quantized")
    model = transformer.construct_transformer(model_args.ModelArgs(**LLAMA_TINY_ARGS)).eval()
    tokens = torch.randint(0, LLAMA_TINY_ARGS["vocab_size"], (1, seq_len))
    return pt2e_quantize(model, (tokens,), per_channel), (tokens,)


class _EmbedThenLinear(nn.Module):
    """Token ids -> embedding -> linear: the embedding on the CPU (no delegate takes it), the linear delegated."""

    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.embed, self.project = nn.Embedding(vocab, dim), nn.Linear(dim, 8)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.project(self.embed(tokens))
        return out


@seeded
def embedding_quantized(bits: int = 8, group_size: int = 0) -> Sample:
    """An embedding table (32 x 16) and a linear, the table quantized as ExecuTorch's Llama export quantizes one
    (`EmbeddingQuantHandler`, examples/models/llama/source_transformation/quantize.py): `bits` 8 (one int8 per
    value, `embedding_byte`), 4 or 2 (packed, `embedding_4bit` / `embedding_2bit`); `group_size` 0 for one scale
    per row, else one per group of that many columns. Float16 scales, float32 output, as that handler makes them."""
    module = _EmbedThenLinear(32, 16).eval()
    return _quantize_embeddings(module, bits, group_size), (torch.randint(0, 32, (2, 5)),)


def _quantize_embeddings(module: nn.Module, bits: int, group_size: int) -> nn.Module:
    handler = _reference("executorch.examples.models.llama.source_transformation.quantize", "embedding quantization")
    with contextlib.redirect_stdout(io.StringIO()):  # the handler prints a line per table it quantizes
        quantized: nn.Module = handler.EmbeddingQuantHandler(
            module, bitwidth=bits, group_size=group_size, packed=bits < 8
        ).quantized_model()
    return quantized


@seeded
def llama_tiny_embedding_quantized(seq_len: int = 8, bits: int = 4, group_size: int = 32) -> Sample:
    """ExecuTorch's example Llama (`LLAMA_TINY_ARGS`) with its token embedding quantized as its export's
    `--embedding-quantize <bits>,<group_size>` does (`EmbeddingQuantHandler`), the rest float; logits of the last
    token for `seq_len` tokens."""
    transformer = _reference("executorch.examples.models.llama.llama_transformer", "llama_tiny_embedding_quantized")
    model_args = _reference("executorch.examples.models.llama.model_args", "llama_tiny_embedding_quantized")
    model = transformer.construct_transformer(model_args.ModelArgs(**LLAMA_TINY_ARGS)).eval()
    tokens = torch.randint(0, LLAMA_TINY_ARGS["vocab_size"], (1, seq_len))
    return _quantize_embeddings(model, bits, group_size), (tokens,)


QUANTIZED_MODELS: dict[str, Callable[..., Sample]] = {
    f.__name__: f
    for f in (
        linear_quantized,
        conv_quantized,
        llama_tiny_quantized,
        embedding_quantized,
        llama_tiny_embedding_quantized,
    )
}
