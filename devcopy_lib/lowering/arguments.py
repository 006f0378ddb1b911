"""Argument checks at the library's public entry points (export, lower, place, emit): a value of the wrong type is
refused with devcopy's `usage` kind, naming the argument, what it got and what to pass, before any work
(docs/reliability.md, "Constructors and loaders")."""

from __future__ import annotations

from typing import Any

import torch

from ..errors import InvalidArgumentTypeError


def expect(value: Any, types: type | tuple[type, ...], argument: str, fix: str) -> None:
    """Refuse `value` unless it is one of `types`; `fix` says what to pass instead."""
    if not isinstance(value, types):
        wanted = " or ".join(t.__name__ for t in (types if isinstance(types, tuple) else (types,)))
        raise InvalidArgumentTypeError(
            f"{argument} must be of type {wanted}, got {type(value).__name__} {value!r:.60}; {fix}"
        )


def expect_inputs(example_inputs: Any) -> None:
    """Example inputs are one tensor or a tuple/list of them (a string or a number is a mistake, not an input)."""
    expect(
        example_inputs,
        (torch.Tensor, tuple, list),
        "example_inputs",
        "pass the forward's arguments as a tuple, e.g. (torch.randn(2, 4),), or one tensor",
    )


def expect_ops(delegate_ops: Any) -> None:
    """Delegate ops are None (the default set) or a list/tuple of overload names; one bare string is refused, since
    it would be read letter by letter."""
    if delegate_ops is None:
        return
    expect(delegate_ops, (list, tuple, set, frozenset), "delegate_ops", "pass a list such as ['add.Tensor']")
    for op in delegate_ops:
        expect(op, str, "each of delegate_ops", "name ops as strings such as 'add.Tensor'")
