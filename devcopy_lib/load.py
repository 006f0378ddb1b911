"""`load_method`: from a placed program to a loaded Method, the step where passes hand over to the runtime.

It sits above both layers so that `runtime` never imports `passes`: emitting is a pass, loading is the runtime's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .names import Mode
from .passes.emit import emit
from .runtime.method import Method, load_program
from .runtime.program import Program


def load_method(
    placed: Any, mode: str = Mode.PORTABLE, libs: Sequence[Any] | None = None, backend: str | None = None
) -> Method:
    """Emit `placed` (a PlacedProgram; an emitted Program passes through) and load it in `mode` with `libs` linked.

    See `runtime.method.load_program` for `backend` and the errors raised."""
    program = placed if isinstance(placed, Program) else emit(placed)
    return load_program(program, mode, libs, backend)
