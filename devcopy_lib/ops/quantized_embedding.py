"""The quantized embedding out variants of ops/quantized.yaml (`embedding_byte`, `embedding_2bit`, `embedding_4bit`,
each `.out` and `.dtype_out`): look rows up in a weight quantized per row or per group of a row, dequantize them.

What a program reaches them through: ExecuTorch's Llama embedding quantization (`EmbeddingQuantHandler`, whose
`QuantizedGroupEmbedding` calls `embedding_*.dtype`) or its QuantFusionPass. ExecuTorch defines these ops in Python
(`executorch.exir.passes._quant_patterns_and_replacements`, functional and out variants alike), not in its quantized
AOT lib; so devcopy never defines them in torch (ExecuTorch's later definition would fail on a duplicate): a program
holding them has imported ExecuTorch's definitions already, and the runtime's kernels here need no torch op.

The arithmetic is the eager op's, element for element (rows gathered first, then `weight - zero_point` times `scale`
per group, in the scales' dtype, cast to the out dtype), so outputs equal eager exactly. The argument checks are
those of ExecuTorch's kernels (kernels/quantized/cpu/op_embedding*.cpp); each failure is a ValueError naming the
argument, what it holds and the fix, raised before `out` is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# op base name -> bits per stored weight value (8: one value per byte, not packed)
BITS = {"embedding_byte": 8, "embedding_2bit": 2, "embedding_4bit": 4}
# the offset a packed value is stored with (unsigned in the byte, signed once the offset is taken off)
_PACKED_OFFSET = {2: 2, 4: 8}
_FLOATS = (torch.float32, torch.float16)  # the params and out dtypes ExecuTorch's embedding kernels switch over
# ExecuTorch's ScalarType codes of the float dtypes: how a `ScalarType? dtype` arrives from a .pte
_SCALAR_TYPES = {5: torch.float16, 6: torch.float32, 7: torch.float64, 15: torch.bfloat16}


def _fail(op: str, problem: str, fix: str) -> ValueError:
    """The kernel's failure (the runtime names the op and the instruction around it)."""
    del op
    return ValueError(f"{problem}. {fix}")


def _dtype(value: torch.dtype | int | None) -> torch.dtype | None:
    """A `ScalarType?` as torch names it: a .pte holds ExecuTorch's code (6), a traced call a torch.dtype."""
    if value is None or isinstance(value, torch.dtype):
        return value
    if value not in _SCALAR_TYPES:
        raise ValueError(f"dtype {value} is not a float ScalarType code ({sorted(_SCALAR_TYPES)}). Pass float32 (6)")
    return _SCALAR_TYPES[value]


def _check_weight(op: str, weight: torch.Tensor, bits: int) -> None:
    if weight.dim() != 2:
        raise _fail(op, f"weight must be 2-D (rows, packed columns) but has sizes {list(weight.shape)}", "Pass the "
                    "quantized embedding table itself")  # fmt: skip
    allowed = (torch.uint8, torch.int8) if bits == 8 else (torch.uint8,)
    if weight.dtype not in allowed:
        raise _fail(op, f"weight has dtype {weight.dtype}", f"Store it as {' or '.join(map(str, allowed))}")


def _check_params(op: str, weight: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor | None) -> None:
    if scales.dim() not in (1, 2) or scales.shape[0] != weight.shape[0]:
        raise _fail(
            op,
            f"weight_scales has sizes {list(scales.shape)} for a weight of {weight.shape[0]} rows",
            f"Give one scale per row ([{weight.shape[0]}]) or per group of a row ([{weight.shape[0]}, groups])",
        )
    if scales.dtype not in _FLOATS:
        raise _fail(op, f"weight_scales has dtype {scales.dtype}", "ExecuTorch's kernel takes float32 or float16 "
                    "scales: cast them")  # fmt: skip
    if zero_points is None:
        return
    if zero_points.shape != scales.shape or zero_points.dtype != scales.dtype:
        raise _fail(
            op,
            f"weight_zero_points ({list(zero_points.shape)}, {zero_points.dtype}) differ from weight_scales "
            f"({list(scales.shape)}, {scales.dtype})",
            "Give one zero point per scale, in the scales' dtype, or None",
        )


