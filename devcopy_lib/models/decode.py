"""LLM decode as a first-class case: one token through the tiny Llama of `llama_tiny` (its config, random weights)
with a static KV cache, in the two forms a program can hold the cache in.

- `cache="buffers"` (`llama_decode_step`): the cache is registered buffers that transformers' own `StaticLayer`
  writes in place (`index_copy_`), as transformers' ExecuTorch export recipe does. torch.export turns each write
  into a BUFFER_MUTATION output; lowering writes it back with `copy_` (ExecuTorch's
  `insert_write_back_for_buffers_pass`), so the cache is program state the loaded method keeps between calls.
- `cache="inputs"` (`llama_decode_step_functional`): the cache comes in as inputs and goes out updated as outputs,
  after the logits (the caller threads it from one step to the next); nothing is mutated.

The factories fill the cache by running `prompt_len` random tokens through the step eagerly, so a decode step reads
real keys and values; the example inputs are the next token and its position (and, functionally, the cache).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .extras import require
from .real import TINY_DECODER
from .samples import Sample, seeded

CACHE_FORMS = ("buffers", "inputs")  # where a decode step's KV cache lives: program state, or the caller's tensors


class LlamaDecodeStep(nn.Module):
    """One decode step of a transformers causal LM over a static KV cache: `forward(input_ids [1, 1], position [1],
    *cache)` returns the logits, and with `cache="inputs"` the updated cache after them (keys and values per layer).

    The cache is transformers' `StaticCache`; at each call its layers are pointed at this step's tensors (the
    buffers, or copies of the cache inputs), so torch.export sees the module's own buffers and no hidden state."""

    def __init__(self, model: Any, max_cache_len: int, cache: str = "buffers") -> None:
        super().__init__()
        if cache not in CACHE_FORMS:
            raise ValueError(
                f"cache={cache!r} is not a KV cache form; give 'buffers' (registered buffers updated in place) or "
                "'inputs' (the cache as inputs and outputs)."
            )
        cache_utils = require("transformers", "a decode step").cache_utils
        config = model.config  # a transformers PreTrainedModel's
        self.model, self.cache_form, self.layers = model, cache, config.num_hidden_layers
        self.max_cache_len = max_cache_len
        self.static_cache = cache_utils.StaticCache(max_cache_len=max_cache_len, config=config)
        head_dim = config.hidden_size // config.num_attention_heads
        self.static_cache.early_initialization(1, config.num_key_value_heads, head_dim, torch.float32, "cpu")
        if cache == "buffers":
            for i, layer in enumerate(self.static_cache.layers):
                self.register_buffer(f"key_cache_{i}", layer.keys)
                self.register_buffer(f"value_cache_{i}", layer.values)

    def empty_cache(self) -> tuple[torch.Tensor, ...]:
        """A zero cache for `cache="inputs"`: keys and values per layer, [1, kv heads, max_cache_len, head dim]."""
        layers = self.static_cache.layers
        return tuple(torch.zeros_like(t) for layer in layers for t in (layer.keys, layer.values))

    def forward(self, input_ids: torch.Tensor, position: torch.Tensor, *cache: torch.Tensor) -> Any:
        expected = 0 if self.cache_form == "buffers" else 2 * self.layers
        if len(cache) != expected:
            raise ValueError(
                f"a decode step with cache={self.cache_form!r} takes {expected} cache tensors after input_ids and "
                f"position, got {len(cache)}"
            )
        if self.cache_form == "buffers":
            state = [getattr(self, f"{kind}_cache_{i}") for i in range(self.layers) for kind in ("key", "value")]
        else:
            state = [t.clone() for t in cache]  # written in place below: the caller's tensors stay as they were
        layers = self.static_cache.layers
        idle = [(layer.keys, layer.values, layer.cumulative_length, layer.device) for layer in layers]
        try:
            for i, layer in enumerate(layers):
                layer.keys, layer.values = state[2 * i], state[2 * i + 1]
                layer.device = layer.keys.device  # where StaticLayer builds write positions (after .cuda() too)
                layer.cumulative_length = position[0].clone()  # where StaticLayer writes; it advances its own copy
            positions = position.unsqueeze(0)
            cache_options = {"past_key_values": self.static_cache, "use_cache": True}
            output = self.model(input_ids=input_ids, position_ids=positions, **cache_options)
        finally:  # the layers keep no tensor of this call (an export's traced ones would break deepcopy, pickling)
            for layer, (keys, values, length, device) in zip(layers, idle, strict=True):
                layer.keys, layer.values, layer.cumulative_length, layer.device = keys, values, length, device
        return output.logits if self.cache_form == "buffers" else (output.logits, *state)

    def next_inputs(self, inputs: tuple[torch.Tensor, ...], outputs: Any) -> tuple[torch.Tensor, ...]:
        """The next step's inputs after a step with `inputs` returned `outputs` (the logits first, flattened or
        not): the most likely token, the next position and, with `cache="inputs"`, the updated cache. What
        `devcopy run --steps N` feeds a model to decode N tokens; past the cache's end is a ValueError."""
        flat = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        position = inputs[1] + 1
        if int(position[0]) >= self.max_cache_len:
            raise ValueError(
                f"position {int(position[0])} is past the cache's {self.max_cache_len} positions; "
                "decode fewer steps or build the step with a larger max_cache_len"
            )
        token = flat[0][:, -1].argmax(-1, keepdim=True)
        cache = () if self.cache_form == "buffers" else tuple(flat[1:])
        return (token, position, *cache)


