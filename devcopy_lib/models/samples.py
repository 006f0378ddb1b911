"""Sample models for notebooks, docs and tests: each a no-argument factory returning `(module, example_inputs)`.

Each delegates at least one op of `DEFAULT_DELEGATE_OPS` and shows one placement situation; tensors are small and
every factory seeds torch, so parameters and inputs are the same on every call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

# What a model factory returns: (module, example_inputs)
Sample = tuple[nn.Module, tuple[Any, ...]]


def seeded(factory: Callable[..., Sample]) -> Callable[..., Sample]:
    """Run a factory under torch.manual_seed(0) so its weights and inputs are deterministic."""

    def build(**options: Any) -> Sample:
        torch.manual_seed(0)
        return factory(**options)

    build.__name__, build.__doc__ = factory.__name__, factory.__doc__
    return build


class _Add(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))  # type: ignore[no-any-return]  # torch types Module.__call__ -> Any


class _Residual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.fc(x))


class _SharedInput(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        t = a + b
        u = t + a
        w = t + b
        return u + w


class _BackToBack(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a + b) + c


class _CpuBetween(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        t = torch.sin(a + b)
        return torch.cumsum(t, 0) * b


class _OutputAndCpuUser(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = a + b
        return t, torch.cumsum(t, 0)


class _TransformerBlock(nn.Module):
    def __init__(self, dim: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ff1, self.ff2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (t.reshape(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        attn = torch.softmax(q @ k.transpose(-2, -1) / (dim // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(batch, seq, dim))
        return x + self.ff2(torch.relu(self.ff1(self.norm2(x))))  # type: ignore[no-any-return]  # Module.__call__ -> Any


@seeded
def add() -> Sample:
    """`a + b`: one delegate, two H2D, one D2H."""
    return _Add(), (torch.randn(4, 4), torch.randn(4, 4))


@seeded
def mlp() -> Sample:
    """Linear-ReLU-Linear: one delegate owning the weights (no H2D for parameters)."""
    return _Mlp(), (torch.randn(2, 8),)


@seeded
def residual() -> Sample:
    """`x + relu(linear(x))`: the input feeds the delegate once although two ops read it."""
    return _Residual(), (torch.randn(2, 8),)


@seeded
def shared_input() -> Sample:
    """`t=a+b; u=t+a; w=t+b; u+w`: one delegate; per node, four delegates sharing inputs (dedupe's case)."""
    return _SharedInput(), (torch.randn(4, 4), torch.randn(4, 4))


@seeded
def back_to_back() -> Sample:
    """`(a + b) + c`: per node, two delegates on one device whose round trip is elided."""
    return _BackToBack(), (torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4))


@seeded
def cpu_between() -> Sample:
    """A CPU op (cumsum) between two delegated regions: D2H then H2D again."""
    return _CpuBetween(), (torch.randn(4, 4), torch.randn(4, 4))


@seeded
def output_and_cpu_user() -> Sample:
    """A delegate output that is both a graph output and read by a CPU op: its D2H stays even with skip-D2H."""
    return _OutputAndCpuUser(), (torch.randn(4, 4), torch.randn(4, 4))


@seeded
def transformer_block() -> Sample:
    """A pre-norm attention + feed-forward block: layer norms and views on CPU, matmuls and softmax delegated."""
    return _TransformerBlock(), (torch.randn(1, 4, 16),)


MODELS: dict[str, Callable[[], Sample]] = {
    f.__name__: f
    for f in (add, mlp, residual, shared_input, back_to_back, cpu_between, output_and_cpu_user, transformer_block)
}
