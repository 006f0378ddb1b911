"""The control-flow programs the tests share (on pytest's pythonpath): torch.cond, control_flow.map, torch.scan
and a nested cond, each with example inputs and the construct a message names; and two ExecuTorch refuses."""

from __future__ import annotations

import torch
from functorch.experimental.control_flow import map as control_flow_map
from torch._higher_order_ops.scan import scan


class Cond(torch.nn.Module):
    def forward(self, x, y):
        z = x + y
        return torch.cond(z.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (z,)) * y


class CondThenAdd(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,)) + x


class Map(torch.nn.Module):
    def forward(self, xs, y):
        return control_flow_map(lambda x, y: x.sin() + y, xs.cos(), y) * y


class ScanTanh(torch.nn.Module):
    """A tanh recurrence: the carry is the hidden state, each step's output its relu."""

    def forward(self, xs, h):
        def step(carry, x):
            nxt = torch.tanh(carry + x)
            return nxt, nxt.relu()

        last, ys = scan(step, h, xs * h)
        return last + h, ys.relu()


class NestedCond(torch.nn.Module):
    """A cond inside a cond's branch: jumps inside a jumped-over chain."""

    def forward(self, x):
        def outer_true(a):
            return torch.cond(a.mean() > 0.5, lambda b: b * 2, lambda b: b - 1, (a,))

        return torch.cond(x.sum() > 0, outer_true, lambda a: a.cos(), (x,)) + x


class MapTwoInputs(torch.nn.Module):
    def forward(self, xs, ws):
        return control_flow_map(lambda pair: pair[0] * pair[1], (xs, ws)) + 1  # map over a pair: two mapped inputs


class WhileLoop(torch.nn.Module):
    def forward(self, x):
        _, out = torch._higher_order_ops.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + 1.0), (0, x))
        return out * 2


PLACED = {
    "cond": (Cond(), (torch.randn(4), torch.randn(4)), "torch.cond"),
    "cond_then_add": (CondThenAdd(), (torch.randn(4),), "torch.cond"),
    "map": (Map(), (torch.randn(3, 4), torch.randn(4)), "control_flow.map"),
    "scan": (ScanTanh(), (torch.randn(5, 4), torch.randn(4)), "torch.scan"),
    "nested_cond": (NestedCond(), (torch.randn(4),), "torch.cond"),
}
