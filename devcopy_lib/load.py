"""`load_method`: from a placed program to a loaded Method, the step where emit hands over to the runtime; and
`trial_call`: load on a fresh allocator, call once, keep what the call did (what `devcopy run` reports).

It sits above `emitter` and `runtime` so that `runtime` never imports the floors above it: emitting belongs to
`emitter/`, loading to the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from torch import fx

from .devices import backend as device_backends
from .devices.allocator import DeviceAllocator
from .devices.registry import scoped_allocators
from .emitter.emit import emit
from .errors import InvalidArgumentTypeError
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


@dataclass
class TrialCall:
    """What one call of a freshly loaded method did: the backend that ran it, the program it ran, its outputs, the
    method's counts (`summary`: copies executed, the caller's copies, arena bytes, graph replay) and, when asked,
    the rows of further profiled calls."""

    backend: str
    program: Program
    outputs: Any
    summary: dict[str, Any]
    profile: list[dict[str, Any]] | None = None


def trial_call(
    placed: Any,
    inputs: Sequence[Any],
    mode: str = Mode.PORTABLE,
    libs: Sequence[Any] | None = None,
    backend: str | None = None,
    capture: CaptureOption = AUTO,
    profile_calls: int = 0,
    cost_model: Any = None,
    before_load: Callable[[DeviceAllocator], None] | None = None,
    steps: int = 1,
    before_step: Callable[[int, Sequence[Any]], None] | None = None,
    after_step: Callable[[int, Sequence[Any], Any], Sequence[Any]] | None = None,
) -> TrialCall:
    """Load `placed` (as `load_method` takes it) on a new allocator of `backend`, registered for this call only, and
    call it `steps` times, first on `inputs`: `before_step(step, inputs)` runs before each call (a caller copies
    the inputs there, since the method may write them in place), `after_step(step, inputs, outputs)` after it with
    the method still loaded (a caller compares with eager there) and returns the next call's inputs (the same by
    default: the method's state still evolves). With `profile_calls`, that many profiled calls on `inputs` follow
    (`Method.profile`, copies priced by `cost_model`). `before_load(allocator)` may refuse the program first (a
    delegate on a device the backend lacks). The allocator and the method are closed on return; the outputs (of
    the last call) are the caller's."""
    with device_backends.make_allocator(backend) as allocator, scoped_allocators(allocator):
        if before_load is not None:
            before_load(allocator)
        with load_method(placed, mode, libs, capture=capture) as method:
            step_inputs: Sequence[Any] = inputs
            outputs: Any = None
            for step in range(steps):
                if before_step is not None:
                    before_step(step, step_inputs)
                outputs = method(*step_inputs)
                if after_step is not None:
                    step_inputs = after_step(step, step_inputs, outputs)
            summary = {
                "copies_executed": dict(method.copies_executed),
                "caller_copies": method.caller_copies,
                "arena_bytes": method.arena_sizes,
                "capture": method.capture,
            }
            profile = method.profile(*inputs, repeat=profile_calls, cost_model=cost_model) if profile_calls else None
            return TrialCall(allocator.backend, method.program, outputs, summary, profile)
