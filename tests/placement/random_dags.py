"""Random test inputs: a hypothesis strategy for small DAG modules over add/mul/sin/mm/relu/cos and 2-3 square
inputs, and tensors of random bit patterns (negatives, NaN, infinities, -0.0, subnormals) for copies."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st
from torch import nn

BINARY = {"add": torch.add, "mul": torch.mul, "mm": torch.mm}
UNARY = {"sin": torch.sin, "cos": torch.cos, "relu": torch.relu}
OVERLOADS = {
    "add": "add.Tensor",
    "mul": "mul.Tensor",
    "mm": "mm.default",
    "sin": "sin.default",
    "cos": "cos.default",
    "relu": "relu.default",
}


class RandomDag(nn.Module):
    """Values 0..n_inputs-1 are the inputs; step i appends op(values[a], values[b]); returns the chosen values."""

    def __init__(self, n_inputs: int, steps: list[tuple[str, int, int]], outputs: list[int]):
        super().__init__()
        self.n_inputs, self.steps, self.outputs = n_inputs, steps, outputs

    def forward(self, *inputs):
        values = list(inputs)
        for op, a, b in self.steps:
            values.append(BINARY[op](values[a], values[b]) if op in BINARY else UNARY[op](values[a]))
        return tuple(values[i] for i in self.outputs)

    def __repr__(self) -> str:
        return f"RandomDag({self.n_inputs}, {self.steps}, {self.outputs})"


@st.composite
def random_dags(draw, ops=tuple(OVERLOADS)):
    """(module, example_inputs): every step reads earlier values; outputs are the last step and maybe another."""
    n_inputs = draw(st.integers(2, 3))
    steps = []
    for _ in range(draw(st.integers(1, 7))):
        available = n_inputs + len(steps)
        steps.append(
            (draw(st.sampled_from(ops)), draw(st.integers(0, available - 1)), draw(st.integers(0, available - 1)))
        )
    last = n_inputs + len(steps) - 1
    extra = draw(st.integers(n_inputs, last))
    outputs = sorted({last, extra})
    torch.manual_seed(0)
    return RandomDag(n_inputs, steps, outputs), tuple(torch.randn(3, 3) for _ in range(n_inputs))


# Values every float copy must carry bit for bit; random bits rarely hit them, so a few are written in on purpose.
SPECIAL_FLOATS = (-0.0, float("nan"), float("inf"), float("-inf"), -1.5)
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def random_bits(dtype: torch.dtype, shape, seed: int) -> torch.Tensor:
    """A tensor of `dtype` and `shape` whose bytes are random (bool: random 0/1), with SPECIAL_FLOATS written into
    its first elements for floating dtypes."""
    rng = np.random.default_rng(seed)
    numel = int(np.prod(shape, dtype=np.int64))
    if dtype is torch.bool:
        return torch.from_numpy(rng.integers(0, 2, numel).astype(bool)).reshape(shape)
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    raw = torch.from_numpy(rng.integers(0, 256, numel * dtype.itemsize, dtype=np.uint8))
    tensor = raw.view(dtype).reshape(shape).clone()
    if dtype.is_floating_point and numel:
        flat = tensor.view(-1)
        specials = torch.tensor(SPECIAL_FLOATS[:numel], dtype=dtype)
        flat[: len(specials)] = specials
    return tensor


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal dtype, shape and bytes (NaN payloads and the sign of zero included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype is torch.bool:
        return torch.equal(a, b)
    bits = _BITS[a.dtype.itemsize]
    return torch.equal(a.contiguous().view(bits), b.contiguous().view(bits))