def _check_call(op: str, args: tuple[Any, ...], dim: int, out_dtype: torch.dtype, out: torch.Tensor) -> None:
    weight, scales, zero_points, quant_min, quant_max, indices = args
    groups = scales.shape[1] if scales.dim() == 2 else 1
    if dim % groups:
        raise _fail(op, f"{groups} groups do not divide the embedding dim {dim}", "Use a group count dividing it")
    if zero_points is not None and zero_points.dtype != out_dtype:
        raise _fail(op, f"weight_zero_points have dtype {zero_points.dtype} but the output is {out_dtype}", "Give "
                    "them in the output dtype")  # fmt: skip
    if indices.dtype != torch.int64:
        raise _fail(op, f"indices have dtype {indices.dtype}", "Pass int64 (torch.long) indices")
    if quant_min > quant_max:
        raise _fail(op, f"weight_quant_min {quant_min} is greater than weight_quant_max {quant_max}", "Swap them")
    if out.dtype != out_dtype or out_dtype not in _FLOATS:
        raise _fail(op, f"out has dtype {out.dtype} for an output of dtype {out_dtype}", "ExecuTorch's kernel "
                    "writes float32 or float16 only: give out (and dtype) one of them, the same")  # fmt: skip
    if indices.numel():
        low, high = int(indices.min()), int(indices.max())
        if low < 0 or high >= weight.shape[0]:
            bad = low if low < 0 else high
            raise _fail(op, f"index {bad} is out of range for a weight of {weight.shape[0]} rows", f"Indices must "
                        f"lie in [0, {weight.shape[0]})")  # fmt: skip


def unpack(weight: torch.Tensor, bits: int) -> torch.Tensor:
    """The signed values of a packed weight, in their columns: 4-bit high nibble first, 2-bit lowest pair first (as
    ExecuTorch's packing stores them); an 8-bit weight as it is."""
    if bits == 8:
        return weight
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    values = torch.stack(
        [(weight >> (bits * (per_byte - 1 - k) if bits == 4 else bits * k)) & mask for k in range(per_byte)], dim=-1
    )
    return values.view(weight.shape[0], -1).view(torch.int8).sub(_PACKED_OFFSET[bits])


def embedding(
    op: str,
    weight: torch.Tensor,
    scales: torch.Tensor,
    zero_points: torch.Tensor | None,
    quant_min: int,
    quant_max: int,
    indices: torch.Tensor,
    dtype: torch.dtype | int | None,
    out: torch.Tensor,
) -> torch.Tensor:
    """Quantized embedding `op` (`quantized_decomposed::embedding_4bit.dtype_out`) into `out`: checked, then the
    rows of `indices` dequantized. `dtype` None: the scales' dtype (`.out`, and `.dtype_out` given none)."""
    bits = BITS[op.partition("::")[2].partition(".")[0]]
    _check_weight(op, weight, bits)
    _check_params(op, weight, scales, zero_points)
    dtype = _dtype(dtype)
    out_dtype = scales.dtype if dtype is None else dtype
    dim = weight.shape[1] * (8 // bits)
    _check_call(op, (weight, scales, zero_points, quant_min, quant_max, indices), dim, out_dtype, out)
    groups = scales.shape[1] if scales.dim() == 2 else 1
    flat = indices.reshape(-1)
    rows = unpack(weight.index_select(0, flat), bits).reshape(-1, dim // groups)
    zero = (
        torch.zeros([], dtype=torch.int32) if zero_points is None else zero_points.index_select(0, flat).reshape(-1, 1)
    )
    result = rows.sub(zero).mul(scales.index_select(0, flat).reshape(-1, 1)).reshape(*indices.shape, dim)
    if out.shape != result.shape:
        out.resize_(result.shape)  # as an ATen out kernel does (a STATIC out resized is refused by the caller)
    return out.copy_(result.to(out_dtype))


def meaning(name: str) -> Callable[..., Any]:
    """Out variant `name`'s call with ops/quantized.yaml's arguments, outs by name (the form the kernels take)."""

    def call(*args: Any, out: torch.Tensor, dtype: torch.dtype | int | None = None) -> torch.Tensor:
        weight, scales, zero_points, quant_min, quant_max, indices, *extra = args
        if extra:  # the 2-/4-bit dtype_out take dtype positionally (ExecuTorch's YAML)
            (dtype,) = extra
        return embedding(name, weight, scales, zero_points, quant_min, quant_max, indices, dtype, out)

    return call
