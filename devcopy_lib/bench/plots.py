"""Plots of a sweep (matplotlib imported here, lazily): bandwidth vs size with the measured ceiling, and small-copy
latency on both clocks."""
from __future__ import annotations

from .harness import SweepResult

PANELS = [("h2d", "pinned"), ("d2h", "pinned"), ("h2d", "pageable"), ("d2h", "pageable"), ("both", "pinned")]
CEILING_METHOD = "cudaMemcpyAsync"
SMALL_BYTES = 1 << 16


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_bandwidth(result: SweepResult, path: str, clock: str = "wall") -> None:
    """GB/s vs bytes on log axes, one panel per (direction, memory), the measured pinned ceiling dashed."""
    plt = _pyplot()
    panels = [p for p in PANELS if any((m.direction, m.memory, m.clock) == (*p, clock) for m in result.measurements)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
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
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_latency(result: SweepResult, path: str) -> None:
    """Median microseconds of copies up to 64 KiB (one-way), one panel per clock."""
    plt = _pyplot()
    clocks = list(dict.fromkeys(m.clock for m in result.measurements))
    fig, axes = plt.subplots(1, len(clocks), figsize=(6 * len(clocks), 4), squeeze=False)
    for ax, clock in zip(axes[0], clocks):
        rows = [m for m in result.measurements
                if m.clock == clock and m.nbytes <= SMALL_BYTES and m.direction != "both"]
        for key in dict.fromkeys((m.method, m.direction, m.memory) for m in rows):
            points = sorted((m.nbytes, m.median * 1e6) for m in rows if (m.method, m.direction, m.memory) == key)
            ax.plot(*zip(*points), marker="o", markersize=3, label=" ".join(key))
        ax.set(xscale="log", xlabel="bytes", ylabel="median µs", title=f"small copies ({clock} clock)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=5, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
