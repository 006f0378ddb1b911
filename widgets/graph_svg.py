"""The placed graph as an SVG drawing: columns by depth, nodes coloured by device, copies marked with bytes/time."""
from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

COPY_KINDS = ("h2d", "d2h")
DEVICE_COLOURS = {"cpu": "#e3eaf5", "cuda:0": "#c8e6c9", "cuda:1": "#ffe0b2", "cuda:2": "#e1bee7"}
OTHER_DEVICE = "#f0f4c3"
BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 128, 44, 26, 12, 8


def depths(names: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Column of each node: 0 for nodes without inputs, else one more than its deepest input (names are topological)."""
    inputs: dict[str, list[str]] = {n: [] for n in names}
    for src, dst in edges:
        inputs[dst].append(src)
    depth: dict[str, int] = {}
    for name in names:
        depth[name] = 1 + max((depth[s] for s in inputs[name]), default=-1)
    return depth


def layout(names: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, tuple[int, int]]:
    """Top-left corner of each node's box."""
    rows_used: dict[int, int] = {}
    where = {}
    for name, column in depths(names, edges).items():
        row = rows_used.get(column, 0)
        rows_used[column] = row + 1
        where[name] = (PAD + column * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
    return where


def _label(node: Mapping) -> list[str]:
    if node["kind"] in COPY_KINDS:
        time_s = node.get("predicted_s")
        time = f", {time_s * 1e6:.1f} us" if time_s is not None else ""
        return [f"{node['kind'].upper()} {node['name']}", f"{node.get('bytes', 0)} B{time}"]
    return [node["name"], f"{node['kind']} @ {node['device']}"]


def _box(node: Mapping, x: int, y: int) -> str:
    copy = node["kind"] in COPY_KINDS
    fill = DEVICE_COLOURS.get(node["device"], OTHER_DEVICE)
    stroke = 'stroke="#c62828" stroke-width="2.5"' if copy else 'stroke="#455a64" stroke-width="1"'
    lines = "".join(
        f'<text x="{x + BOX_W / 2}" y="{y + 18 + 16 * i}" text-anchor="middle" font-size="11" '
        f'font-family="monospace">{html.escape(text[:20])}</text>'
        for i, text in enumerate(_label(node))
    )
    kind = html.escape(node["kind"])
    return (f'<g class="devcopy-node devcopy-{kind}"><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" '
            f'rx="{12 if copy else 3}" fill="{fill}" {stroke}/>{lines}</g>')


def _arrow(a: tuple[int, int], b: tuple[int, int]) -> str:
    x1, y1, x2, y2 = a[0] + BOX_W, a[1] + BOX_H / 2, b[0], b[1] + BOX_H / 2
    return f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#78909c" marker-end="url(#devcopy-arrow)"/>'


def _legend(devices: Sequence[str], y: int) -> str:
    items = [*(f'<rect x="{PAD + 110 * i}" y="{y}" width="14" height="14" fill="{DEVICE_COLOURS.get(d, OTHER_DEVICE)}" '
               f'stroke="#455a64"/><text x="{PAD + 110 * i + 20}" y="{y + 12}" font-size="11">{html.escape(d)}</text>'
               for i, d in enumerate(devices))]
    x = PAD + 110 * len(devices)
    items.append(f'<rect x="{x}" y="{y}" width="14" height="14" rx="4" fill="white" stroke="#c62828" '
                 f'stroke-width="2.5"/><text x="{x + 20}" y="{y + 12}" font-size="11">copy</text>')
    return "".join(items)


def graph_svg(nodes: Sequence[Mapping], edges: Sequence[tuple[str, str]]) -> str:
    """An SVG of `nodes` (name, kind, device, and for copies bytes and predicted_s) joined by `edges` (src, dst)."""
    where = layout([n["name"] for n in nodes], edges)
    width = max((x for x, _ in where.values()), default=0) + BOX_W + PAD
    bottom = max((y for _, y in where.values()), default=0) + BOX_H + GAP_Y
    devices = sorted({n["device"] for n in nodes}, key=lambda d: (d != "cpu", d))
    body = "".join(_arrow(where[s], where[d]) for s, d in edges) + "".join(_box(n, *where[n["name"]]) for n in nodes)
    marker = ('<defs><marker id="devcopy-arrow" markerWidth="8" markerHeight="8" refX="8" refY="4" orient="auto">'
              '<path d="M0,0 L8,4 L0,8 z" fill="#78909c"/></marker></defs>')
    width, height = max(width, 360), bottom + 24  # scales down to fit its container, never up
    return (f'<svg class="devcopy-graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" style="max-width:100%;height:auto">{marker}{body}{_legend(devices, bottom)}</svg>')
