"""A measured cost model for host<->device copies: seconds = latency + bytes / bandwidth, one line per (direction,
host-memory kind), fitted by least squares on relative error to a sweep's medians; saved and loaded as JSON.

Every surface prices a copy through one function, `CopyPricer.price` (`copy_pricer(backend)`, or `price_copy` for
one copy): the placement report, the explorer, `Method.profile` / `devcopy run --profile`, `devcopy place` and the
docs. A price says its basis: the backend the copy would run on, the host memory kind that backend's planned buffers
have (pinned where its allocator pins host memory, else pageable), the clock and the machine the line was measured
on. The default model is fitted from the H200 runs committed in docs/data/: the pageable lines from the copy sweep
(copy_bandwidth.json, the copy engine, wall clock), the pinned lines from a loaded method's own planned copies as
`Method.profile` measured them (call_overhead_cupy.json, CUDA events), since a method's copies are what the report
prices and they cost a fixed ~30-40 µs more per copy than the bare engine.

A pinned line holds from 1 MiB up (`SMALL_COPY_BYTES`); below it a copy is mostly the driver's fixed cost, priced by
its own line fitted to the small profiled copies. Each band carries the error it showed out of sample, against a
run it was not fitted to (`ErrorBand`), and every price of that band says it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from ..names import BACKENDS, format_bytes, format_seconds
from ..names import basis_text as basis_text  # re-exported: the wording every surface imports from here
from ..names import price_text as price_text
from .harness import SweepResult
from .measurement import ONE_WAY

DEFAULT_FILE = "cost_model_h200.json"
FIT_METHOD, FIT_CLOCK = "devcopy engine", "wall"
SMALL_COPY_BYTES = 1 << 20  # below: the small-copy band (a fixed cost); from here up: the bandwidth band
ERROR_QUANTILE = 0.9  # an error band is the error 90% of its out-of-sample copies stay within


@dataclass(frozen=True)
class Line:
    """t(n) = latency_s + n / (bandwidth_gbps * 1e9); `residuals` are (fit - measured) / measured per size."""

    latency_s: float
    bandwidth_gbps: float
    sizes: tuple[int, ...] = ()
    residuals: tuple[float, ...] = ()

    def seconds(self, nbytes: int) -> float:
        return self.latency_s + nbytes / (self.bandwidth_gbps * 1e9)

    def close_to(self, other: Line, rel: float = 1e-9) -> bool:
        """Same sizes and, within `rel`, the same latency, bandwidth and residuals: a refit on another CPU (another
        BLAS kernel) differs in the last bits, so fitted lines are compared this way, never with `==`."""
        return (
            self.sizes == other.sizes
            and math.isclose(self.latency_s, other.latency_s, rel_tol=rel, abs_tol=1e-15)
            and math.isclose(self.bandwidth_gbps, other.bandwidth_gbps, rel_tol=rel)
            and len(self.residuals) == len(other.residuals)
            and all(
                math.isclose(a, b, rel_tol=rel, abs_tol=1e-4)
                for a, b in zip(self.residuals, other.residuals, strict=True)
            )
        )


def fit_line(sizes: Sequence[float], seconds: Sequence[float]) -> Line:
    """Least squares on relative error, so 4-byte latencies and 1-GiB bandwidths both count; latency >= 0."""
    n, t = np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float)
    if len(n) < 2 or len(set(n)) < 2:
        raise ValueError(f"fit_line needs at least two distinct sizes, got {list(sizes)}")
    (latency, per_byte), *_ = np.linalg.lstsq(np.stack([1 / t, n / t], axis=1), np.ones_like(t), rcond=None)
    if latency < 0:  # bandwidth-only fit
        latency, per_byte = 0.0, float(np.sum(n / t) / np.sum((n / t) ** 2))
    if per_byte <= 0:
        raise ValueError(f"fit_line: times do not grow with size (sizes {list(sizes)}, seconds {list(seconds)})")
    residuals = (latency + per_byte * n - t) / t
    return Line(
        float(latency),
        float(1 / per_byte / 1e9),
        tuple(int(x) for x in n),
        tuple(round(float(r), 4) for r in residuals),
    )


def fit_points(points: Iterable[tuple[int, float]]) -> Line:
    """`fit_line` over (bytes, seconds) points, in size order."""
    ordered = sorted(points)
    return fit_line([n for n, _ in ordered], [t for _, t in ordered])


def _line_dict(direction: str, memory: str, line: Line) -> dict[str, Any]:
    return {
        "direction": direction,
        "memory": memory,
        "latency_s": line.latency_s,
        "bandwidth_gbps": line.bandwidth_gbps,
        "sizes": list(line.sizes),
        "residuals": list(line.residuals),
    }


def _lines_from(entries: Iterable[dict[str, Any]]) -> dict[tuple[str, str], Line]:
    return {
        (e["direction"], e["memory"]): Line(
            e["latency_s"], e["bandwidth_gbps"], tuple(e["sizes"]), tuple(e["residuals"])
        )
        for e in entries
    }


def _band_of(nbytes: int) -> tuple[int, int | None]:
    """The size band a copy of `nbytes` is priced and checked in: [0, 1 MiB) or [1 MiB, no limit)."""
    return (0, SMALL_COPY_BYTES) if nbytes < SMALL_COPY_BYTES else (SMALL_COPY_BYTES, None)


@dataclass(frozen=True)
class ErrorBand:
    """How far the model's prices of one host memory kind and size band were from another run's measurements:
    `error` is the |predicted / measured - 1| that ERROR_QUANTILE of the `copies` stayed within, `worst` the largest.
    `run` names the run (its date)."""

    memory: str
    low_bytes: int
    high_bytes: int | None
    error: float
    worst: float
    copies: int
    run: str

    def covers(self, nbytes: int, memory: str) -> bool:
        return memory == self.memory and (self.low_bytes, self.high_bytes) == _band_of(nbytes)

    @property
    def sizes(self) -> str:
        """'under 1 MiB' or 'of 1 MiB and up'."""
        return (
            f"under {format_bytes(self.high_bytes)}" if self.high_bytes else f"of {format_bytes(self.low_bytes)} and up"
        )

    @property
    def text(self) -> str:
        """'±8% for copies of 1 MiB and up (90% of 14 out-of-sample copies within it, worst 17%)'."""
        return (
            f"±{self.error:.0%} for copies {self.sizes} ({ERROR_QUANTILE:.0%} of {self.copies} out-of-sample copies "
            f"within it, worst {self.worst:.0%})"
        )


def error_bands(
    model: CostModel, copies: Iterable[dict[str, Any]], run: str, memory: str = "pinned"
) -> tuple[ErrorBand, ...]:
    """`model`'s error per size band on profiled copies it was not fitted to (rows with `op`, `bytes`, `memory`,
    `measured_s`, as `Method.profile` gives them): both directions together, `memory` host memory only."""
    ratios: dict[tuple[int, int | None], list[float]] = {}
    for c in copies:
        direction = next((d for d in ONE_WAY if f"_{d}_copy" in c["op"]), None)
        if direction is None or c["memory"] != memory or not c["measured_s"] or not c["bytes"]:
            continue
        error = abs(model.predict(direction, c["bytes"], memory) / c["measured_s"] - 1)
        ratios.setdefault(_band_of(c["bytes"]), []).append(error)
    bands = []
    for (low, high), errors in sorted(ratios.items()):
        errors.sort()
        quantile = errors[min(len(errors) - 1, math.ceil(ERROR_QUANTILE * len(errors)) - 1)]
        bands.append(ErrorBand(memory, low, high, round(quantile, 4), round(errors[-1], 4), len(errors), run))
    return tuple(bands)


class CostModel:
    """Lines keyed by (direction, memory); `predict` prices one copy in seconds. `small_lines` (same keys, where
    fitted) price copies under SMALL_COPY_BYTES; `checks` are the error bands an out-of-sample run showed."""

    def __init__(
        self,
        lines: dict[tuple[str, str], Line],
        source: dict[str, Any] | None = None,
        small_lines: dict[tuple[str, str], Line] | None = None,
        checks: Iterable[ErrorBand] = (),
    ) -> None:
        self.lines, self.source = dict(lines), dict(source or {})
        self.small_lines, self.checks = dict(small_lines or {}), tuple(checks)

    @classmethod
    def fit(cls, result: SweepResult, method: str = FIT_METHOD, clock: str = FIT_CLOCK) -> CostModel:
        """One line per (direction, memory) over the sweep's medians of `method` on `clock` (one-way copies)."""
        points: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for m in result.measurements:
            if m.method == method and m.clock == clock and m.direction in ONE_WAY:
                points.setdefault((m.direction, m.memory), []).append((m.nbytes, m.median))
        if not points:
            raise ValueError(
                f"No {method!r} measurements on clock {clock!r} in the sweep; methods there: "
                f"{sorted({m.method for m in result.measurements})}"
            )
        lines = {key: fit_points(pts) for key, pts in points.items()}
        source: dict[str, Any] = {
            "backend": result.backend,
            "device": result.device,
            "method": method,
            "clock": clock,
            **{k: result.meta[k] for k in ("date", "command") if k in result.meta},
        }
        return cls(lines, source)

    def with_planned_copies(self, copies: list[dict[str, Any]], source: dict[str, Any]) -> CostModel:
        """This model with its pinned lines refitted from a loaded method's profiled planned copies (rows with `op`,
        `bytes`, `memory`, `measured_s`, as `Method.profile` gives them): what a method's copy step costs, not the
        raw engine's. Copies of SMALL_COPY_BYTES and up refit the line, smaller ones the small-copy line; a band
        with fewer than two distinct sizes in a direction keeps what it had."""
        lines, small = dict(self.lines), dict(self.small_lines)
        for direction in ONE_WAY:
            points = [
                (c["bytes"], c["measured_s"])
                for c in copies
                if f"_{direction}_copy" in c["op"] and c["memory"] == "pinned" and c["measured_s"]
            ]
            for band, below in ((lines, False), (small, True)):
                own = [(n, t) for n, t in points if (n < SMALL_COPY_BYTES) == below]
                if len({n for n, _ in own}) >= 2:
                    band[(direction, "pinned")] = fit_points(own)
        return CostModel(lines, {**self.source, "pinned_lines_from": source}, small)

    def with_checks(self, checks: Iterable[ErrorBand]) -> CostModel:
        """This model with the error bands an out-of-sample run showed (`error_bands`)."""
        return CostModel(self.lines, self.source, self.small_lines, checks)

    def error_band(self, nbytes: int, memory: str = "pinned") -> ErrorBand | None:
        """The out-of-sample error of this model's prices for a copy of `nbytes` from/to `memory`, if checked."""
        return next((band for band in self.checks if band.covers(nbytes, memory)), None)

    def line_clock(self, memory: str) -> str:
        """The clock the (direction, `memory`) lines were measured on: a refitted pinned line keeps the clock of the
        profiled method copies it came from, every other line the sweep's."""
        refit = self.source.get("pinned_lines_from") if memory == PINNED else None
        return str((refit or self.source).get("clock", "?"))

    def predict(self, direction: str, nbytes: int, memory: str = "pinned") -> float:
        """Seconds to copy `nbytes` in `direction` ("h2d" or "d2h") from/to `memory` ("pinned" or "pageable")."""
        try:
            line = self.lines[(direction, memory)]
        except KeyError:
            raise ValueError(
                f"No cost line for direction={direction!r}, memory={memory!r}. Valid: "
                f"{sorted(f'{d}/{m}' for d, m in self.lines)}"
            ) from None
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes!r}")
        if nbytes < SMALL_COPY_BYTES and (direction, memory) in self.small_lines:
            line = self.small_lines[(direction, memory)]
        return 0.0 if nbytes == 0 else line.seconds(nbytes)

    def close_to(self, other: CostModel, rel: float = 1e-9) -> bool:
        """The same (direction, memory) keys, each line (and small-copy line) `Line.close_to` the other's, and
        error bands within `rel` (at 4 decimals, as they are stored)."""
        return (
            all(
                mine.keys() == theirs.keys() and all(line.close_to(theirs[key], rel) for key, line in mine.items())
                for mine, theirs in ((self.lines, other.lines), (self.small_lines, other.small_lines))
            )
            and len(self.checks) == len(other.checks)
            and all(
                (a.memory, a.low_bytes, a.high_bytes, a.copies, a.run)
                == (b.memory, b.low_bytes, b.high_bytes, b.copies, b.run)
                and math.isclose(a.error, b.error, rel_tol=rel, abs_tol=1e-4)
                and math.isclose(a.worst, b.worst, rel_tol=rel, abs_tol=1e-4)
                for a, b in zip(self.checks, other.checks, strict=True)
            )
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "lines": [_line_dict(d, m, line) for (d, m), line in sorted(self.lines.items())],
            "small_lines": [_line_dict(d, m, line) for (d, m), line in sorted(self.small_lines.items())],
            "checks": [asdict(band) for band in self.checks],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CostModel:
        checks = (ErrorBand(**band) for band in data.get("checks", ()))
        return cls(_lines_from(data["lines"]), data.get("source"), _lines_from(data.get("small_lines", ())), checks)

    def save(self, path: str) -> None:
        with open(path, "w") as handle:
            json.dump(self.to_dict(), handle, indent=1)
            handle.write("\n")

    @classmethod
    def load(cls, path: str) -> CostModel:
        with open(path) as handle:
            return cls.from_dict(json.load(handle))


@lru_cache(maxsize=1)
def default_model() -> CostModel:
    """The model fitted from the committed H200 run (package data)."""
    return CostModel.from_dict(json.loads(resources.files(__package__).joinpath(DEFAULT_FILE).read_text()))


def predict(direction: str, nbytes: int, memory: str = "pinned") -> float:
    """Seconds for one copy by the default (H200) model; what the placement report prices copies with."""
    return default_model().predict(direction, nbytes, memory)


PINNED, PAGEABLE = "pinned", "pageable"


def host_memory(backend: str | None = None) -> str:
    """The host memory kind a loaded method's copies use on `backend` (None: the selected one): its planned host
    buffers are pinned where the backend's allocator pins host memory, else pageable (runtime/memory.py)."""
    from ..devices.backend import backend_capabilities

    return PINNED if backend_capabilities(backend).pinned_host else PAGEABLE


def _real_device(backend: str) -> bool:
    """Whether `backend`'s copies cross to a real device: on one that does not (the simulated accelerator) a price
    is what the copy would cost on the machine the model was measured on, not a time of this backend."""
    from ..devices.backend import backend_capabilities

    return bool(backend_capabilities(backend).real_device)


@dataclass(frozen=True)
class CopyPrice:
    """One copy priced by the cost model, with its basis; `seconds` is None where the model has no line (d2d).
    `error` is the out-of-sample error band of the copy's size, where the model was checked."""

    direction: str
    nbytes: int
    seconds: float | None
    backend: str
    memory: str
    clock: str
    measured_on: str
    error: ErrorBand | None = None

    @property
    def text(self) -> str:
        """'10.9 us' ('' when not priced)."""
        return format_seconds(self.seconds)

    @property
    def label(self) -> str:
        """The price with its basis, as `price_text` words it."""
        basis = {"backend": self.backend, "memory": self.memory, "clock": self.clock, "measured_on": self.measured_on}
        if not _real_device(self.backend):
            basis["times_of"] = self.measured_on
        return price_text(self.seconds, basis, self.error.error if self.error is not None else None)


@dataclass(frozen=True)
class CopyPricer:
    """The cost model bound to the backend a copy would run on (so to that backend's host memory kind): what every
    surface prices copies with. `predict` is the protocol the placement report and `Method.profile` call."""

    model: CostModel
    backend: str
    memory: str

    @property
    def source(self) -> dict[str, Any]:
        """Where the model's lines were measured (the model's own `source`)."""
        return self.model.source

    def price(self, direction: str, nbytes: int, memory: str | None = None) -> CopyPrice:
        """The one pricing of a copy: `nbytes` in `direction` from/to `memory` host memory (default: the
        backend's); None seconds where the model has no line for it."""
        memory = memory or self.memory
        has_line = (direction, memory) in self.model.lines
        seconds = self.model.predict(direction, nbytes, memory) if has_line else None
        error = self.model.error_band(nbytes, memory) if has_line else None
        clock = self.model.line_clock(memory)
        return CopyPrice(direction, nbytes, seconds, self.backend, memory, clock, self.where, error)

    def error(self, direction: str, nbytes: int, memory: str | None = None) -> float | None:
        """The out-of-sample relative error of `price(...)` for this size (0.08 for ±8%), None where unchecked: what
        a profile shows beside each predicted copy."""
        band = self.price(direction, nbytes, memory).error
        return band.error if band is not None else None

    def predict(self, direction: str, nbytes: int, memory: str | None = None) -> float:
        """`price(...).seconds`, raising ValueError where the model has no line (the report's protocol)."""
        seconds = self.price(direction, nbytes, memory).seconds
        if seconds is None:
            raise ValueError(f"No cost line for direction={direction!r}, memory={memory or self.memory!r}")
        return seconds

    @property
    def where(self) -> str:
        """The machine the model was measured on: 'NVIDIA H200 (cupy)'."""
        device, backend = self.source.get("device"), self.source.get("backend")
        return f"{device} ({backend})" if device and backend else str(device or backend or "given lines")

    def basis(self) -> dict[str, str]:
        """What the prices assume, for JSON and for `describe`: backend, host memory kind, clock, machine, and the
        out-of-sample error of each size band where the model was checked for that memory kind."""
        basis = {
            "backend": self.backend,
            "memory": self.memory,
            "clock": self.model.line_clock(self.memory),
            "measured_on": self.where,
        }
        if not _real_device(self.backend):  # the figure is the measured machine's time, never this backend's
            basis["times_of"] = self.where
        checked = [band for band in self.model.checks if band.memory == self.memory]
        if checked:
            basis["error"] = "; ".join(band.text for band in checked)
        return basis

    def describe(self) -> str:
        """The basis in one line, `basis_text`'s words."""
        return basis_text(self.basis())


def copy_pricer(backend: str | None = None, memory: str | None = None, model: CostModel | None = None) -> CopyPricer:
    """The pricer every surface uses: `model` (default: the H200 model) for `backend` (None: the selected one), its
    host memory kind unless `memory` says otherwise."""
    from ..devices.backend import select_backend

    name = str(backend) if backend in BACKENDS else str(select_backend(backend))  # a named one, even where absent
    if memory not in (None, PINNED, PAGEABLE):
        raise ValueError(f"Unknown host memory kind {memory!r}. Valid: {PINNED}, {PAGEABLE} (or None: the backend's)")
    return CopyPricer(model or default_model(), name, memory or host_memory(name))


def price_copy(
    direction: str,
    nbytes: int,
    backend: str | None = None,
    memory: str | None = None,
    model: CostModel | None = None,
) -> CopyPrice:
    """One copy's price and basis: `copy_pricer(backend, memory, model).price(direction, nbytes)`."""
    return copy_pricer(backend, memory, model).price(direction, nbytes)
