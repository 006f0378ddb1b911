"""`quantized_decomposed::add.out` of ops/quantized.yaml: two quantized tensors added as dequantize -> float add ->
quantize, the way ExecuTorch's kernel computes it (kernels/quantized/cpu/op_add.cpp), rounding step for rounding step.

What a program reaches it through: ExecuTorch's QuantFusionPass, which fuses a dequantize, add, quantize chain into
`quantized_decomposed::add`; a user runs it on an edge program by hand (neither `to_executorch` nor devcopy runs it),
so it arrives in a .pte. torch has no functional `add` to call (ExecuTorch defines it without an implementation), so
this is devcopy's own arithmetic; the tests compare it with ExecuTorch's C++ kernel, which its AOT lib registers in
torch. Each argument check of that kernel is a ValueError naming the argument and the fix, raised before `out` is
written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_INTEGERS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)  # ExecuTorch's ET_FORALL_INT_TYPES


def _check(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, ranges: dict[str, tuple[int, int]]) -> None:
    if a.shape != b.shape or a.shape != out.shape or not a.dtype == b.dtype == out.dtype:
        raise ValueError(
            f"a ({list(a.shape)}, {a.dtype}), b ({list(b.shape)}, {b.dtype}) and out ({list(out.shape)}, {out.dtype}) "
            "differ. ExecuTorch's quantized add takes three tensors of one shape and dtype: broadcast or cast before"
        )
    if a.dtype not in _INTEGERS:
        raise ValueError(f"a has dtype {a.dtype}. Pass quantized (integer) tensors: {', '.join(map(str, _INTEGERS))}")
    for name, (low, high) in ranges.items():
        if not 0 <= low <= high <= 255:
            raise ValueError(
                f"{name}_quant_min {low} / {name}_quant_max {high} are not an ordered range within [0, 255]. "
                "ExecuTorch's quantized add takes unsigned 8-bit ranges only (quantize with quant_min >= 0)"
            )


def _dequantized(q: torch.Tensor, scale: float, zero_point: int) -> torch.Tensor:
    """(q - zero_point) * scale as the kernel does: the scale narrowed to float32, the product in double, then
    float32."""
    narrowed = torch.tensor(scale, dtype=torch.float32).to(torch.float64)
    return ((q.to(torch.int64) - zero_point).to(torch.float64) * narrowed).to(torch.float32)


def add_out(
    a: torch.Tensor,
    a_scale: float,
    a_zero_point: int,
    a_quant_min: int,
    a_quant_max: int,
    b: torch.Tensor,
    b_scale: float,
    b_zero_point: int,
    b_quant_min: int,
    b_quant_max: int,
    out_scale: float,
    out_zero_point: int,
    out_quant_min: int,
    out_quant_max: int,
    *,
    out: torch.Tensor,
) -> torch.Tensor:
    """ExecuTorch's quantized add into `out`: checked, then dequantize a and b, add in float32, quantize with
    round-half-to-even of `value * (1 / out_scale)` (float32), the zero point added and clamped to the out range."""
    ranges = {"a": (a_quant_min, a_quant_max), "b": (b_quant_min, b_quant_max), "out": (out_quant_min, out_quant_max)}
    _check(a, b, out, ranges)
    total = _dequantized(a, a_scale, a_zero_point) + _dequantized(b, b_scale, b_zero_point)
    inverse = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(out_scale, dtype=torch.float32)
    q = (torch.round(total * inverse) + torch.tensor(out_zero_point, dtype=torch.float32)).to(torch.int64)
    return out.copy_(q.clamp(out_quant_min, out_quant_max).to(out.dtype))


def meaning(name: str) -> Callable[..., Any]:
    """`add.out`'s call with ops/quantized.yaml's arguments, out by name."""
    del name
    return add_out
