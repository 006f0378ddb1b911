"""ATen overload names (`add.Tensor`) for graph nodes, and their validation against the ops torch knows."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Iterable, Sequence

import torch

from ..errors import InvalidArgumentError
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


def _overloads_of(op: str) -> list[str]:
    """`op`'s ATen overloads, `.default` first (the one run_decompositions() leaves); [] when aten has no `op`."""
    packet = getattr(torch.ops.aten, op, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return []
    overloads = packet.overloads()  # type: ignore[no-untyped-call]  # unannotated in torch
    return sorted((f"{op}.{o}" for o in overloads), key=lambda n: not n.endswith(".default"))


def suggestions(name: str, used: Sequence[str] = ()) -> list[str]:
    """Overloads `name` may have meant: those of the model (`used`) with the same op or a close name first, marked,
    then the op's other overloads, then close names among all of aten's; at most five."""
    op, dot, _ = name.partition(".")
    mine = [u for u in used if u.partition(".")[0] == op] or difflib.get_close_matches(name, used, n=3, cutoff=0.6)
    same_op = _overloads_of(op)
    if dot and same_op:  # a wrong overload: the closest spelling first
        same_op = difflib.get_close_matches(name, same_op, n=len(same_op), cutoff=0)
    others = same_op + difflib.get_close_matches(name, all_aten_overloads(), n=5, cutoff=0.6)
    ordered = [f"{u} (used by the model)" for u in mine] + [o for o in dict.fromkeys(others) if o not in mine]
    return ordered[:5]


def validate_overloads(names: Iterable[str], what: str = "delegate op", used: Sequence[str] = ()) -> tuple[str, ...]:
    """Return the names, de-duplicated in order; raise InvalidArgumentError (a ValueError, kind usage) naming an
    unknown one and what it may have meant, the overloads the model uses (`used`, when known) first."""
    names = tuple(dict.fromkeys(n.strip() for n in names))
    for name in names:
        if not _is_aten_overload(name):
            close = suggestions(name, used)
            hint = f" Close matches: {', '.join(close)}." if close else ""
            raise InvalidArgumentError(
                f"Unknown {what} {name!r}: not an ATen overload.{hint} Write ops as 'name.overload' "
                f"(e.g. 'add.Tensor', 'mm.default'), as they appear after run_decompositions()."
            )
    return names
