"""The prepare/run contract every devcopy kernel follows, so a loaded method and an eager call run one code path.

A kernel's `prepare(args, dynamic)` looks at its arguments once (placement, dtypes, the allocator, pre-validated
copies, the torch callable and its views) and returns `run`, a no-argument callable that performs one call and
re-checks only what a call can change (the sizes of dynamic tensors). `dynamic` holds the positions of the arguments
whose sizes may change between calls (ATen-mode tensors do not say so themselves; portable tensors do). A refusal
raises `KernelFailure` with ExecuTorch's error code; an `out` that fails a check is left as it was.

The boxed call `kernel(ctx, args)` (eager `torch.ops` calls, the operator registry) is prepare-then-run: a portable
kernel records the failure on the context, an ATen-mode kernel raises it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from ..names import Mode
from ..tensors.context import KernelRuntimeContext
from ..tensors.error import Error

Run = Callable[[], Any]
Prepare = Callable[[list[Any], Collection[int]], Run]


class KernelFailure(RuntimeError):
    """A kernel refused a call: `error` is ExecuTorch's code, the message names the op, the values and the fix."""

    def __init__(self, error: Error, message: str) -> None:
        super().__init__(message)
        self.error = error


class PreparedKernel:
    """A boxed kernel `(ctx, args) -> out` made of a prepare step; a method calls `prepare` once at load."""

    __slots__ = ("prepare", "portable", "n_out", "__name__")  # names: attributes, not the mode

    def __init__(self, prepare: Prepare, *, portable: bool, n_out: int, name: str) -> None:
        self.prepare, self.portable, self.n_out, self.__name__ = prepare, portable, n_out, name

    def __call__(self, ctx: KernelRuntimeContext, args: list[Any]) -> Any:
        """Prepare and run one call; portable failures go on `ctx` (the outs come back unchanged), ATen ones raise."""
        try:
            return self.prepare(args, ())()
        except KernelFailure as failure:
            if not self.portable:
                raise
            ctx.fail(failure.error, str(failure))
        return args[-1] if self.n_out == 1 else tuple(args[len(args) - self.n_out :])

    def __repr__(self) -> str:
        return f"PreparedKernel({self.__name__}, {Mode.PORTABLE if self.portable else Mode.ATEN})"
