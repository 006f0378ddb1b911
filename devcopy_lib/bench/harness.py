"""The timing loops and the sweep result: `measure` (warm-ups, then samples until a time budget, within min/max counts,
per clock) for copy sweeps; `interleaved` (rounds in which several functions take turns) and `repeat` (one function,
on one or more clocks, optionally with the garbage collector paused) for the benchmark scripts; a progress callback
per case; results as rows, JSON and CSV. Scripts time through these, so every number has the same warm-up, the same
statistics (median, IQR, fastest) and the same clocks."""

from __future__ import annotations

import csv
import datetime
import gc
import json
import os
import platform
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

from .clocks import Clock, WallClock
from .measurement import Measurement, Timing

T = TypeVar("T")

Progress = Callable[[int, int, str], None]  # (cases done, cases in all, label of the case just done)


@dataclass(frozen=True)
class Case:
    """One thing to time: `make()` sets up (allocations, outside timing) and returns the call to time."""

    method: str
    direction: str
    memory: str
    nbytes: int
    make: Callable[[], Callable[[], Any]] = field(compare=False, repr=False)
    clocks: tuple[str, ...] = ("events", "wall")

    @property
    def label(self) -> str:
        return f"{self.method} {self.direction} {self.memory} {self.nbytes}B"


@dataclass(frozen=True)
class Policy:
    """How long to time each case on each clock."""

    warmup: int = 2
    min_samples: int = 5
    max_samples: int = 30
    budget_s: float = 0.2

    @classmethod
    def quick(cls) -> Policy:
        return cls(warmup=1, min_samples=3, max_samples=5, budget_s=0.01)


def measure(fn: Callable[[], Any], clock: Clock, policy: Policy) -> list[float]:
    """Warm up, then take samples until min_samples and the budget are met (at most max_samples)."""
    for _ in range(policy.warmup):
        fn()
    samples: list[float] = []
    while len(samples) < policy.max_samples and (len(samples) < policy.min_samples or sum(samples) < policy.budget_s):
        token = clock.start()
        fn()
        samples.append(clock.stop(token))
    return samples


def interleaved(
    fns: Mapping[str, Callable[[], object]], rounds: int, calls: int = 1, clock: Clock | None = None, warmup: int = 1
) -> dict[str, Timing]:
    """Each function called `warmup` times, then `rounds` rounds in which every function in turn makes `calls`
    back-to-back calls, one sample per function and round (the mean per call). Taking turns makes load from other
    processes on a shared machine slow every function alike, so their ratios hold even when the times do not.
    `clock` defaults to the wall clock without a device synchronize."""
    clock = clock or WallClock()
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            token = clock.start()
            for _ in range(calls):
                fn()
            samples[name].append(clock.stop(token) / calls)
    return {name: Timing(values) for name, values in samples.items()}


def repeat(
    fn: Callable[[], T],
    repeats: int,
    clocks: Sequence[Clock] = (),
    warmup: int = 0,
    gc_paused: bool = False,
) -> tuple[T, dict[str, Timing]]:
    """`fn` called `warmup` times, then `repeats` times each timed on every clock at once (the wall clock by
    default); returns the last call's result and a Timing per clock name. With `gc_paused` every timed call follows
    a full collection and runs with the collector off, as timeit does: a collection scans the whole heap (a large
    exported program included), so whether one lands in a call is otherwise luck."""
    clocks = clocks or (WallClock(),)
    if repeats < 1:
        raise ValueError(f"repeat needs at least one timed call, got repeats={repeats}")
    for _ in range(warmup):
        fn()
    samples: dict[str, list[float]] = {clock.name: [] for clock in clocks}
    for _ in range(repeats):
        if gc_paused:
            gc.collect()
            gc.disable()
        try:
            tokens = [clock.start() for clock in clocks]
            result = fn()
            for clock, token in reversed(list(zip(clocks, tokens, strict=True))):
                samples[clock.name].append(clock.stop(token))
        finally:
            if gc_paused:
                gc.enable()
    return result, {name: Timing(values) for name, values in samples.items()}


