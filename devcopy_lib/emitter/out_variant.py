"""Functional op -> its out variant, as ExecuTorch's out-variant step pairs them (docs/semantics.md §5b).

A view op first becomes its `_copy` variant (`view` -> `view_copy`), as in ExecuTorch's edge dialect; then the
out overload is the one of the same packet whose torchgen signature (out args and TensorOptions stripped) matches.
"""

from __future__ import annotations

import functools

import torch
from torchgen.model import FunctionSchema, SchemaKind

from ..ops import quantized as _quantized_ops  # noqa: F401 - the quantized out variants the emitter pairs with


def operator_name(op: torch._ops.OpOverload) -> str:
    """The runtime operator name: `aten::add.out`, `et_copy::_h2d_copy.out`."""
    schema = op._schema
    return f"{schema.name}.{schema.overload_name or 'default'}"


def _parse(op: torch._ops.OpOverload) -> FunctionSchema | None:
    try:
        return FunctionSchema.parse(str(op._schema))
    except Exception:  # schemas torchgen cannot parse (some prim ops) never pair with an out variant
        return None


def _copy_variant(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """`aten.view.default` -> `aten.view_copy.default`: a view returns an alias, its `_copy` variant a new tensor."""
    namespace, name = op._schema.name.split("::")
    overload = op._overloadname
    try:
        variant = getattr(getattr(getattr(torch.ops, namespace), f"{name}_copy"), overload)
    except (AttributeError, RuntimeError):
        variant = None
    if not isinstance(variant, torch._ops.OpOverload):
        raise NotImplementedError(
            f"View op {op} has no `{name}_copy.{overload}` variant, so it cannot be emitted as a copy. "
            "Decompose it before emitting, or keep it inside a delegate."
        )
    return variant


def _overload_names(packet: torch._ops.OpOverloadPacket) -> list[str]:
    """Every overload of `packet` torch knows now: a packet lists those defined when it was first used, and an out
    variant defined later (the quantized ones, ops/quantized.py) is found only in the dispatcher's own list."""
    schemas = torch._C._jit_get_schemas_for_operator(packet._qualified_op_name)
    return list(dict.fromkeys([*packet.overloads(), *(s.overload_name or "default" for s in schemas)]))  # type: ignore[no-untyped-call]


@functools.cache
def out_variant(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The out overload a runtime calls for functional `op` (views through their `_copy` variant)."""
    if any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns):
        op = _copy_variant(op)
    functional = _parse(op)
    if functional is not None and functional.kind() is SchemaKind.out:
        return op
    packet = op.overloadpacket
    for name in _overload_names(packet):
        candidate = getattr(packet, name)
        schema = _parse(candidate)
        if (
            isinstance(candidate, torch._ops.OpOverload)
            and schema is not None
            and functional is not None
            and schema.kind() is SchemaKind.out
            and schema.signature() == functional.signature()
        ):
            return candidate
    raise NotImplementedError(
        f"{op} has no out variant: none of {packet}'s overloads {sorted(_overload_names(packet))} takes the same "
        "arguments plus `out`. The runtime calls only out variants; decompose the op or delegate it."
    )
