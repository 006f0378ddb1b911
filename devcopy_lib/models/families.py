"""More architecture families for the real-model suite, each tiny (2 layers or stages, 64 wide), from transformers
configs, torchvision's ConvNeXt class or torch.nn, with random weights (seeded) and no download: decoders with
grouped-query attention, a sliding window, partial rotary, parallel residuals and a mixture of experts; encoders with
relative position bias, a vision patch embedding and an audio conv front end; an LSTM and a ConvNeXt. Factories as in
real.py: `(module, example_inputs)`, with a sequence length or image size to make test variants.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from .extras import require
from .real import TINY_DECODER, HuggingFaceOutputs, causal_lm, padding_mask, token_ids
from .samples import Sample, seeded

_TINY_ENCODER = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4}


@seeded
def mistral_tiny(seq_len: int = 32) -> Sample:
    """A tiny Mistral: grouped-query attention (4 heads, 2 key/value heads) over a sliding window of half the
    sequence, so the window masks."""
    return causal_lm(
        "MistralConfig", "mistral_tiny", seq_len, num_key_value_heads=2, sliding_window=seq_len // 2, **TINY_DECODER
    )


@seeded
def qwen2_tiny(seq_len: int = 32) -> Sample:
    """A tiny Qwen2: like Llama, with biases on the query, key and value projections (addmm where Llama has mm)."""
    return causal_lm("Qwen2Config", "qwen2_tiny", seq_len, num_key_value_heads=2, **TINY_DECODER)


@seeded
def phi_tiny(seq_len: int = 32) -> Sample:
    """A tiny Phi: rotary on half of each head, attention and MLP in parallel off one LayerNorm, GELU."""
    return causal_lm("PhiConfig", "phi_tiny", seq_len, partial_rotary_factor=0.5, **TINY_DECODER)


@seeded
def gpt_neox_tiny(seq_len: int = 32) -> Sample:
    """A tiny GPT-NeoX (Pythia's architecture): one fused query-key-value projection, parallel residual."""
    return causal_lm("GPTNeoXConfig", "gpt_neox_tiny", seq_len, **TINY_DECODER)


@seeded
def mixtral_tiny(seq_len: int = 32) -> Sample:
    """A tiny Mixtral: each layer's MLP is 4 SiLU experts, 2 picked per token by a router. The experts run as
    transformers' "batched_mm" (gather each token's expert weights, then bmm): its default "grouped_mm" is a custom
    op with no out variant, which devcopy's runtime cannot call (docs/real_models.md)."""
    return causal_lm(
        "MixtralConfig",
        "mixtral_tiny",
        seq_len,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        experts_implementation="batched_mm",
        **TINY_DECODER,
    )


@seeded
def t5_encoder_tiny(seq_len: int = 32) -> Sample:
    """A tiny T5 encoder: relative position buckets added to the attention scores, RMS norm, no attention scaling."""
    transformers = require("transformers", "t5_encoder_tiny")
    cfg = transformers.T5Config(
        vocab_size=1024, d_model=64, d_kv=16, d_ff=176, num_layers=2, num_heads=4, attn_implementation="eager"
    )
    model = HuggingFaceOutputs(transformers.T5EncoderModel(cfg).eval(), ("last_hidden_state",))
    return model.eval(), (token_ids(cfg.vocab_size, seq_len), padding_mask(seq_len))


@seeded
def distilbert_tiny(seq_len: int = 32) -> Sample:
    """A tiny DistilBERT encoder with an attention mask (the last quarter padding): no token types, no pooler."""
    transformers = require("transformers", "distilbert_tiny")
    cfg = transformers.DistilBertConfig(
        vocab_size=1024, dim=64, hidden_dim=176, n_layers=2, n_heads=4, attn_implementation="eager"
    )
    model = HuggingFaceOutputs(transformers.DistilBertModel(cfg).eval(), ("last_hidden_state",))
    return model.eval(), (token_ids(cfg.vocab_size, seq_len), padding_mask(seq_len))


@seeded
def vit_tiny(image_size: int = 32) -> Sample:
    """A tiny ViT: 8 x 8 patches embedded by a strided convolution, a class token, 2 encoder layers; hidden states
    and pooled output."""
    transformers = require("transformers", "vit_tiny")
    cfg = transformers.ViTConfig(image_size=image_size, patch_size=8, attn_implementation="eager", **_TINY_ENCODER)
    model = HuggingFaceOutputs(
        transformers.ViTModel(cfg).eval(), ("last_hidden_state", "pooler_output"), input_names=("pixel_values",)
    )
    return model.eval(), (torch.randn(1, 3, image_size, image_size),)


@seeded
def whisper_encoder_tiny(frames: int = 64) -> Sample:
    """A tiny Whisper encoder: two 1-D convolutions with GELU over 80 mel bins (the second halves the frames),
    sinusoidal positions, 2 layers."""
    transformers = require("transformers", "whisper_encoder_tiny")
    heads_layers_ffn = {"attention_heads": 4, "layers": 2, "ffn_dim": 176}
    cfg = transformers.WhisperConfig(
        num_mel_bins=80,
        d_model=64,
        max_source_positions=frames // 2,  # the encoder takes exactly twice this many frames
        attn_implementation="eager",
        **{f"{side}_{key}": value for side in ("encoder", "decoder") for key, value in heads_layers_ffn.items()},
    )
    encoder = transformers.WhisperModel(cfg).get_encoder().eval()
    model = HuggingFaceOutputs(encoder, ("last_hidden_state",), input_names=("input_features",))
    return model.eval(), (torch.randn(1, cfg.num_mel_bins, frames),)


class LstmTagger(nn.Module):
    """Token embedding, a 2-layer LSTM, a linear tag head: a sequence tagger."""

    def __init__(self, vocab_size: int = 1024, width: int = 64, tags: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, width)
        self.lstm = nn.LSTM(width, width, num_layers=2, batch_first=True)
        self.head = nn.Linear(width, tags)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embed(ids))
        return self.head(hidden)  # type: ignore[no-any-return]  # nn.Module.__call__ is untyped


@seeded
def lstm_tagger(seq_len: int = 32) -> Sample:
    """A 2-layer LSTM sequence tagger (torch.nn): torch.export unrolls the recurrence into one step per token."""
    model = LstmTagger().eval()
    return model, (token_ids(model.embed.num_embeddings, seq_len),)


@seeded
def convnext_micro(image_size: int = 32) -> Sample:
    """torchvision's ConvNeXt class with two stages of one block (32 and 64 channels): 7 x 7 depthwise convolutions,
    channels-last LayerNorm, GELU, layer scale. The scale starts at 0.5, not 1e-6, so the blocks' random weights
    show in the output (at 1e-6 a wrong block would hide under the float tolerance)."""
    torchvision = require("torchvision", "convnext_micro")
    convnext = torchvision.models.convnext
    stages = [convnext.CNBlockConfig(32, 64, 1), convnext.CNBlockConfig(64, None, 1)]
    model = convnext.ConvNeXt(stages, layer_scale=0.5, num_classes=10).eval()
    return model, (torch.randn(1, 3, image_size, image_size),)


FAMILY_MODELS: dict[str, Callable[..., Sample]] = {
    f.__name__: f
    for f in (
        mistral_tiny,
        qwen2_tiny,
        phi_tiny,
        gpt_neox_tiny,
        mixtral_tiny,
        t5_encoder_tiny,
        distilbert_tiny,
        vit_tiny,
        whisper_encoder_tiny,
        lstm_tagger,
        convnext_micro,
    )
}
