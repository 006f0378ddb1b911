"""ExecuTorch's two dim-order copy ops, `dim_order_ops::_to_dim_order_copy.out` and
`dim_order_ops::_clone_dim_order.out`, as kernels of devcopy's portable lib (ops/functions.yaml) and of its ATen-mode
`native` lib (ops/edge_dialect_aten_op.yaml).

What a program reaches them through: `to_edge`'s MemoryFormatOpsPass rewrites `aten._to_copy` (a `.to(dtype)`, the
cast of a lifted Python scalar in `x + 1`) and `aten.clone` into them, naming the layout as a dim order rather than a
memory format. ExecuTorch defines them in Python (`executorch.exir.passes.dim_order_ops_registry`), so devcopy defines
no torch op for them (as for the quantized embedding ops): the kernels here need none.

Semantics, after ExecuTorch's kernels (kernels/portable/cpu/op__to_dim_order_copy.cpp, op__clone_dim_order.cpp and
check__to_dim_order_copy_args in util/copy_ops_util.cpp): `out` takes `self`'s sizes and every element of `self`,
converted to `out`'s dtype (`_clone_dim_order` converts nothing: the dtypes must match), laid out in `out`'s own dim
order. The checks, each refused as InvalidArgument naming the values and the fix, before `out` is touched:
- `non_blocking` must be false (ExecuTorch copies synchronously only);
- a given `dim_order` has one entry per dimension of `self`, is the contiguous (0, 1, ..., n-1) or the channels-last
  order (4-D (0, 2, 3, 1), 5-D (0, 2, 3, 4, 1)), and equals `out`'s dim order;
- no `dim_order`: `out` keeps `self`'s dim order;
- both dtypes are among those ExecuTorch's kernels switch over (REALHBBF16: the ints, bool, half, bfloat16, float,
  double);
- `out` can take `self`'s sizes (a STATIC out of other sizes is refused, as ExecuTorch's resize_tensor refuses it).
ATen mode reads a tensor's dim order from its strides (dimensions of one element do not count, as in PyTorch).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import torch
from torchgen.model import FunctionSchema

from ..devices.errors import DeviceMemoryAccessError
from ..tensors.error import Error
from ..tensors.tensor import PortableTensor, contiguous_strides
from .prepared import KernelFailure, PreparedKernel, Run

TO_DIM_ORDER_COPY = "dim_order_ops::_to_dim_order_copy.out"
CLONE_DIM_ORDER = "dim_order_ops::_clone_dim_order.out"
# kernel_name (the part after `devcopy::portable::` / `devcopy::aten::`) -> runtime operator name
KERNELS = {"_to_dim_order_copy_out": TO_DIM_ORDER_COPY, "_clone_dim_order_out": CLONE_DIM_ORDER}
# ET_SWITCH_REALHBBF16_TYPES: the dtypes both kernels copy from and to
DTYPES = (
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.float32,
    torch.float64,
    torch.bool,
    torch.bfloat16,
)
_CHANNELS_LAST = {4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}


def channels_last(rank: int) -> tuple[int, ...] | None:
    """The channels-last dim order of a `rank`-D tensor (None: the rank has none)."""
    return _CHANNELS_LAST.get(rank)


def _dtype_problem(op: str, self_dtype: torch.dtype, out_dtype: torch.dtype) -> str:
    for what, dtype in (("self", self_dtype), ("out", out_dtype)):
        if dtype not in DTYPES:
            return (
                f"{what} has dtype {dtype}, which ExecuTorch's kernel does not copy. Use one of "
                f"{', '.join(str(d).removeprefix('torch.') for d in DTYPES)}"
            )
    if op == CLONE_DIM_ORDER and self_dtype != out_dtype:
        return (
            f"self has dtype {self_dtype} but out has {out_dtype}: _clone_dim_order converts no dtype. Give out "
            f"self's dtype, or cast with _to_dim_order_copy"
        )
    return ""


def _dim_order_problem(
    rank: int,
    self_order: tuple[int, ...],
    out_order: tuple[int, ...],
    non_blocking: bool,
    dim_order: Sequence[int] | None,
) -> str:
    """What ExecuTorch's check__to_dim_order_copy_args refuses ("" when nothing). `self_order` and `out_order` are
    the tensors' dim orders."""
    if non_blocking:
        return "non_blocking=True: ExecuTorch's kernel copies synchronously only. Pass non_blocking=False"
    if dim_order is None:
        if out_order != self_order:
            return (
                f"no dim_order given, so out must keep self's dim order {self_order}, but out is laid out "
                f"{out_order}. Give out self's dim order, or pass dim_order={list(out_order)}"
            )
        return ""
    wanted = tuple(int(d) for d in dim_order)
    if len(wanted) != rank:
        return (
            f"dim_order {list(wanted)} has {len(wanted)} entries for a {rank}-D self. Give one entry per "
            f"dimension, e.g. {list(range(rank))}"
        )
    last = channels_last(rank)
    allowed = [tuple(range(rank))] + ([last] if last else [])
    if wanted not in allowed:
        return (
            f"dim_order {list(wanted)} is neither contiguous nor channels-last: ExecuTorch's kernel writes only "
            f"{' or '.join(str(list(a)) for a in allowed)} for a {rank}-D tensor"
        )
    if out_order != wanted:
        return (
            f"dim_order {list(wanted)} but out is laid out {out_order}. Plan out in dim order {list(wanted)}, "
            f"or pass dim_order={list(out_order)}"
        )
    return ""


