"""ATen overload names (`add.Tensor`) for graph nodes, and their validation against the ops torch knows."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable

import torch

from ..ops.schema import ATEN_NAMESPACE


def overload_name(target: object) -> str | None:
    """`add.Tensor` for `torch.ops.aten.add.Tensor`, `ns::op.overload` outside aten, None for non-op targets."""
    if not isinstance(target, torch._ops.OpOverload):
        return None
    namespace = target.namespace
    name = f"{target._opname}.{target._overloadname}"
    return name if namespace == ATEN_NAMESPACE else f"{namespace}::{name}"


@functools.lru_cache(maxsize=1)
def all_aten_overloads() -> tuple[str, ...]:
    """Every `op.overload` name under torch.ops.aten (cached: listing them takes a moment)."""
    names: list[str] = []
    for op in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, op, None)
        if isinstance(packet, torch._ops.OpOverloadPacket):
            overloads = packet.overloads()  # type: ignore[no-untyped-call]  # unannotated in torch
            names.extend(f"{op}.{overload}" for overload in overloads)
    return tuple(sorted(names))


def _is_aten_overload(name: str) -> bool:
    op, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, op, None) if op and overload else None
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    return overload in packet.overloads()  # type: ignore[no-untyped-call]  # unannotated in torch


def validate_overloads(names: Iterable[str], what: str = "delegate op") -> tuple[str, ...]:
    """Return the names, de-duplicated in order; raise ValueError naming an unknown one and its close matches."""
    names = tuple(dict.fromkeys(n.strip() for n in names))
    for name in names:
        if not _is_aten_overload(name):
            close = difflib.get_close_matches(name, all_aten_overloads(), n=5, cutoff=0.6)
            hint = f" Close matches: {', '.join(close)}." if close else ""
            raise ValueError(
                f"Unknown {what} {name!r}: not an ATen overload.{hint} Write ops as 'name.overload' "
                f"(e.g. 'add.Tensor', 'mm.default'), as they appear after run_decompositions()."
            )
    return names
