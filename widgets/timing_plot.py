"""Bandwidth against size for a sweep: one line per (method, direction, memory, clock), baselines dashed, and the
ceiling as a horizontal line. matplotlib is imported only when a plot is drawn."""
from __future__ import annotations

from collections import defaultdict

from .timing_state import ceilings, is_baseline


def bandwidth_figure(result, ceiling_gbps: float | None = None):
    """A matplotlib Figure of GB/s against bytes (log x) for `result` (a SweepResult)."""
    from matplotlib.figure import Figure

    lines: dict[tuple, list] = defaultdict(list)
    for m in result.measurements:
        lines[(m.method, m.direction, m.memory, m.clock)].append((m.nbytes, m.gbps))
    fig = Figure(figsize=(7.5, 3.8), layout="constrained")
    ax = fig.add_subplot()
    for (method, direction, memory, clock), points in lines.items():
        xs, ys = zip(*sorted(points))
        ax.plot(xs, ys, "--" if is_baseline(method) else "-", marker="o", markersize=3,
                label=f"{method} {direction} {memory} ({clock})")
    for gbps, label in ceilings(result, ceiling_gbps):
        ax.axhline(gbps, color="black", linewidth=1, linestyle=":", label=label)
    ax.set(xscale="log", xlabel="bytes per copy", ylabel="GB/s",
           title=f"copy bandwidth on {result.backend} ({result.device})")
    ax.legend(fontsize=7, loc="upper left")
    return fig