def _decode_step(cache: str, max_cache_len: int, prompt_len: int) -> Sample:
    """A Llama decode step whose cache holds `prompt_len` random tokens; inputs: the next token and its position."""
    if not 0 <= prompt_len < max_cache_len:
        raise ValueError(
            f"prompt_len={prompt_len} leaves no room in a cache of max_cache_len={max_cache_len}; give "
            f"0 <= prompt_len < max_cache_len."
        )
    transformers = require("transformers", "llama_decode_step")
    config = transformers.LlamaConfig(
        use_cache=True, attn_implementation="eager", num_key_value_heads=2, **TINY_DECODER
    )
    model = transformers.LlamaForCausalLM(config).eval()
    # inference: frozen parameters (ExecuTorch's to_executorch refuses an in-place cache write behind weights that
    # require grad: "a leaf Variable that requires grad is being used in an in-place operation")
    step = LlamaDecodeStep(model, max_cache_len, cache).eval().requires_grad_(False)
    tokens = torch.randint(0, model.config.vocab_size, (1, prompt_len + 1))
    state = () if cache == "buffers" else step.empty_cache()
    with torch.no_grad():
        for position in range(prompt_len):  # the prompt, one token at a time: fills the cache's first positions
            result = step(tokens[:, position : position + 1], torch.tensor([position]), *state)
            state = () if cache == "buffers" else tuple(result[1:])
    return step, (tokens[:, prompt_len:], torch.tensor([prompt_len]), *state)


@seeded
def llama_decode_step(max_cache_len: int = 128, prompt_len: int = 16) -> Sample:
    """`llama_tiny` decoding one token with a KV cache held in registered buffers, updated in place (`index_copy_`):
    logits for the next token; the cache (2 layers x keys, values: 16 KiB each) stays in the program."""
    return _decode_step("buffers", max_cache_len, prompt_len)


@seeded
def llama_decode_step_functional(max_cache_len: int = 128, prompt_len: int = 16) -> Sample:
    """`llama_tiny` decoding one token with its KV cache as inputs and outputs: logits and the updated cache."""
    return _decode_step("inputs", max_cache_len, prompt_len)


DECODE_MODELS: dict[str, Callable[..., Sample]] = {
    f.__name__: f for f in (llama_decode_step, llama_decode_step_functional)
}
