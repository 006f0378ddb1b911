"""A placement report as a file: one self-contained HTML page (inline CSS and SVG, nothing fetched from the
network, readable offline and attachable to a bug) or JSON (`PlacementReport.to_dict()`, plus where the numbers come
from). Both are built from the report's dict, so the CLI's `--json` object renders the same way as a report."""

from __future__ import annotations

import datetime
import html
import importlib.metadata
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..names import DIRECTIONS, Direction, basis_text, format_bytes
from ..runtime.files import write_text
from .diff import DIFF_COLUMNS, diff_lines, diff_rows
from .report import PlacementReport, loaded_text, placements_rows, roles_text

REPORT_SUFFIXES = (".html", ".htm", ".json")
PRICED_MEMORY = "pinned"  # the host memory kind a report prices its copies for (placement/report.py)
KIND_COLOURS = {"input": "#cfd8dc", "output": "#cfd8dc", "cpu_op": "#c8e6c9", "delegate": "#ffe0b2"}
COPY_COLOUR = "#bbdefb"
CSS = (
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222;background:#fff}"
    "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
    "table{border-collapse:collapse;font-family:monospace;font-size:12px}"
    "td,th{padding:2px 12px 2px 0;text-align:left;border-bottom:1px solid #e0e0e0;vertical-align:top}"
    "tr.copy td{background:" + COPY_COLOUR + "}dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px}"
    "dt{font-weight:bold}dd{margin:0;font-family:monospace}svg text{font-family:monospace;font-size:11px}"
)


def provenance(
    model: str | None = None,
    cost_model: Any = None,
    backend: str | None = None,
    pricing: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Where a report's numbers come from: devcopy's version, when, the model, and the one record of what the copy
    prices assume (`pricing`: the report's own, `PlacementReport.pricing`, so every surface carries the same record
    unchanged), with the backend it names, the host memory kind it prices and the cost model's `source` (from
    `cost_model`, or the dict given). A bare cost model with no basis prices pinned host memory."""
    source = cost_model if isinstance(cost_model, Mapping) else getattr(cost_model, "source", None)
    priced = dict(pricing) if pricing else None
    return {
        "generator": f"devcopy {importlib.metadata.version('devcopy')}",
        "generated_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "model": model,
        "backend": (priced or {}).get("backend") or backend,
        "cost_model": dict(source) if source is not None else None,
        "pricing": priced,
        "priced_memory": (priced or {}).get("memory") or (PRICED_MEMORY if source is not None else None),
    }


def report_document(
    report: PlacementReport | Mapping[str, Any],
    model: str | None = None,
    cost_model: Any = None,
    backend: str | None = None,
) -> dict[str, Any]:
    """The report's dict (`PlacementReport.to_dict()`, or a dict that holds it, such as `devcopy place --json`'s)
    with a `provenance` entry: what a JSON report holds and an HTML report shows."""
    data = report.to_dict() if isinstance(report, PlacementReport) else dict(report)
    return {**data, "provenance": provenance(model or data.get("model"), cost_model, backend, data.get("pricing"))}


def export_report(
    report: PlacementReport | Mapping[str, Any],
    path: str,
    model: str | None = None,
    cost_model: Any = None,
    backend: str | None = None,
) -> str:
    """Write the report to `path`: HTML for `.html`/`.htm`, JSON for `.json` (written whole or not at all).
    Returns the absolute path."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in REPORT_SUFFIXES:
        raise ValueError(
            f"Report path {path!r} ends in {suffix or 'no suffix'!r}; give one ending in {', '.join(REPORT_SUFFIXES)}"
        )
    document = report_document(report, model, cost_model, backend)
    text = json.dumps(document, indent=1, allow_nan=False) if suffix == ".json" else report_html(document)
    return write_text(path, text)


# ---- HTML ----------------------------------------------------------------------------------------------------
def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], copy_rows: bool = False) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join(
        f"<tr{' class=copy' if copy_rows and row.get('kind') in DIRECTIONS else ''}>"
        + "".join(f"<td>{_e(row.get(c))}</td>" for c in columns)
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _us(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e6:.1f} us"


def _facts(facts: Sequence[tuple[str, Any]]) -> str:
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts) + "</dl>"


