"""What the explorer shows, from a placed program: table rows, totals, savings. Pure functions."""

from __future__ import annotations

from dataclasses import asdict

from devcopy_lib.names import Direction, Strategy, format_bytes

H2D, D2H = Direction.H2D, Direction.D2H
TABLE_COLUMNS = ("name", "kind", "device", "bytes", "predicted", "reason")


def table_rows(report) -> list[dict]:
    """The decision table: one row per node, a copy's predicted time in microseconds."""
    return [
        {
            **asdict(row),
            "bytes": format_bytes(row.bytes),
            "predicted": f"{row.predicted_s * 1e6:.1f} us" if row.predicted_s is not None else "",
        }
        for row in report.rows
    ]


def totals_line(report) -> str:
    """`delegates 1 · H2D 2 (128 B) · D2H 1 (64 B)` plus the predicted copy time when a cost model priced them."""
    line = (
        f"strategy {report.strategy} · delegates {report.delegates} · "
        f"H2D {report.copies[H2D]} ({format_bytes(report.copy_bytes[H2D])}) · "
        f"D2H {report.copies[D2H]} ({format_bytes(report.copy_bytes[D2H])}) · "
        f"constants {format_bytes(report.constant_bytes)}"
    )
    if report.predicted_copy_s is not None:
        line += f" · predicted copy time {report.predicted_copy_s * 1e6:.1f} us"
    return line


def cost_model_line(cost_model) -> str:
    """Where the predicted copy times come from."""
    source = getattr(cost_model, "source", {}) or {}
    where = f"{source['device']} ({source.get('method', '?')}, {source.get('clock', '?')} clock)" if source else "given"
    return f"copy times: predicted by the cost model measured on {where}, pinned host memory"


def _by_strategy(report) -> dict[str, tuple[dict, dict, int]]:
    """strategy -> (copies, copy bytes, peak device bytes relative to the report's own strategy)."""
    table = {report.strategy: (report.copies, report.copy_bytes, 0)}
    for other in report.comparison:
        table[other["strategy"]] = (other["copies"], other["copy_bytes"], -other["extra_device_bytes"])
    return table


def dedupe_line(report) -> str:
    """What dedupe saves against ExecuTorch's strategy (copies, bytes per execution) and the device memory it
    costs, whichever strategy the report placed with."""
    table = _by_strategy(report)
    (ex_copies, ex_bytes, ex_peak), (de_copies, de_bytes, de_peak) = table[Strategy.EXECUTORCH], table[Strategy.DEDUPE]
    saved = {k: ex_copies[k] - de_copies[k] for k in ex_copies}
    saved_bytes = {k: ex_bytes[k] - de_bytes[k] for k in ex_bytes}
    return (
        f"dedupe vs executorch: saves {saved[H2D]} H2D ({format_bytes(saved_bytes[H2D])}) and "
        f"{saved[D2H]} D2H ({format_bytes(saved_bytes[D2H])}) per execution; holds "
        f"{format_bytes(de_peak - ex_peak)} more device memory at peak"
    )


def executorch_line(counts: dict) -> str:
    """ExecuTorch's own counts for the same partition, as one line."""
    return f"ExecuTorch 1.5.1: delegates {counts['delegates']} · H2D {counts[H2D]} · D2H {counts[D2H]}"
