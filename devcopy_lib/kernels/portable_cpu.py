"""Portable CPU kernels and ATen-mode native kernels, both computed by PyTorch's own `torch.ops.aten` kernels.

`boxed_aten_kernel(name, schema, portable=...)` builds a boxed kernel (see runtime/registry.py) for an ATen op:
- portable: PortableTensors become zero-copy host views; a DYNAMIC out is handed over empty so PyTorch resizes it
  within the planned capacity (no copy, no resize warning), and the PortableTensor takes the sizes PyTorch chose;
  any failure (a device tensor, a size beyond capacity, a PyTorch error) is recorded on the context.
- ATen mode: torch.Tensors pass straight through and errors raise.
"""

from __future__ import annotations

from typing import Any

import torch
from torchgen.model import FunctionSchema

from ..devices.errors import DeviceMemoryAccessError
from ..tensors.context import KernelRuntimeContext
from ..tensors.error import Error
from ..tensors.tensor import PortableTensor, TensorShapeDynamism


def aten_overload(name: str):
    """`aten::add.out` -> torch.ops.aten.add.out (`aten::relu` -> .default)."""
    namespace, _, op = name.partition("::")
    base, _, overload = op.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")


def split_arguments(schema: FunctionSchema, args: list) -> tuple[list, dict]:
    """Boxed args (schema order, outs last) -> positional list and keyword dict for a torch op call."""
    arguments = schema.arguments
    n_positional = len(arguments.flat_positional)
    names = [a.name for a in arguments.flat_kwarg_only] + [a.name for a in arguments.out]
    if len(args) != n_positional + len(names):
        raise TypeError(
            f"{schema.name}: expected {n_positional + len(names)} boxed args in schema order "
            f"({', '.join(a.name for a in arguments.flat_all)}), got {len(args)}"
        )
    return list(args[:n_positional]), dict(zip(names, args[n_positional:]))


def host_args(value: Any) -> Any:
    """A portable argument as torch computes on it: PortableTensors (also in lists) become zero-copy host views."""
    if isinstance(value, PortableTensor):
        return value.host_view()
    if isinstance(value, (list, tuple)):
        return type(value)(host_args(v) for v in value)
    return value


def _out_view(out: PortableTensor | list) -> torch.Tensor | list:
    if isinstance(out, list):  # a `Tensor(a!)[] out` (split_with_sizes_copy.out): one view per item
        return [_out_view(item) for item in out]
    view = out.host_view()
    return (
        view if out.dynamism is TensorShapeDynamism.STATIC else view.new_empty(0).set_(view.untyped_storage(), 0, (0,))
    )


def _flat(items: list) -> list:
    """Out tensors with tensor-list outs expanded, in order."""
    return [leaf for item in items for leaf in (item if isinstance(item, list) else [item])]


def _adopt_sizes(out: PortableTensor, view: torch.Tensor) -> str:
    """Take the sizes PyTorch gave `view`; a problem message if the result does not fit `out` (a stride counts only
    where its dimension has more than one element, as in PyTorch's own contiguity rules)."""
    problem = out.resize_problem(view.shape)
    if problem:
        return problem
    out.resize(view.shape)
    if any(size > 1 and wrote != needs for size, wrote, needs in zip(view.shape, view.stride(), out.strides)):
        return f"PyTorch wrote strides {tuple(view.stride())}, out's dim order needs {out.strides}"
    return ""


def boxed_aten_kernel(name: str, schema: FunctionSchema, *, portable: bool):
    """A boxed kernel `(ctx, args) -> out` running ATen op `name` through torch.ops.aten."""
    overload = aten_overload(name)
    n_out = len(schema.arguments.out)

    def aten_mode(ctx: Any, args: list):
        positional, keywords = split_arguments(schema, args)
        return overload(*positional, **keywords)

    def portable_mode(ctx: KernelRuntimeContext, args: list):
        outs = list(args[len(args) - n_out :])
        result = outs[0] if n_out == 1 else tuple(outs)
        try:
            out_views = [_out_view(out) for out in outs]
            positional, keywords = split_arguments(
                schema, [host_args(a) for a in args[: len(args) - n_out]] + out_views
            )
            overload(*positional, **keywords)
        except (DeviceMemoryAccessError, RuntimeError, ValueError, TypeError, IndexError) as exc:
            ctx.fail(Error.InvalidArgument, f"{name}: {exc}")
            return result
        for out, view in zip(_flat(outs), _flat(out_views)):
            problem = _adopt_sizes(out, view)
            if problem:
                ctx.fail(Error.InvalidArgument, f"{name}: out {out}: {problem}")
        return result

    return portable_mode if portable else aten_mode