def aten_dim_order(tensor: torch.Tensor, like: Sequence[int] | None = None) -> tuple[int, ...]:
    """A torch tensor's dim order read from its strides. Strides of one-element dimensions are free (PyTorch's
    contiguity rule), as are all of an empty tensor's, so where the tensor is also laid out in `like`, `like` is its
    dim order."""
    if like is not None and len(like) == tensor.dim():
        expected = contiguous_strides(tuple(tensor.shape), like)
        if tensor.numel() == 0 or all(
            size <= 1 or s == e for size, s, e in zip(tensor.shape, tensor.stride(), expected, strict=True)
        ):
            return tuple(like)
    return tuple(sorted(range(tensor.dim()), key=lambda d: (-int(tensor.stride()[d]), d)))


def _refuse(op: str, problem: str) -> KernelFailure:
    return KernelFailure(Error.InvalidArgument, f"{op}: {problem}")


def _portable_prepare(op: str) -> Any:
    def prepare(args: list[Any], dynamic: Collection[int]) -> Run:
        del dynamic  # the sizes are read at each call
        self, non_blocking, dim_order, out = args
        problem = _dtype_problem(op, self.dtype, out.dtype) or _dim_order_problem(
            self.dim, self.dim_order, out.dim_order, non_blocking, dim_order
        )

        def run() -> PortableTensor:
            if problem:
                raise _refuse(op, problem)
            resize = out.resize_problem(self.sizes)
            if resize:
                raise _refuse(op, f"out {out}: {resize}")
            try:  # both on the host, checked before out changes (a device tensor's view raises)
                source, _ = self.host_view(), out.host_view()
            except DeviceMemoryAccessError as exc:
                raise _refuse(op, str(exc)) from exc
            out.resize(self.sizes)
            if self.numel:
                out.host_view().copy_(source)
            result: PortableTensor = out
            return result

        return run

    return prepare


def _aten_prepare(op: str) -> Any:
    def prepare(args: list[Any], dynamic: Collection[int]) -> Run:
        del dynamic
        self, non_blocking, dim_order, out = args

        def run() -> torch.Tensor:
            self_order = aten_dim_order(self, dim_order)
            out_order = aten_dim_order(out, self_order if dim_order is None else dim_order)
            problem = _dtype_problem(op, self.dtype, out.dtype) or _dim_order_problem(
                self.dim(), self_order, out_order, non_blocking, dim_order
            )
            if problem:
                raise _refuse(op, problem)
            if out.shape != self.shape:
                fmt = torch.channels_last if out_order == channels_last(4) else torch.contiguous_format
                if out_order == channels_last(5):
                    fmt = torch.channels_last_3d
                try:
                    out.resize_(self.shape, memory_format=fmt)
                except RuntimeError as exc:
                    raise _refuse(op, f"out cannot take self's sizes {list(self.shape)}: {exc}") from exc
            out.copy_(self)
            result: torch.Tensor = out
            return result

        return run

    return prepare


def dim_order_kernel(name: str, schema: FunctionSchema, *, portable: bool) -> PreparedKernel:
    """The boxed kernel of `name` (`dim_order_ops::_to_dim_order_copy.out` or `_clone_dim_order.out`) in the
    portable mode (PortableTensors, failures on the context) or ATen mode (torch tensors, failures raise)."""
    if name not in KERNELS.values():
        raise ValueError(f"{name} is not a dim-order op. Valid: {', '.join(KERNELS.values())}")
    del schema  # both ops take (self, non_blocking, dim_order, out), boxed in schema order
    prepare = _portable_prepare(name) if portable else _aten_prepare(name)
    return PreparedKernel(prepare, portable=portable, n_out=1, name=name)
