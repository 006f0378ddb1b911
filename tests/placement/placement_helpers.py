"""Small models and graph readers shared by the placement tests."""

from __future__ import annotations

import torch
from torch import nn

from devcopy_lib.lowering.nodes import node_kind


class Fn(nn.Module):
    """A module whose forward is the given function (for one-line test models)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


class TransposedWeight(nn.Module):
    """`x @ w.t()` where only mm is delegated: the weight's transpose runs on the CPU and is copied every call."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(2, 2, generator=torch.Generator().manual_seed(0)))

    def forward(self, x):
        return torch.mm(x, self.w.t())


def inputs(n: int, shape=(2, 2)) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return tuple(torch.randn(*shape) for _ in range(n))


def kinds(gm) -> list[str]:
    """The kind of every node, in graph order."""
    return [node_kind(n) for n in gm.graph.nodes]


def nodes_of(gm, kind: str) -> list:
    return [n for n in gm.graph.nodes if node_kind(n) == kind]


def count(gm, kind: str) -> int:
    return len(nodes_of(gm, kind))
