"""What the explorer shows, from a placed program: table rows, totals, savings. Pure functions."""

from __future__ import annotations

from dataclasses import asdict

from devcopy_lib.names import CopyRole, Direction, Strategy, format_bytes, format_seconds, loaded_text

H2D, D2H = Direction.H2D, Direction.D2H
TABLE_COLUMNS = ("name", "kind", "device", "bytes", "predicted", "reason")


def table_rows(report) -> list[dict]:
    """The decision table: one row per node, a copy's predicted time in microseconds."""
    return [
        {
            **asdict(row),
            "bytes": format_bytes(row.bytes),
            "predicted": format_seconds(row.predicted_s),
        }
        for row in report.rows
    ]


ROLES = (CopyRole.CACHE, CopyRole.WEIGHTS, CopyRole.ACTIVATIONS)
PLACEMENT_COLUMNS = ("placement", *ROLES, "total")


def placement_rows(report) -> list[dict]:
    """The same program placed plain, with hoisting and with resident buffers, side by side: per placement the
    bytes each role copies per call (H2D / D2H), the report's `bytes_by_placement` in the panel's units."""
    rows = []
    for name, entry in report.bytes_by_placement.items():
        if "error" in entry:
            rows.append({"placement": name, **dict.fromkeys(ROLES, ""), CopyRole.CACHE: "refused", "total": ""})
            continue
        both = {**entry["copy_bytes_by_role"], "total": entry["copy_bytes"]}
        rows.append(
            {
                "placement": name,
                **{k: f"{format_bytes(v.get(H2D, 0))} / {format_bytes(v.get(D2H, 0))}" for k, v in both.items()},
            }
        )
    return rows


def totals_line(report) -> str:
    """`delegates 1 · H2D 2 (128 B) · D2H 1 (64 B)` plus the predicted copy time when a cost model priced them."""
    line = (
        f"strategy {report.strategy} · delegates {report.delegates} · "
        f"H2D {report.copies[H2D]} ({format_bytes(report.copy_bytes[H2D])}) · "
        f"D2H {report.copies[D2H]} ({format_bytes(report.copy_bytes[D2H])}) · "
        f"{loaded_text(report.constant_bytes, report.buffers)}"
    )
    if report.predicted_copy_s is not None:
        line += f" · predicted copy time {format_seconds(report.predicted_copy_s)}"
    return line


def cost_model_line(cost_model) -> str:
    """What the predicted copy times assume (backend, host memory kind, clock, machine): the pricer's own words,
    the same line `devcopy place` and `devcopy run --profile` print."""
    describe = getattr(cost_model, "describe", None)
    return describe() if callable(describe) else "copy times: predicted by the given cost model"


def dedupe_line(report) -> str:
    """What dedupe saves against ExecuTorch's strategy per call, and the device memory it holds for it, in the
    report's one wording (`devcopy place` prints the same), whichever strategy the report placed with."""
    return report.savings(Strategy.DEDUPE, Strategy.EXECUTORCH) or "dedupe or executorch refused this program"


def executorch_line(counts: dict) -> str:
    """ExecuTorch's own counts for the same partition, as one line."""
    return f"ExecuTorch 1.5.1: delegates {counts['delegates']} · H2D {counts[H2D]} · D2H {counts[D2H]}"


def pte_totals_line(program) -> str:
    """An ExecuTorch program's line in the explorer's totals' words: plan, delegates and their devices, copies per
    direction with bytes, instructions, planned bytes per device."""
    copies = program.copies()
    devices = sorted({str(d.device or "cpu") for d in program.delegates})
    planned: dict[str, int] = {}
    for index, size in enumerate(program.buffer_sizes):
        device = str(program.buffer_devices.get(index, "cpu"))
        planned[device] = planned.get(device, 0) + size
    return (
        f"ExecuTorch program {program.plan!r} · delegates {len(program.delegates)}"
        f"{' on ' + ', '.join(devices) if devices else ''} · "
        f"H2D {copies[H2D][0]} ({format_bytes(copies[H2D][1])}) · "
        f"D2H {copies[D2H][0]} ({format_bytes(copies[D2H][1])}) · "
        f"instructions {len(program.instructions)} · planned "
        + ", ".join(f"{device} {format_bytes(n)}" for device, n in sorted(planned.items()) if n)
    )
