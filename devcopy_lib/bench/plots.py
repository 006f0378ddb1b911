"""How a sweep is shown, the same in notebooks, the timing panel and the docs: bandwidth against size (binary size
ticks, IQR error bars, baselines dashed, the ceilings named in a legend outside the data), small-copy latency, and a
compact size x method GB/s matrix. matplotlib is imported lazily and without pyplot, so a notebook kernel keeps its
backend; each plot function returns the Figure and writes it to `path` when one is given."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..names import format_seconds
from .harness import SweepResult
from .measurement import BOTH, ONE_WAY, SPREAD_WARNING, Measurement
from .sizes import format_bytes

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

H2D, D2H = ONE_WAY
PANELS = [(H2D, "pinned"), (D2H, "pinned"), (H2D, "pageable"), (D2H, "pageable"), (BOTH, "pinned")]
CEILING_METHOD = "cudaMemcpyAsync"
SMALL_BYTES = 1 << 16
PCIE5_X16_GBPS = 64.0  # PCIe 5.0 x16, one direction, before protocol overhead (the H200's host link)


def is_baseline(method: str) -> bool:
    """Baselines are every timed method that is not devcopy's own path."""
    return not method.startswith("devcopy")


def ceilings(result: SweepResult, ceiling_gbps: float | None = None) -> list[tuple[float, str]]:
    """The lines copies cannot beat: the given one; on CUDA the PCIe link and the measured pinned
    cudaMemcpyAsync peak; on the simulated backend the host memcpy peak."""
    if ceiling_gbps is not None:
        return [(ceiling_gbps, f"ceiling {ceiling_gbps:g} GB/s")]
    if not result.simulated:
        measured = [m.gbps for m in result.measurements if (m.method, m.memory) == (CEILING_METHOD, "pinned")]
        lines = [(PCIE5_X16_GBPS, f"PCIe 5.0 x16 link ({PCIE5_X16_GBPS:g} GB/s, theoretical)")]
        return lines + (
            [(max(measured), f"measured ceiling ({CEILING_METHOD} pinned, {max(measured):.1f} GB/s)")]
            if measured
            else []
        )
    peaks = [m.gbps for m in result.measurements if is_baseline(m.method)]
    return [(max(peaks), f"host memcpy peak ({max(peaks):.1f} GB/s, simulated)")] if peaks else []


def _figure(panels: int, width: float, height: float, per_row: int = 3) -> tuple[Figure, list[Axes]]:
    """A figure of `panels` axes, at most `per_row` to a row (five panels stay readable in a 1280 px notebook),
    sharing the y axis; the unused axes of the last row removed. Returns (figure, axes in reading order)."""
    from matplotlib.figure import Figure

    ncols = max(1, min(per_row, panels))
    nrows = max(1, -(-panels // ncols))
    fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
    axes = list(fig.subplots(nrows, ncols, squeeze=False, sharey=True).flat)
    for extra in axes[max(1, panels) :]:
        extra.remove()
    return fig, axes[: max(1, panels)]


def _finish(fig: Figure, path: str | None) -> Figure:
    if path:
        fig.savefig(path, dpi=110)
    return fig


def to_png(fig: Figure) -> bytes:
    """The figure as PNG bytes (`IPython.display.Image(to_png(fig))` shows it in any kernel)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def _binary_size_axis(axis: Axis, sizes: list[int]) -> None:
    """Log2 x axis ticked at powers of four in KiB / MiB / GiB (4 KiB, 16 KiB, ... 1 MiB) instead of 10^n."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    low, high = min(sizes), max(sizes)
    ticks = [1 << k for k in range(0, 41, 2) if low <= 1 << k <= high] or sorted(set(sizes))
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda x, _: format_bytes(x)))


