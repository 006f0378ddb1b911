"""`load_method`: from a placed program to a loaded Method, the step where passes hand over to the runtime.

It sits above both layers so that `runtime` never imports `passes`: emitting is a pass, loading is the runtime's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import fx

from .devices.errors import InvalidArgumentError, InvalidArgumentTypeError
from .names import LINKABLE_LIBS, MODES, Mode
from .passes.emit import emit
from .passes.lower import LoweredProgram
from .runtime.method import Method, load_program
from .runtime.program import Program
from .runtime.registry import KernelLib


def load_method(
    placed: Any, mode: str = Mode.PORTABLE, libs: Sequence[Any] | None = None, backend: str | None = None
) -> Method:
    """Emit `placed` (a PlacedProgram; an emitted Program passes through) and load it in `mode` with `libs` linked.

    See `runtime.method.load_program` for `backend` and the errors raised; a wrong `mode` or `libs` is an
    InvalidArgumentError (kind `usage`) naming the value and what to pass."""
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidArgumentError(f"Unknown mode {mode!r}. Valid: {', '.join(MODES)}")
    if libs is not None:
        _check_libs(libs)
    if not isinstance(placed, (Program, LoweredProgram, fx.GraphModule)):
        raise InvalidArgumentTypeError(
            f"load_method takes a placed program (place_devices(...)) or an emitted Program, got "
            f"{type(placed).__name__}; pass place_devices(export_and_lower(model, inputs))"
        )
    program = placed if isinstance(placed, Program) else emit(placed)
    return load_program(program, mode, libs, backend)


def _check_libs(libs: Any) -> None:
    """`libs` is a KernelLib, a lib name, or a (nested) list or tuple of them; else an InvalidArgumentError."""
    if isinstance(libs, KernelLib):
        return
    if isinstance(libs, str):
        if libs not in LINKABLE_LIBS:
            raise InvalidArgumentError(f"Unknown lib {libs!r}. Valid libs: {', '.join(LINKABLE_LIBS)}")
        return
    if not isinstance(libs, (list, tuple)):
        raise InvalidArgumentTypeError(
            f"libs must be lib names ({', '.join(LINKABLE_LIBS)}), KernelLibs or a list of them, got "
            f"{type(libs).__name__} {libs!r:.60}; pass for example libs=['portable'], or None for the mode's default"
        )
    for lib in libs:
        _check_libs(lib)
