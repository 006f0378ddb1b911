"""Real models, built from code and config with random weights (seeded), in eval mode, with no download: the
`models` extra (torchvision, transformers). Each is a factory returning `(module, example_inputs)` like the samples;
keyword options (an image size, a sequence length) make smaller variants for tests.

The transformers models are wrapped so that they return tensors (the logits, or BERT's hidden states and pooled
output) instead of a ModelOutput, and use the "eager" attention implementation: attention as matmuls and softmax,
the ops a device backend delegates, as when exporting for ExecuTorch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..lowering.lower import DEFAULT_DELEGATE_OPS
from .extras import require
from .samples import Sample, seeded

MATRIX_OPS = ("mm.default", "addmm.default", "bmm.default")  # what nn.Linear and attention decompose to
VIEW_OPS = (
    "view.default",
    "_unsafe_view.default",
    "permute.default",
    "expand.default",
    "clone.default",
    "unsqueeze.default",
)
CNN_OPS = (
    "convolution.default",
    "_native_batch_norm_legit_no_training.default",
    "relu.default",
    "max_pool2d_with_indices.default",
    "mean.dim",
    "add.Tensor",
)
# A tiny transformer (2 layers, 64 wide, 4 heads, vocabulary 1,024): llama_tiny and its relatives in families.py
TINY_DECODER: dict[str, int] = {
    "vocab_size": 1024,
    "hidden_size": 64,
    "intermediate_size": 176,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 128,
}
# The delegate sets a user picks for a device backend: every real model places and runs with each.
DELEGATE_SETS: dict[str, tuple[str, ...]] = {
    "matrix": MATRIX_OPS,
    "matrix_views": MATRIX_OPS + VIEW_OPS,
    "cnn": CNN_OPS,
    "default": DEFAULT_DELEGATE_OPS,
}


class HuggingFaceOutputs(nn.Module):
    """A transformers model returning the named fields of its output as a tuple of tensors (one field: the tensor)."""

    def __init__(
        self,
        model: nn.Module,
        fields: tuple[str, ...],
        input_names: tuple[str, ...] = ("input_ids", "attention_mask"),
        **call_options: Any,
    ) -> None:
        super().__init__()
        self.model, self.fields, self.input_names, self.call_options = model, fields, input_names, call_options

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        names = self.input_names[: len(inputs)]
        output = self.model(**dict(zip(names, inputs, strict=True)), **self.call_options)
        values = tuple(getattr(output, field) for field in self.fields)
        return values[0] if len(values) == 1 else values


def token_ids(vocab_size: int, seq_len: int) -> torch.Tensor:
    return torch.randint(0, vocab_size, (1, seq_len))


def padding_mask(seq_len: int) -> torch.Tensor:
    """An attention mask of batch 1 whose last quarter is padding."""
    mask = torch.ones(1, seq_len, dtype=torch.long)
    mask[:, seq_len - seq_len // 4 :] = 0
    return mask


def causal_lm(config_name: str, model_name: str, seq_len: int, **config: Any) -> Sample:
    """transformers' `<Name>ForCausalLM` (GPT-2's `GPT2LMHeadModel`) built from `<Name>Config(**config)`, returning
    its logits for `seq_len` random tokens."""
    transformers = require("transformers", model_name)
    cfg = getattr(transformers, config_name)(use_cache=False, attn_implementation="eager", **config)
    name = config_name.removesuffix("Config")
    model_class = "GPT2LMHeadModel" if name == "GPT2" else f"{name}ForCausalLM"
    model = getattr(transformers, model_class)(cfg).eval()
    return HuggingFaceOutputs(model, ("logits",), use_cache=False).eval(), (token_ids(cfg.vocab_size, seq_len),)


@seeded
def resnet18(image_size: int = 224) -> Sample:
    """torchvision's ResNet-18 (11.7 M parameters), batch 1: convolutions, batch norms, max pool, residual adds."""
    torchvision = require("torchvision", "resnet18")
    return torchvision.models.resnet18(weights=None).eval(), (torch.randn(1, 3, image_size, image_size),)


@seeded
def mobilenet_v3_small(image_size: int = 224) -> Sample:
    """torchvision's MobileNetV3-small (2.5 M parameters), batch 1: depthwise convolutions, hardswish,
    squeeze-excite."""
    torchvision = require("torchvision", "mobilenet_v3_small")
    return torchvision.models.mobilenet_v3_small(weights=None).eval(), (torch.randn(1, 3, image_size, image_size),)


@seeded
def gpt2_2l(seq_len: int = 32) -> Sample:
    """GPT-2 (768 wide, vocabulary 50,257, tied lm_head) with 2 layers; logits for 32 tokens, no KV cache."""
    return causal_lm("GPT2Config", "gpt2_2l", seq_len, n_layer=2)


@seeded
def gpt2_12l(seq_len: int = 32) -> Sample:
    """GPT-2 small's full 12 layers (124 M parameters); logits for 32 tokens, no KV cache."""
    return causal_lm("GPT2Config", "gpt2_12l", seq_len, n_layer=12)


@seeded
def bert_small(seq_len: int = 32) -> Sample:
    """BERT-small (4 layers, 512 wide, 8 heads) encoder with an attention mask; last hidden states and pooled output."""
    transformers = require("transformers", "bert_small")
    cfg = transformers.BertConfig(
        hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048, attn_implementation="eager"
    )
    model = HuggingFaceOutputs(transformers.BertModel(cfg).eval(), ("last_hidden_state", "pooler_output"))
    return model.eval(), (token_ids(cfg.vocab_size, seq_len), padding_mask(seq_len))


@seeded
def llama_tiny(seq_len: int = 32) -> Sample:
    """A tiny Llama (2 layers, 64 wide, 4 heads sharing 2 key/value heads, vocabulary 1,024): RMSNorm, rotary, SiLU."""
    return causal_lm("LlamaConfig", "llama_tiny", seq_len, num_key_value_heads=2, **TINY_DECODER)


# The first real models; models.REAL_MODELS adds the architecture families of families.py
CORE_MODELS: dict[str, Callable[..., Sample]] = {
    f.__name__: f for f in (resnet18, mobilenet_v3_small, gpt2_2l, gpt2_12l, bert_small, llama_tiny)
}
