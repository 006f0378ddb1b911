"""Two placements of one model side by side (two strategies, or two delegate sets): which copies appear, which
vanish, which change bytes or when they run, and how the totals move.

A copy is matched by the value it carries, not by the name the pass generated for it: (the value it moves - the
first non-copy node behind it, so a host hop's second leg names the value, not the first leg's node -, its direction,
the device it writes). Values keep their names across placements of one exported program (a delegate's output is
named after the node it replaces), so the same copy in both is the same key. Two copies with one key (ExecuTorch's
strategy copies a value once per delegate that reads it) are paired in graph order; the extra ones are what appears
or vanishes.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ..lowering.nodes import device_of, node_arg, node_kind
from ..names import DIRECTIONS, Direction, format_bytes
from .hoist import HOISTED
from .report import value_bytes

if TYPE_CHECKING:
    from torch import fx

    from .place import PlacedProgram

CHANGED_FIELDS = ("bytes", "per_call")  # what a matched copy can change between two placements


def _carried_value(node: fx.Node) -> fx.Node:
    """The first non-copy node behind a copy: the value it moves."""
    while node_kind(node) in DIRECTIONS:
        node = node_arg(node)
    return node


def copy_records(placed: PlacedProgram) -> list[dict[str, Any]]:
    """Every copy node of a placed graph as `{value, direction, device, node, bytes, per_call, predicted_s}`, in
    graph order; `per_call` is False for a hoisted copy (made once, at load)."""
    assert placed.report is not None  # place_devices always reports
    predicted = {row.name: row.predicted_s for row in placed.report.rows}
    return [
        {
            "value": _carried_value(node).name,
            "direction": str(node_kind(node)),
            "device": str(device_of(node)),
            "node": node.name,
            "bytes": value_bytes(node.meta.get("val")),
            "per_call": not node.meta.get(HOISTED),
            "predicted_s": predicted.get(node.name),
        }
        for node in placed.graph_module.graph.nodes
        if node_kind(node) in DIRECTIONS
    ]


def _key(record: dict[str, Any]) -> tuple[str, str, str]:
    return record["value"], record["direction"], record["device"]


def _by_key(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
    grouped: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        grouped[_key(record)].append(record)
    return grouped


def _summary(placed: PlacedProgram, label: str) -> dict[str, Any]:
    """What the diff shows of one side: its label, strategy, delegated ops and totals."""
    report = placed.report
    assert report is not None
    return {
        "label": label,
        "strategy": report.strategy,
        "delegate_ops": list(report.delegate_ops),
        "delegates": report.delegates,
        "copies": dict(report.copies),
        "copy_bytes": dict(report.copy_bytes),
        "device_peak_bytes": report.device_peak_bytes,
        "predicted_copy_s": report.predicted_copy_s,
    }


def _difference(a: dict[str, Any], b: dict[str, Any], field: str) -> Any:
    """b minus a for a number or a per-direction dict; None where either side has none."""
    if a[field] is None or b[field] is None:
        return None
    if isinstance(a[field], dict):
        return {k: b[field].get(k, 0) - a[field].get(k, 0) for k in {**a[field], **b[field]}}
    return b[field] - a[field]


def _labels(a: PlacedProgram, b: PlacedProgram) -> tuple[str, str]:
    """Default labels: the strategies when they differ, else the delegate ops, else `a` / `b`."""
    if a.strategy != b.strategy:
        return a.strategy, b.strategy
    if list(a.delegate_ops) != list(b.delegate_ops):
        return ",".join(a.delegate_ops) or "no ops", ",".join(b.delegate_ops) or "no ops"
    return "a", "b"


def placement_diff(a: PlacedProgram, b: PlacedProgram, labels: tuple[str, str] | None = None) -> dict[str, Any]:
    """What changes from placement `a` to placement `b` of the same model: `appear` (copies only in b), `vanish`
    (only in a), `changed` (a matched copy whose bytes or per-call status differ: `{value, direction, device, a, b}`),
    `same` (matched, unchanged), `a` / `b` (each side's totals) and `totals` (b minus a). JSON-ready."""
    label_a, label_b = labels or _labels(a, b)
    mine, theirs = _by_key(copy_records(a)), _by_key(copy_records(b))
    appear, vanish, changed, same = [], [], [], 0
    for key in dict.fromkeys([*mine, *theirs]):
        left, right = mine.get(key, []), theirs.get(key, [])
        vanish.extend(left[len(right) :])
        appear.extend(right[len(left) :])
        for old, new in zip(left, right, strict=False):  # the unpaired rest appears or vanishes
            if any(old[f] != new[f] for f in CHANGED_FIELDS):
                changed.append({"value": key[0], "direction": key[1], "device": key[2], "a": old, "b": new})
            else:
                same += 1
    side_a, side_b = _summary(a, label_a), _summary(b, label_b)
    totals = {
        f: _difference(side_a, side_b, f)
        for f in ("delegates", "copies", "copy_bytes", "device_peak_bytes", "predicted_copy_s")
    }
    return {
        "a": side_a,
        "b": side_b,
        "appear": appear,
        "vanish": vanish,
        "changed": changed,
        "same": same,
        "totals": totals,
    }


def is_empty(diff: dict[str, Any]) -> bool:
    """No copy appears, vanishes or changes."""
    return not (diff["appear"] or diff["vanish"] or diff["changed"])


def _copy_words(record: dict[str, Any]) -> str:
    when = "" if record["per_call"] else ", once at load"
    return (
        f"{record['value']} -> {record['device']} {record['direction'].upper()} "
        f"({record['node']}, {format_bytes(record['bytes'])}{when})"
    )


def _change_words(change: dict[str, Any]) -> str:
    old, new = change["a"], change["b"]
    parts = [f"{format_bytes(old['bytes'])} -> {format_bytes(new['bytes'])}"] if old["bytes"] != new["bytes"] else []
    if old["per_call"] != new["per_call"]:
        parts.append("per call -> once at load" if old["per_call"] else "once at load -> per call")
    return f"{change['value']} -> {change['device']} {change['direction'].upper()}: {', '.join(parts)}"


def _totals_words(diff: dict[str, Any]) -> str:
    """`H2D 6 -> 5 (-1, -64 B) · D2H 2 -> 2 (+0, +0 B)`, plus the predicted copy time where both are priced."""
    a, b, totals = diff["a"], diff["b"], diff["totals"]
    parts = []
    for direction in (d for d in DIRECTIONS if d in a["copies"] or d in b["copies"]):
        count, nbytes = totals["copies"][direction], totals["copy_bytes"][direction]
        sign = "-" if nbytes < 0 else "+"
        parts.append(
            f"{Direction(direction).name} {a['copies'].get(direction, 0)} -> {b['copies'].get(direction, 0)} "
            f"({count:+d}, {sign}{format_bytes(abs(nbytes))})"
        )
    if totals["predicted_copy_s"] is not None:
        parts.append(f"predicted copy time {totals['predicted_copy_s'] * 1e6:+.1f} us")
    return " · ".join(parts)


def diff_lines(diff: dict[str, Any]) -> list[str]:
    """The diff for people, one fact a line: each copy that appears, vanishes or changes, then the totals."""
    a, b = diff["a"]["label"], diff["b"]["label"]
    if is_empty(diff):
        lines = [f"diff {a} -> {b}: the same copies ({diff['same']}); none appears, vanishes or changes"]
    else:
        lines = [f"diff {a} -> {b}: {len(diff['appear'])} copies appear, {len(diff['vanish'])} vanish, "]
        lines[0] += f"{len(diff['changed'])} change, {diff['same']} the same"
    lines += [f"  + {_copy_words(r)}  (only in {b})" for r in diff["appear"]]
    lines += [f"  - {_copy_words(r)}  (only in {a})" for r in diff["vanish"]]
    lines += [f"  ~ {_change_words(c)}" for c in diff["changed"]]
    lines.append(f"  totals per call: {_totals_words(diff)}")
    return lines


DIFF_COLUMNS = ("change", "value", "direction", "device", "node", "bytes", "per call")


def diff_rows(diff: dict[str, Any]) -> list[dict[str, str]]:
    """The diff as table rows (DIFF_COLUMNS): one per copy that appears, vanishes or changes."""

    def row(change: str, record: dict[str, Any], nbytes: str, per_call: str) -> dict[str, str]:
        return {
            "change": change,
            "value": record["value"],
            "direction": record["direction"].upper(),
            "device": record["device"],
            "node": record["node"],
            "bytes": nbytes,
            "per call": per_call,
        }

    def when(record: dict[str, Any]) -> str:
        return "yes" if record["per_call"] else "once at load"

    rows = [row(f"only in {diff['b']['label']}", r, format_bytes(r["bytes"]), when(r)) for r in diff["appear"]]
    rows += [row(f"only in {diff['a']['label']}", r, format_bytes(r["bytes"]), when(r)) for r in diff["vanish"]]
    rows += [
        row(
            "changed",
            c["b"],
            f"{format_bytes(c['a']['bytes'])} -> {format_bytes(c['b']['bytes'])}",
            f"{when(c['a'])} -> {when(c['b'])}",
        )
        for c in diff["changed"]
    ]
    return rows