def _provenance_html(data: Mapping[str, Any]) -> str:
    p = data["provenance"]
    source = p["cost_model"]
    if p.get("pricing"):  # the report's own record, in the words every surface uses
        priced = basis_text(p["pricing"])
    elif source:
        priced = (
            f"{source.get('device', '?')} ({source.get('method', '?')}, {source.get('clock', '?')} clock, "
            f"{p['priced_memory']} host memory)"
        )
    else:
        priced = "not priced: no cost model was given"
    return _facts(
        [
            ("model", p["model"] or "(not named)"),
            ("strategy", data["strategy"]),
            ("delegated ops", ", ".join(data["delegate_ops"]) or "none"),
            ("options", ", ".join(f"{k}={v}" for k, v in data["options"].items())),
            ("backend", p["backend"] or "none: placement runs on no device backend"),
            ("copy prices", priced),
            *([("cost model measured", source.get("date"))] if source and source.get("date") else []),
            ("generated", f"{p['generated_utc']} UTC by {p['generator']}"),
        ]
    )


def _totals_html(data: Mapping[str, Any]) -> str:
    copies, nbytes = data["copies"], data["copy_bytes"]
    per_direction = [
        (f"{Direction(d).name} copies per call", f"{copies[d]} ({format_bytes(nbytes[d])})")
        for d in DIRECTIONS
        if d in copies
    ]
    return _facts(
        [
            ("delegates", data["delegates"]),
            *per_direction,
            ("predicted copy time per call", _us(data["predicted_copy_s"]) or "not priced"),
            ("constants and mutable buffers", loaded_text(data["constant_bytes"], data.get("buffers", ()))),
            ("device memory at peak", format_bytes(data["device_peak_bytes"])),
            *[(f"bytes per call {k.replace('_', ' ')}", format_bytes(v)) for k, v in data["per_call_bytes"].items()],
            ("bytes by role (KV cache, weights-derived, activations)", roles_text(data["copy_bytes_by_role"])),
        ]
    )


def _savings(ours: str, theirs: str, saved: Mapping[str, int], saved_bytes: Mapping[str, int]) -> str:
    """One way of saying it, per direction: `dedupe saves 1 H2D, 256 B`; `same copies` when nothing differs."""
    words = []
    for direction in (d for d in DIRECTIONS if saved.get(d)):
        winner = ours if saved[direction] > 0 else theirs
        count, nbytes = abs(saved[direction]), abs(saved_bytes.get(direction, 0))
        words.append(f"{winner} saves {count} {Direction(direction).name}, {format_bytes(nbytes)}")
    return "; ".join(words) or "same copies"


def _comparison_html(data: Mapping[str, Any]) -> str:
    rows = [{"strategy": f"{data['strategy']} (this report)", **_strategy_cells(data["copies"], data["copy_bytes"])}]
    for other in data["comparison"]:
        if "error" in other:
            rows.append({"strategy": other["strategy"], "H2D": f"refused: {other['error']}"})
            continue
        savings = _savings(data["strategy"], other["strategy"], other["copies_saved"], other["bytes_saved"])
        rows.append(
            {
                "strategy": other["strategy"],
                **_strategy_cells(other["copies"], other["copy_bytes"]),
                "per call": savings,
                "device peak vs this report": format_bytes(-other["extra_device_bytes"]),
            }
        )
    return _table(rows, ["strategy", "H2D", "D2H", "D2D", "per call", "device peak vs this report"])


def _strategy_cells(copies: Mapping[str, int], nbytes: Mapping[str, int]) -> dict[str, str]:
    return {Direction(d).name: f"{copies[d]} ({format_bytes(nbytes[d])})" for d in DIRECTIONS if d in copies}


