"""One trial call of a loaded program with the run options a caller gives (`RunOptions`), and the fields reported of
it: the method's counts, the profile with each copy priced by the one pricer, the trace file written."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..bench.cost_model import copy_pricer
from ..devices.allocator import DeviceAllocator
from ..errors import InvalidArgumentError
from ..load import TrialCall, trial_call
from ..names import Mode
from ..runtime import trace as traces
from ..runtime.capture import AUTO, CaptureOption
from ..runtime.operator_registry import KernelLib


@dataclass(frozen=True)
class RunOptions:
    """How a program is run: in `mode` with `libs` linked (None: what the program needs, `load_method`'s default),
    graph replay by `capture`, then `profile` profiled calls (0: none), written as a Chrome trace to `trace` (a path;
    needs `profile`), over `steps` consecutive calls."""

    mode: str = Mode.PORTABLE
    libs: list[KernelLib] | None = None
    capture: CaptureOption = AUTO
    profile: int = 0
    trace: str | None = None
    steps: int = 1

    def __post_init__(self) -> None:
        if self.trace is not None and not self.profile:
            raise InvalidArgumentError(f"trace={self.trace!r} writes the profiled calls: pass profile=N (N > 0) too")


def run_trial(
    placed: Any,
    inputs: Sequence[Any],
    options: RunOptions,
    backend: str,
    before_load: Callable[[DeviceAllocator], None] | None = None,
    before_step: Callable[[int, Sequence[Any]], None] | None = None,
    after_step: Callable[[int, Sequence[Any], Any], Sequence[Any]] | None = None,
) -> tuple[TrialCall, dict[str, Any]]:
    """`load.trial_call` of `placed` with `options` on `backend`, and the fields reported of it: the method's counts,
    then with `options.profile` the rows with each copy's measured time beside its price by the one pricer
    (bench.cost_model.copy_pricer) for that backend, then with `options.trace` the trace file written."""
    pricer = copy_pricer(backend) if options.profile else None
    call = trial_call(
        placed,
        inputs,
        options.mode,
        options.libs,
        backend,
        options.capture,
        options.profile,
        pricer,
        before_load,
        options.steps,
        before_step,
        after_step,
    )
    fields = dict(call.summary)
    if pricer is not None:
        fields.update(profile=call.profile, cost_model=pricer.source, pricing=pricer.basis())
        if options.trace is not None:
            chrome = traces.chrome_trace(call.profile or [], call.program, options.profile, call.backend, pricer.source)
            fields["trace_file"] = traces.write_trace(chrome, options.trace)
    return call, fields
