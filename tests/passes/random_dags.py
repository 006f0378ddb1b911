"""A hypothesis strategy for small random DAG modules over add/mul/sin/mm/relu/cos and 2-3 square inputs."""
from __future__ import annotations

import torch
from hypothesis import strategies as st
from torch import nn

BINARY = {"add": torch.add, "mul": torch.mul, "mm": torch.mm}
UNARY = {"sin": torch.sin, "cos": torch.cos, "relu": torch.relu}
OVERLOADS = {"add": "add.Tensor", "mul": "mul.Tensor", "mm": "mm.default", "sin": "sin.default",
             "cos": "cos.default", "relu": "relu.default"}


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
        steps.append((draw(st.sampled_from(ops)), draw(st.integers(0, available - 1)),
                      draw(st.integers(0, available - 1))))
    last = n_inputs + len(steps) - 1
    extra = draw(st.integers(n_inputs, last))
    outputs = sorted({last, extra})
    torch.manual_seed(0)
    return RandomDag(n_inputs, steps, outputs), tuple(torch.randn(3, 3) for _ in range(n_inputs))
