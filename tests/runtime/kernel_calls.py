"""One boxed call of a lib's kernel in either mode, as a test sees it: what `out` holds afterwards, the failure
state and the message (ATen mode raises where portable mode records the failure on the context)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor


def call_kernel(
    kernel: Callable[..., Any], mode: str, args: list, out: torch.Tensor
) -> tuple[torch.Tensor, Error, str]:
    """`kernel` on boxed `args` + `out` in `mode`: (out afterwards, failure state, message)."""
    if mode == "aten":
        try:
            kernel(KernelRuntimeContext(), [*args, out])
        except (ValueError, RuntimeError) as exc:
            return out, Error.InvalidArgument, str(exc)
        return out, Error.Ok, ""
    boxed = [PortableTensor.from_torch(a) if isinstance(a, torch.Tensor) else a for a in args]
    portable_out = PortableTensor.from_torch(out)
    ctx = KernelRuntimeContext()
    kernel(ctx, [*boxed, portable_out])
    return portable_out.host_view(), ctx.failure_state(), ctx.message or ""
