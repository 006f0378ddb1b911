"""State of the copy timing panel: sizes, direction, host memory kind; runs the library's sweep loop, reporting each
finished size so the view can redraw between sizes, and stopping between cases when asked. One bench (one allocator)
per backend, reused by every run until `close()`; one sweep at a time (a second `run()` while one runs is refused with
`SweepBusy`: the two would share the bench's buffers). No display calls."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from devcopy_lib import select_backend
from devcopy_lib.bench.harness import Policy, SweepResult
from devcopy_lib.bench.plots import ceilings, gbps_matrix, is_baseline, reading_notes
from devcopy_lib.bench.sizes import format_bytes, parse_sizes
from devcopy_lib.bench.sweep import DIRECTIONS, MEMORIES, SweepStopped, make_bench, new_result, run_plan
from devcopy_lib.names import ErrorKind

__all__ = [
    "DIRECTION_CHOICES",
    "MEMORY_CHOICES",
    "SweepBusy",
    "SweepStopped",
    "TimingState",
    "ceilings",
    "is_baseline",
    "reading_notes",
]

DIRECTION_CHOICES = (*DIRECTIONS, "all")
MEMORY_CHOICES = (*MEMORIES, "all")


class SweepBusy(RuntimeError):
    """A sweep was asked for while another one runs on the same state (they would share the bench's buffers)."""

    kind = ErrorKind.USAGE

    def __init__(self) -> None:
        super().__init__(
            "A sweep is already running on this timing panel; one runs at a time, since both would time the same "
            "buffers. Wait for it to finish, or stop it (Stop, or set the stop event it was given), then run again."
        )


@dataclass
class TimingState:
    """What to time; `run()` fills `result` size by size, calling `on_size(result)` after each."""

    sizes: str = "4K..1M"
    direction: str = "all"
    memory: str = "all"
    backend: str = "auto"
    quick: bool = True
    result: SweepResult | None = field(default=None, repr=False)
    _benches: dict[str, Any] = field(default_factory=dict, repr=False)
    _sweeping: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def running(self) -> bool:
        """True while a `run()` sweeps."""
        return self._sweeping.locked()

    def size_list(self) -> list[int]:
        return parse_sizes(self.sizes)

    def check(self) -> None:
        """Refuse bad sizes or choices before anything runs: a ValueError naming the value and the valid forms."""
        self.size_list()
        self.choices()

    def bench(self) -> Any:
        """The selected backend's bench: made once per backend (one allocator), reused by every run."""
        name = select_backend(self.backend)
        if name not in self._benches:
            self._benches[name] = make_bench(name)
        return self._benches[name]

    def offered(self) -> tuple[tuple[str, ...], tuple[str, ...], str]:
        """(directions, memories) the backend can time, with `all` where it has several, and why the rest is not
        offered ("" when everything is)."""
        bench = self.bench()
        with_all = [
            (*choices, "all") if len(choices) > 1 else tuple(choices) for choices in (bench.directions, bench.memories)
        ]
        return with_all[0], with_all[1], bench.limits

    def choices(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(directions, memories) to sweep, validated."""
        for value, valid, what in (
            (self.direction, DIRECTION_CHOICES, "direction"),
            (self.memory, MEMORY_CHOICES, "memory"),
        ):
            if value not in valid:
                raise ValueError(f"Unknown {what} {value!r}. Valid: {', '.join(valid)}")
        directions = DIRECTIONS if self.direction == "all" else (self.direction,)
        return directions, MEMORIES if self.memory == "all" else (self.memory,)

    def run(
        self,
        progress: Callable[[int, int, str], None] | None = None,
        on_size: Callable[[SweepResult], None] | None = None,
        stop: threading.Event | None = None,
    ) -> SweepResult:
        """Sweep every size in order through the library's sweep loop (`bench.sweep.run_plan`, bench kept open);
        `progress(done, total, label)` counts sizes and `on_size(result)` sees the result after each size; `stop`
        set: raises `SweepStopped` after the case being timed, the finished measurements kept in `result`. Nothing
        the backend can run among the choices: a ValueError saying why; a sweep already running: `SweepBusy`."""
        if not self._sweeping.acquire(blocking=False):
            raise SweepBusy()
        try:
            return self._sweep(progress, on_size, stop)
        finally:
            self._sweeping.release()

    def _sweep(
        self,
        progress: Callable[[int, int, str], None] | None,
        on_size: Callable[[SweepResult], None] | None,
        stop: threading.Event | None,
    ) -> SweepResult:
        sizes, (directions, memories) = self.size_list(), self.choices()
        bench, policy = self.bench(), Policy.quick() if self.quick else Policy()
        per_size = [bench.cases(nbytes, directions, memories) for nbytes in sizes]
        if not per_size[0]:
            raise ValueError(
                f"Nothing to time for direction {self.direction!r} and host memory {self.memory!r}: "
                f"{bench.limits}. Choose among direction {', '.join(bench.directions)} and host "
                f"memory {', '.join(bench.memories)}."
            )
        ends = dict(
            zip(accumulate(len(cases) for cases in per_size), enumerate(sizes, 1), strict=True)
        )  # last case -> its size
        name = select_backend(self.backend)
        result = self.result = new_result(name, bench)

        def each_case(done: int, total: int, label: str) -> None:
            if done in ends:
                index, nbytes = ends[done]
                if progress is not None:
                    progress(index, len(sizes), format_bytes(nbytes))
                if on_size is not None:
                    on_size(result)

        cases = [case for size_cases in per_size for case in size_cases]
        return run_plan(name, bench, cases, policy, each_case, stop, result, close=False)

    def close(self) -> None:
        """Close every bench's allocator (the state is done with them); a later run makes a new one."""
        for bench in self._benches.values():
            bench.release()
            bench.alloc.close()
        self._benches.clear()

    def matrix(self) -> tuple[list[str], list[dict[str, Any]]]:
        """(columns, rows) of the size x method GB/s table of the last result."""
        return gbps_matrix(self.result) if self.result else (["size"], [])

    def notes(self) -> list[str]:
        """How to read the last result (noise, IQR, why small copies are latency-bound): `bench.plots.reading_notes`."""
        return reading_notes(self.result) if self.result else []
