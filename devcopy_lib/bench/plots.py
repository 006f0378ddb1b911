"""Plots of a sweep (matplotlib imported here, lazily): bandwidth vs size with the measured ceiling, and small-copy
latency on both clocks. Figures are built without pyplot, so no backend is switched: a notebook kernel keeps its own;
each function returns the Figure and writes it to `path` when one is given."""
from __future__ import annotations

from .harness import SweepResult

PANELS = [("h2d", "pinned"), ("d2h", "pinned"), ("h2d", "pageable"), ("d2h", "pageable"), ("both", "pinned")]
CEILING_METHOD = "cudaMemcpyAsync"
SMALL_BYTES = 1 << 16


def _figure(ncols: int, width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height))
    return fig, fig.subplots(1, ncols, squeeze=False)


def _finish(fig, path: str | None):
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
    return fig


def to_png(fig) -> bytes:
    """The figure as PNG bytes (`IPython.display.Image(to_png(fig))` shows it in any kernel)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def plot_bandwidth(result: SweepResult, path: str | None = None, clock: str = "wall"):
    """GB/s vs bytes on log axes, one panel per (direction, memory), the measured pinned ceiling dashed."""
    panels = [p for p in PANELS if any((m.direction, m.memory, m.clock) == (*p, clock) for m in result.measurements)]
    fig, axes = _figure(len(panels), 4.2, 3.8)
    for ax, (direction, memory) in zip(axes[0], panels):
        rows = [m for m in result.measurements if (m.direction, m.memory, m.clock) == (direction, memory, clock)]
        for method in dict.fromkeys(m.method for m in rows):
            points = sorted((m.nbytes, m.gbps) for m in rows if m.method == method)
            ax.plot(*zip(*points), marker="o", markersize=3, label=method)
        ceiling = [m.gbps for m in result.measurements
                   if (m.method, m.direction, m.memory, m.clock) == (CEILING_METHOD, direction, "pinned", clock)]
        if ceiling:
            ax.axhline(max(ceiling), color="gray", linestyle="--", linewidth=1,
                       label=f"ceiling {max(ceiling):.0f} GB/s")
        ax.set(xscale="log", yscale="log", xlabel="bytes moved", title=f"{direction}, {memory} ({clock})")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("GB/s")
    fig.suptitle(f"{result.device} ({result.backend})", fontsize=9)
    return _finish(fig, path)


def plot_latency(result: SweepResult, path: str | None = None):
    """Median microseconds of copies up to 64 KiB (one-way), one panel per clock."""
    clocks = list(dict.fromkeys(m.clock for m in result.measurements))
    fig, axes = _figure(len(clocks), 6, 4)
    for ax, clock in zip(axes[0], clocks):
        rows = [m for m in result.measurements
                if m.clock == clock and m.nbytes <= SMALL_BYTES and m.direction != "both"]
        for key in dict.fromkeys((m.method, m.direction, m.memory) for m in rows):
            points = sorted((m.nbytes, m.median * 1e6) for m in rows if (m.method, m.direction, m.memory) == key)
            ax.plot(*zip(*points), marker="o", markersize=3, label=" ".join(key))
        ax.set(xscale="log", xlabel="bytes", ylabel="median µs", title=f"small copies ({clock} clock)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=5, ncol=2)
    return _finish(fig, path)
