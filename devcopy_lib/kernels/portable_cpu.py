"""Portable CPU kernels and ATen-mode native kernels, both computed by PyTorch's own `torch.ops.aten` kernels.

`boxed_aten_kernel(name, schema, portable=...)` builds a boxed kernel (see runtime/operator_registry.py) for an ATen op:
- portable: PortableTensors become zero-copy host views; a DYNAMIC out is handed over empty so PyTorch resizes it
  within the planned capacity (no copy, no resize warning), and the PortableTensor takes the sizes PyTorch chose;
  any failure (a device tensor, a size beyond capacity, a PyTorch error) is recorded on the context.
- ATen mode: torch.Tensors pass straight through and errors raise.
Both follow kernels/prepared.py: `prepare` binds the torch callable to its arguments (and the views, when no size can
change) once; a loaded method runs the bound call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from types import SimpleNamespace
from typing import Any

import torch
from torchgen.model import FunctionSchema

from ..devices.errors import DeviceMemoryAccessError
from ..tensors.error import Error
from ..tensors.tensor import PortableTensor, TensorShapeDynamism
from .prepared import KernelFailure, Prepare, PreparedKernel, Run

_TORCH_FAILURES = (DeviceMemoryAccessError, RuntimeError, ValueError, TypeError, IndexError)


def aten_overload(name: str) -> torch._ops.OpOverload:
    """`aten::add.out` -> torch.ops.aten.add.out (`aten::relu` -> .default)."""
    namespace, _, op = name.partition("::")
    base, _, overload = op.partition(".")
    found: torch._ops.OpOverload = getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")
    return found


def split_arguments(schema: FunctionSchema, args: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """Boxed args (schema order, outs last) -> positional list and keyword dict for a torch op call."""
    arguments = schema.arguments
    n_positional = len(arguments.flat_positional)
    names = [a.name for a in arguments.flat_kwarg_only] + [a.name for a in arguments.out]
    if len(args) != n_positional + len(names):
        raise TypeError(
            f"{schema.name}: expected {n_positional + len(names)} boxed args in schema order "
            f"({', '.join(a.name for a in arguments.flat_all)}), got {len(args)}"
        )
    return list(args[:n_positional]), dict(zip(names, args[n_positional:], strict=True))


def host_args(value: Any) -> Any:
    """A portable argument as torch computes on it: PortableTensors (also in lists) become zero-copy host views."""
    if isinstance(value, PortableTensor):
        return value.host_view()
    if isinstance(value, (list, tuple)):
        return type(value)(host_args(v) for v in value)
    return value


def _out_view(out: PortableTensor | list[Any]) -> torch.Tensor | list[Any]:
    if isinstance(out, list):  # a `Tensor(a!)[] out` (split_with_sizes_copy.out): one view per item
        return [_out_view(item) for item in out]
    view = out.host_view()
    return (
        view
        if out.dynamism is TensorShapeDynamism.STATIC
        else view.new_empty(0).set_(view.untyped_storage(), 0, (0,), (1,))
    )


def _flat(items: list[Any]) -> list[Any]:
    """Arguments (or outs) with tensor lists expanded, in order."""
    return [leaf for item in items for leaf in (item if isinstance(item, (list, tuple)) else [item])]


def _adopt_sizes(out: PortableTensor, view: torch.Tensor) -> str:
    """Take the sizes PyTorch gave `view`; a problem message if the result does not fit `out` (a stride counts only
    where its dimension has more than one element, as in PyTorch's own contiguity rules)."""
    problem = out.resize_problem(view.shape)
    if problem:
        return problem
    out.resize(view.shape)
    if any(
        size > 1 and wrote != needs for size, wrote, needs in zip(view.shape, view.stride(), out.strides, strict=True)
    ):
        return f"PyTorch wrote strides {tuple(view.stride())}, out's dim order needs {out.strides}"
    return ""


def _prepared_views(args: list[Any]) -> bool:
    """Whether a call's host views can be built once: every tensor is a STATIC PortableTensor on CPU."""
    return all(
        value.is_cpu and value.dynamism is TensorShapeDynamism.STATIC
        for value in _flat(args)
        if isinstance(value, PortableTensor)
    )


def _static_run(
    name: str,
    call: Any,
    positional: list[Any],
    keywords: dict[str, Any],
    outs: list[Any],
    views: list[Any],
    result: Any,
) -> Run:
    """One call on views built once; an out PyTorch resized is refused (a STATIC tensor keeps its sizes)."""
    checks = tuple((view, out.sizes, out) for out, view in zip(outs, views, strict=True))

    def run() -> Any:
        try:
            call(*positional, **keywords)
        except _TORCH_FAILURES as exc:
            raise KernelFailure(Error.InvalidArgument, f"{name}: {exc}") from exc
        for view, sizes, out in checks:
            if view.shape != sizes:
                raise KernelFailure(Error.InvalidArgument, f"{name}: out {out}: {_adopt_sizes(out, view)}")
        return result

    return run


def _dynamic_run(name: str, schema: FunctionSchema, call: Any, n_out: int, args: list[Any], result: Any) -> Any:
    """One call with views built now, so a DYNAMIC out takes the sizes PyTorch chooses."""
    outs = list(args[len(args) - n_out :])
    try:
        out_views = [_out_view(out) for out in outs]
        positional, keywords = split_arguments(schema, [host_args(a) for a in args[: len(args) - n_out]] + out_views)
        call(*positional, **keywords)
    except _TORCH_FAILURES as exc:
        raise KernelFailure(Error.InvalidArgument, f"{name}: {exc}") from exc
    for out, view in zip(_flat(outs), _flat(out_views), strict=True):
        problem = _adopt_sizes(out, view)
        if problem:
            raise KernelFailure(Error.InvalidArgument, f"{name}: out {out}: {problem}")
    return result


def _portable_prepare(name: str, schema: FunctionSchema, overload: Any, n_out: int) -> Prepare:
    """Portable: views built once when every tensor is a STATIC CPU one (sizes fixed), else per call so a DYNAMIC
    out takes the sizes PyTorch chooses; a failure is InvalidArgument naming the op."""
    call = overload._op  # the C++ callable OpOverload.__call__ forwards to

    def prepare(args: list[Any], dynamic: Collection[int]) -> Run:
        result = args[-1] if n_out == 1 else tuple(args[len(args) - n_out :])
        if _prepared_views(args):
            views = [host_args(a) for a in args]
            try:
                positional, keywords = split_arguments(schema, views)
            except TypeError as exc:
                raise KernelFailure(Error.InvalidArgument, f"{name}: {exc}") from exc
            first_out = len(args) - n_out
            outs, out_views = _flat(list(args[first_out:])), _flat(views[first_out:])
            return _static_run(name, call, positional, keywords, outs, out_views, result)
        return functools.partial(_dynamic_run, name, schema, call, n_out, args, result)

    return prepare


def _aten_prepare(schema: FunctionSchema, overload: Any, n_out: int) -> Prepare:
    """ATen mode: the torch callable bound to its arguments once; a dynamic out not read by the op is handed over
    empty, so PyTorch resizes it within its storage without warning; errors raise."""
    call = overload._op

    def run_shrinking(shrink: list[torch.Tensor], positional: list[Any], keywords: dict[str, Any]) -> Any:
        for tensor in shrink:
            tensor.resize_(0)
        return call(*positional, **keywords)

    def prepare(args: list[Any], dynamic: Collection[int]) -> Run:
        positional, keywords = split_arguments(schema, args)
        first_out = len(args) - n_out
        reads = args[:first_out]
        shrink = [
            args[i]
            for i in range(first_out, len(args))
            if i in dynamic and isinstance(args[i], torch.Tensor) and not any(args[i] is a for a in reads)
        ]
        if shrink:
            return functools.partial(run_shrinking, shrink, positional, keywords)
        return functools.partial(call, *positional, **keywords)

    return prepare


def boxed_aten_kernel(
    name: str, schema: FunctionSchema, *, portable: bool, call: Callable[..., Any] | None = None
) -> PreparedKernel:
    """A boxed kernel `(ctx, args) -> out` running ATen op `name` through torch.ops.aten, with its prepare step;
    `call`, when given, is what runs instead of the op's own torch callable (the same arguments, outs by name)."""
    overload = aten_overload(name) if call is None else SimpleNamespace(_op=call)
    n_out = len(schema.arguments.out)
    prepare = _portable_prepare(name, schema, overload, n_out) if portable else _aten_prepare(schema, overload, n_out)
    return PreparedKernel(prepare, portable=portable, n_out=n_out, name=name)