def _iqr_gbps(m: Measurement) -> tuple[float, float]:
    """How far below and above the median GB/s the quartiles of the sample times reach."""
    q1, q3 = (float(q) for q in np.percentile(m.samples, [25, 75]))
    return m.gbps - m.nbytes / q3 / 1e9, (m.nbytes / q1 / 1e9 if q1 > 0 else m.gbps) - m.gbps


def plot_bandwidth(
    result: SweepResult, path: str | None = None, clock: str = "wall", ceiling_gbps: float | None = None
) -> Figure:
    """GB/s against bytes per copy, one panel per (direction, host memory) on `clock`: a line per method with IQR
    error bars, baselines dashed, the ceilings dotted; one legend, below the panels, names lines and ceilings."""
    panels = [p for p in PANELS if any((m.direction, m.memory, m.clock) == (*p, clock) for m in result.measurements)]
    fig, axes = _figure(len(panels), 4.0, 3.4)
    handles: dict[str, Any] = {}  # legend handles: lines, and errorbar containers (not Artists)
    colours = {method: f"C{i}" for i, method in enumerate(sorted({m.method for m in result.measurements}))}
    for ax, (direction, memory) in zip(axes, panels, strict=False):  # no panels: one empty axes
        rows = [m for m in result.measurements if (m.direction, m.memory, m.clock) == (direction, memory, clock)]
        for method in sorted(dict.fromkeys(m.method for m in rows)):
            points = sorted((m for m in rows if m.method == method), key=lambda m: m.nbytes)
            errors = np.array([_iqr_gbps(m) for m in points]).T
            line = ax.errorbar(
                [m.nbytes for m in points],
                [m.gbps for m in points],
                yerr=errors,
                marker="o",
                markersize=3,
                capsize=2,
                color=colours[method],
                linestyle="--" if is_baseline(method) else "-",
            )
            handles.setdefault(method, line)
        for colour, (gbps, label) in zip(("black", "gray", "silver"), ceilings(result, ceiling_gbps), strict=False):
            handles.setdefault(label, ax.axhline(gbps, color=colour, linestyle=":", linewidth=1.2))
        ax.set(xscale="log", yscale="log", xlabel="bytes per copy", title=f"{direction}, {memory} host memory")
        _binary_size_axis(ax.xaxis, [m.nbytes for m in rows])
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes[::3]:
        ax.set_ylabel(f"GB/s ({clock} clock; bars: IQR)")
    fig.suptitle(
        f"copy bandwidth on {result.backend}: {result.device}\nmedians; bars: IQR of the samples "
        "(timings on a shared machine are noisy)",
        fontsize=9,
    )
    if handles:
        fig.legend(
            list(handles.values()),
            list(handles),
            loc="outside lower center",
            ncols=min(3, len(handles)),
            fontsize=7,
            frameon=False,
        )
    return _finish(fig, path)


def plot_latency(result: SweepResult, path: str | None = None) -> Figure:
    """Median microseconds of copies up to 64 KiB (one-way), one panel per clock, legend outside the data: a colour
    per method, circles H2D and squares D2H, solid pinned and dashed pageable host memory."""
    clocks = list(dict.fromkeys(m.clock for m in result.measurements))
    colours = {method: f"C{i % 10}" for i, method in enumerate(sorted({m.method for m in result.measurements}))}
    fig, axes = _figure(len(clocks), 5, 3.6)
    handles: dict[str, Any] = {}  # legend handles: lines, and errorbar containers (not Artists)
    for ax, clock in zip(axes, clocks, strict=False):  # no clocks: one empty axes
        rows = [m for m in result.measurements if m.clock == clock and m.nbytes <= SMALL_BYTES and m.direction != BOTH]
        for key in sorted(dict.fromkeys((m.method, m.direction, m.memory) for m in rows)):
            points = sorted((m.nbytes, m.median * 1e6) for m in rows if (m.method, m.direction, m.memory) == key)
            (line,) = ax.plot(
                [n for n, _ in points],
                [us for _, us in points],
                color=colours[key[0]],
                marker="o" if key[1] == H2D else "s",
                markersize=3,
                linestyle="--" if key[2] == "pageable" else "-",
            )
            handles.setdefault(" ".join(key), line)
        ax.set(xscale="log", xlabel="bytes per copy", ylabel="median µs", title=f"small copies ({clock} clock)")
        if rows:
            _binary_size_axis(ax.xaxis, [m.nbytes for m in rows])
        ax.grid(True, alpha=0.3)
    if handles:
        fig.legend(
            list(handles.values()), list(handles), loc="outside lower center", ncols=3, fontsize=6, frameon=False
        )
    return _finish(fig, path)


