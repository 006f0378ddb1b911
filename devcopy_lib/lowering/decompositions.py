"""The decomposition table ExecuTorch 1.5.1's `to_edge` lowers with, rebuilt from torch's own decompositions so that
devcopy decomposes exactly the ops ExecuTorch does without importing ExecuTorch (docs/semantics.md).

ExecuTorch starts from torch.export's default (core ATen) table, adds the decomposition of
`linalg_vector_norm.default` (a norm becomes `abs`/`pow`, `sum`, `pow`: ops a backend and the portable kernels have)
and keeps its quantization primitives whole. torch builds the default table from the ops registered when it is
asked, so devcopy asks for it at each export, as ExecuTorch does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._decomp import get_decompositions

# What ExecuTorch decomposes beyond torch.export's default table
EDGE_EXTRA_DECOMPOSITIONS = (torch.ops.aten.linalg_vector_norm.default,)
# Quantization primitives ExecuTorch never decomposes (a backend matches them whole), by qualified name: their
# namespaces exist only once torch.ao / torchao registers them
NEVER_DECOMPOSED = frozenset(
    {
        "quantized_decomposed.dequantize_per_channel.default",
        "quantized_decomposed.dequantize_per_tensor.default",
        "quantized_decomposed.dequantize_per_tensor.tensor",
        "quantized_decomposed.convert_element_type.no_fuse",
        "quantized_decomposed.quantize_per_tensor.default",
        "quantized_decomposed.quantize_per_tensor.tensor",
        "quantized_decomposed.quantize_per_channel.default",
        "quantized_decomposed.choose_qparams.tensor",
        "torchao.dequantize_affine.default",
        "torchao.quantize_affine.default",
        "torchao.choose_qparams_affine.default",
    }
)


def edge_decompositions() -> dict[torch._ops.OperatorBase, Callable[..., Any]]:
    """torch.export's default decompositions + ExecuTorch's additions - its never-decomposed primitives."""
    default: Any = torch.export.default_decompositions()  # a CustomDecompTable, untyped in torch
    table: dict[torch._ops.OperatorBase, Callable[..., Any]] = dict(default.items())
    table.update(get_decompositions(list(EDGE_EXTRA_DECOMPOSITIONS)))
    return {op: fn for op, fn in table.items() if str(op) not in NEVER_DECOMPOSED}