def _lanes_svg(nodes: Sequence[Mapping[str, Any]]) -> str:
    """The placed graph in program order, one lane per device: each node a box in its device's lane (copies
    blue, delegates orange, CPU ops green), its reason as the box's tooltip."""
    devices = sorted({n["device"] for n in nodes}, key=lambda d: (d != "cpu", d))
    lane, row = 260, 18
    width, height = lane * len(devices) + 8, row * len(nodes) + 28
    parts = [
        f'<text x="{4 + i * lane}" y="14" font-weight="bold">{_e(device)}</text>' for i, device in enumerate(devices)
    ]
    for i, node in enumerate(nodes):
        x, y = 4 + devices.index(node["device"]) * lane, 22 + i * row
        colour = COPY_COLOUR if node["kind"] in DIRECTIONS else KIND_COLOURS.get(node["kind"], "#eeeeee")
        label = f"{node['name'][:26]} {format_bytes(node['bytes']) if node['bytes'] else ''}"
        parts.append(
            f"<g><title>{_e(node['name'])}: {_e(node['reason'])}</title>"
            f'<rect x="{x}" y="{y}" width="{lane - 10}" height="{row - 3}" rx="3" fill="{colour}"/>'
            f'<text x="{x + 4}" y="{y + 11}">{_e(label)}</text></g>'
        )
    return (
        f'<svg width="{width}" height="{height}" role="img" aria-label="placed graph by device">{"".join(parts)}</svg>'
    )


def _node_rows(nodes: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**n, "bytes": format_bytes(n["bytes"]), "predicted": _us(n.get("predicted_s"))} for n in nodes]


def diff_html(diff: Mapping[str, Any]) -> str:
    """A placement diff (placement/diff.py) as an HTML table of the copies that appear, vanish or change,
    under one line of totals."""
    lines = diff_lines(dict(diff))
    return f"<p>{_e(lines[0])}</p>{_table(diff_rows(dict(diff)), DIFF_COLUMNS)}<p>{_e(lines[-1].strip())}</p>"


def report_html(document: Mapping[str, Any]) -> str:
    """A `report_document` as one HTML page: provenance, totals, the strategy comparison, cross-device values,
    suggestions, a diff when the document holds one, the graph by device lanes, and every node's row."""
    model = document["provenance"]["model"] or "model"
    title = f"devcopy placement report: {model} ({document['strategy']})"
    sections = [
        ("Where these numbers come from", _provenance_html(document)),
        ("Totals", _totals_html(document)),
        ("Strategies compared", _comparison_html(document)),
    ]
    if document.get("bytes_by_placement"):
        rows = [
            {k: format_bytes(v) if isinstance(v, int) else v for k, v in row.items()}
            for row in placements_rows(document["bytes_by_placement"])
        ]
        shown = [c for c in next((r for r in rows if "error" not in r), {"placement": ""})] + (
            ["error"] if any("error" in r for r in rows) else []
        )
        sections.append(("Bytes per call by role: plain, hoisted, resident buffers", _table(rows, shown)))
    if document.get("buffers"):
        buffer_columns = ("name", "bytes", "device", "resident", "reason")
        sections.append(("Mutable buffers", _table(document["buffers"], buffer_columns)))
    if document.get("cross_device"):
        columns = ("value", "src", "dst", "bytes", "chosen", "peer_access")
        sections.append(("Values crossing devices", _table(document["cross_device"], columns)))
    if document.get("suggestions"):
        sections.append(("Suggestions", "".join(f"<p>{_e(s)}</p>" for s in document["suggestions"])))
    if document.get("diff"):
        sections.append(("Diff", diff_html(document["diff"])))
    sections.append(("Graph by device (program order; hover a box for its reason)", _lanes_svg(document["nodes"])))
    columns = ("name", "kind", "device", "bytes", "predicted", "reason")
    sections.append(("Nodes", _table(_node_rows(document["nodes"]), columns, copy_rows=True)))
    body = "".join(f"<h2>{_e(heading)}</h2>{content}" for heading, content in sections)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{CSS}</style></head><body><h1>{_e(title)}</h1>{body}</body></html>\n"
    )