def gbps_matrix(result: SweepResult, clock: str | None = None) -> tuple[list[str], list[dict[str, str]]]:
    """The sweep as a compact table, like nvbandwidth's: one row per size (ascending), one column per
    (method, direction, host memory[, clock]), GB/s at the median. Returns (columns, rows)."""
    clocks = list(dict.fromkeys(m.clock for m in result.measurements))
    chosen = [m for m in result.measurements if clock is None or m.clock == clock]

    def series(m: Measurement) -> str:
        return f"{m.method} {m.direction} {m.memory}" + (f" ({m.clock})" if len(clocks) > 1 and not clock else "")

    columns = sorted(dict.fromkeys(series(m) for m in chosen), key=lambda s: (is_baseline(s), s))
    by_size: dict[int, dict[str, str]] = {}
    for m in chosen:
        by_size.setdefault(m.nbytes, {"size": format_bytes(m.nbytes)})[series(m)] = f"{m.gbps:.2f}"
    return ["size", *columns], [by_size[n] for n in sorted(by_size)]


NOISE_NOTE = (
    "Timings on a shared machine are noisy: each point is the median of its samples and its bar spans their "
    "interquartile range (IQR); a long bar or a jagged line is other work on the machine, not the copy. Rerun, or "
    "untick quick for more samples."
)


def reading_notes(result: SweepResult) -> list[str]:
    """What a reader of a sweep should know, in words the panel and the notebooks show: timings are noisy (and which
    measurements spread past SPREAD_WARNING), and why devcopy's smallest copies are below the baseline's GB/s."""
    spread = [m for m in result.measurements if m.warnings]
    notes = [NOISE_NOTE]
    if spread:
        notes.append(
            f"{len(spread)} of {len(result.measurements)} measurements spread by more than {SPREAD_WARNING:.0%} "
            f"of their median (IQR), e.g. {spread[0].warnings[0]}"
        )
    latency = _latency_note(result)
    return notes + ([latency] if latency else [])


def _latency_note(result: SweepResult) -> str:
    """At the smallest size, devcopy's fastest path against the fastest baseline on the same (direction, memory,
    clock): why its GB/s is lower there ('' when it is not)."""
    if not result.measurements:
        return ""
    smallest = min(m.nbytes for m in result.measurements)
    small = [m for m in result.measurements if m.nbytes == smallest]
    ours = min((m for m in small if not is_baseline(m.method)), key=lambda m: m.median, default=None)
    if ours is None:
        return ""
    same = (ours.direction, ours.memory, ours.clock)
    base = min(
        (m for m in small if is_baseline(m.method) and (m.direction, m.memory, m.clock) == same),
        key=lambda m: m.median,
        default=None,
    )
    if base is None or ours.median <= base.median:
        return ""
    return (
        f"Small copies are latency-bound: at {format_bytes(smallest)} one copy through {ours.method} takes "
        f"{format_seconds(ours.median)} against {format_seconds(base.median)} for {base.method}, so its GB/s is "
        f"lower ({ours.gbps:.2f} against {base.gbps:.2f}). A fixed cost per call (devcopy's checks of the device "
        "index, bounds and host buffer, in Python) outweighs moving so few bytes; from about 1 MiB the bytes "
        "dominate and the lines meet."
    )
