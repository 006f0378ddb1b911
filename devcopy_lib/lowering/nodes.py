"""What a node of a lowered or placed graph is: its kind, its device, whether it is a device copy."""

from __future__ import annotations

import operator

import torch
from torch import fx

from ..devices import CPU, Device
from ..names import Direction
from ..ops import aot  # noqa: F401 - defines torch.ops.et_copy (import for its side effect)
from .delegate import delegate_of

H2D, D2H, D2D = aot.h2d_copy.default, aot.d2h_copy.default, aot.d2d_copy.default
COPY_KINDS = {H2D: Direction.H2D, D2H: Direction.D2H, D2D: Direction.D2D}


def is_h2d(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is H2D


def is_d2h(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is D2H


def is_d2d(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is D2D


def device_of(node: fx.Node) -> Device:
    """The node's `meta["device"]`; CPU before placement."""
    device = node.meta.get("device", CPU)
    if not isinstance(device, Device):
        raise TypeError(f"node {node.name!r} has meta['device'] {device!r}, not a Device")
    return device


def node_arg(node: fx.Node, index: int = 0) -> fx.Node:
    """`node.args[index]` where it must be a node: a copy's source, a getitem's container."""
    arg = node.args[index]
    if not isinstance(arg, fx.Node):
        raise TypeError(f"argument {index} of node {node.name!r} is {arg!r}, not a node")
    return arg


def call_device(node: fx.Node) -> Device | None:
    """The device a delegate call runs on; None for a non-delegate or a delegate without a (non-CPU) device."""
    delegate = delegate_of(node)
    device = delegate.target_device if delegate is not None else None
    return None if device is None or device.is_cpu else device


def node_kind(node: fx.Node) -> str:
    """`input`, `output`, `cpu_op`, `delegate`, `getitem` or a copy's direction; a constant (`get_attr`) counts as
    an input, loaded once."""
    if node.op in ("placeholder", "get_attr"):
        return "input"
    if node.op == "output":
        return "output"
    if delegate_of(node) is not None:
        return "delegate"
    if node.op == "call_function" and node.target is operator.getitem:  # of a delegate call or a multi-output op
        return "getitem"
    if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
        return COPY_KINDS.get(node.target, "cpu_op")
    return "cpu_op"
