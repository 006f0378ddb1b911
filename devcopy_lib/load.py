"""`load_method`: from a placed program to a loaded Method, the step where emit hands over to the runtime.

It sits above `emitter` and `runtime` so that `runtime` never imports the floors above it: emitting belongs to
`emitter/`, loading to the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import fx

from .devices.errors import InvalidArgumentTypeError
from .emitter.emit import emit
from .lowering.lower import LoweredProgram
from .names import Mode
from .runtime.capture import AUTO, CaptureOption
from .runtime.method import Method, load_program
from .runtime.program import Program


def load_method(
    placed: Any,
    mode: str = Mode.PORTABLE,
    libs: Sequence[Any] | None = None,
    backend: str | None = None,
    capture: CaptureOption = AUTO,
) -> Method:
    """Emit `placed` (a PlacedProgram; an emitted Program passes through) and load it in `mode` with `libs` linked.

    See `runtime.method.load_program` for `backend`, `capture` (graph replay of the device work) and the errors
    raised; a wrong `placed`, `mode` or `libs` is
    an InvalidArgumentError (kind `usage`) naming the value and what to pass."""
    if not isinstance(placed, (Program, LoweredProgram, fx.GraphModule)):
        raise InvalidArgumentTypeError(
            f"load_method takes a placed program (place_devices(...)) or an emitted Program, got "
            f"{type(placed).__name__}; pass place_devices(export_and_lower(model, inputs))"
        )
    program = placed if isinstance(placed, Program) else emit(placed)
    return load_program(program, mode, libs, backend, capture)
