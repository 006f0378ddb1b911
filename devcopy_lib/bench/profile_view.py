"""Where a method call's time goes: a table and a timeline of `Method.profile` rows (matplotlib, imported lazily,
figures built without pyplot like bench/plots.py), with each copy's cost-model prediction beside its measurement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..names import format_bytes, format_seconds

if TYPE_CHECKING:
    from matplotlib.figure import Figure

KIND_COLORS = {"copy": "tab:blue", "delegate": "tab:orange", "kernel": "tab:green"}
COLUMNS = ("#", "kind", "op", "bytes", "measured", "share", "predicted", "pred/meas")


def profile_table(rows: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """One display row per instruction (strings, keyed by COLUMNS): the measured time, its share of the call, and
    for copies the price (`predicted_s`, from bench.cost_model's pricer) with the model's out-of-sample error for
    its size (`predicted_error`) and its ratio to the wall-clock time; a last row sums the call. Times in us / ms
    (names.format_seconds)."""
    total = sum(row["measured_s"] for row in rows) or 1.0
    table = []
    for row in rows:
        predicted, wall = row.get("predicted_s"), row.get("wall_s") or row["measured_s"]
        error = f" ±{row['predicted_error']:.0%}" if predicted is not None and row.get("predicted_error") else ""
        table.append(
            {
                "#": str(row["index"]),
                "kind": row["kind"],
                "op": row["op"],
                "bytes": format_bytes(row["bytes"]) if row.get("bytes") is not None else "",
                "measured": format_seconds(row["measured_s"]),
                "share": f"{row['measured_s'] / total:.0%}",
                "predicted": format_seconds(predicted) + error,
                "pred/meas": f"{predicted / wall:.2f}" if predicted is not None and wall else "",  # a wall-clock model
            }
        )
    table.append({**dict.fromkeys(COLUMNS, ""), "#": "total", "measured": format_seconds(total), "share": "100%"})
    return table


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """`profile_table(rows)` as a Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(r[c] for c in COLUMNS) + " |" for r in profile_table(rows)]
    return "\n".join(lines)


def plot_timeline(
    rows: Sequence[dict[str, Any]], path: str | None = None, title: str = "one call, instruction by instruction"
) -> Figure:
    """Instructions laid end to end on a time axis (µs), coloured by kind; a copy's predicted time is drawn as a
    black outline over its bar. Returns the Figure (written to `path` when given)."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    fig = Figure(figsize=(9, 0.35 * len(rows) + 1.4))
    ax = fig.subplots()
    start = 0.0
    for row in rows:
        width = row["measured_s"] * 1e6
        y = row["index"]
        ax.barh(y, width, left=start, color=KIND_COLORS.get(row["kind"], "gray"), height=0.7)
        if row.get("predicted_s") is not None:
            ax.barh(y, row["predicted_s"] * 1e6, left=start, fill=False, edgecolor="black", height=0.7)
        start += width
    ax.set_yticks([row["index"] for row in rows], [f"{row['index']} {row['op']}"[:48] for row in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("µs from the call's first instruction")
    ax.set_title(title, fontsize=9)
    handles = [Patch(color=c, label=k) for k, c in KIND_COLORS.items()]
    ax.legend(
        handles=handles + [Patch(fill=False, edgecolor="black", label="predicted (copies)")],
        fontsize=7,
        loc="lower right",
    )
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=110)
    return fig