def timed(fn: Callable[[], T], clock: Clock | None = None) -> tuple[T, float]:
    """One call of `fn` and its seconds on `clock` (the wall clock by default): for one-off steps (an export, a
    load) that are not repeated."""
    clock = clock or WallClock()
    result, timings = repeat(fn, 1, (clock,))
    return result, timings[clock.name].samples[0]


def run_cases(
    cases: Iterable[Case],
    clocks: dict[str, Clock],
    policy: Policy,
    progress: Progress | None = None,
    out: list[Measurement] | None = None,
) -> list[Measurement]:
    """Time every case on every clock it and the backend both support, in order; each measurement is appended to
    `out` (a new list by default) as it finishes, so a caller keeps the finished ones when interrupted."""
    cases = list(cases)
    out = [] if out is None else out
    for done, case in enumerate(cases, 1):
        fn = case.make()
        for name in case.clocks:
            if name in clocks:
                out.append(
                    Measurement(
                        case.method, case.direction, case.memory, case.nbytes, name, measure(fn, clocks[name], policy)
                    )
                )
        if progress is not None:
            progress(done, len(cases), case.label)
    return out


class TextProgress:
    """A one-line text progress bar for long sweeps: `[#####-----] 12/40 label`."""

    def __init__(self, stream: TextIO = sys.stderr, width: int = 30) -> None:
        self.stream, self.width = stream, width

    def __call__(self, done: int, total: int, label: str) -> None:
        filled = self.width * done // max(total, 1)
        end = "\n" if done == total else ""
        self.stream.write(f"\r[{'#' * filled}{'-' * (self.width - filled)}] {done}/{total} {label[:60]:<60}{end}")
        self.stream.flush()


@dataclass
class SweepResult:
    """Measurements of one sweep with the backend and device that ran it, and free-form metadata."""

    backend: str
    device: str
    measurements: list[Measurement]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def simulated(self) -> bool:
        """Whether the device was simulated (host memory standing in): recorded by the sweep from the allocator's
        capabilities, so targets and plots never go by the backend's name."""
        return bool(self.meta["simulated"])

    def rows(self) -> list[dict[str, Any]]:
        return [m.row() for m in self.measurements]

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "device": self.device, **self.meta, "rows": self.rows()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepResult:
        meta = {k: v for k, v in data.items() if k not in ("backend", "device", "rows")}
        return cls(data["backend"], data["device"], [Measurement.from_row(r) for r in data["rows"]], meta)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def write_csv(self, path: str) -> None:
        """One line per measurement; samples joined by spaces."""
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["method", "direction", "memory", "bytes", "clock", "median_s", "iqr_s", "gbps", "samples"])
            for r in self.rows():
                writer.writerow(
                    [
                        r["method"],
                        r["direction"],
                        r["memory"],
                        r["bytes"],
                        r["clock"],
                        f"{r['median_s']:.9g}",
                        f"{r['iqr_s']:.9g}",
                        f"{r['gbps']:.6g}",
                        " ".join(f"{s:.9g}" for s in r["samples"]),
                    ]
                )

    @property
    def warnings(self) -> list[str]:
        return [w for m in self.measurements for w in m.warnings]

    def find(self, method: str, direction: str, memory: str, nbytes: int, clock: str) -> Measurement | None:
        for m in self.measurements:
            if (m.method, m.direction, m.memory, m.nbytes, m.clock) == (method, direction, memory, nbytes, clock):
                return m
        return None


def run_record(script: str, argv: Sequence[str] | None) -> dict[str, Any]:
    """What a published CPU benchmark run says of itself: date (UTC), machine, 1-minute load average, command."""
    args = list(argv if argv is not None else sys.argv[1:])
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_average": os.getloadavg()[0],
        "command": " ".join(["python", script, *args]),
    }


def publish(
    data: Mapping[str, Any],
    data_path: str | os.PathLike[str],
    page_path: str | os.PathLike[str],
    render: Callable[[Any], str],
) -> None:
    """Write a run's data (JSON) and the page rendered from it, and print the page."""
    with open(data_path, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    page = render(data)
    with open(page_path, "w") as f:
        f.write(page)
    print(page)
