"""MemoryPlanView: a program's memory plan as a picture beside the graph (docs/explorer.md, "The memory plan"): one
lane per buffer (device), x the instruction index, y the offset in the buffer, a rectangle per tensor for its
lifetime. Python draws the SVG (`picture_svg`, a pure function of `devcopy_lib.memory_picture`'s data); the browser
part (static/memory_plan.js, plain ESM, no build step) only shows it, names a rectangle on hover (its SVG title)
and sends a click back as `selected` (the value), which the explorer turns into a graph selection."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import anywidget
import traitlets as t

from devcopy_lib.names import format_bytes

from .graph_view_data import device_colour

STATIC = Path(__file__).parent / "static"
WIDTH = 440  # px of the drawing, lane labels included
LEFT = 6  # px before x = 0
LANE_HEIGHT = 150  # px of one lane's drawing area (the buffer's bytes, top = offset 0)
LANE_GAP = 34  # px above each lane: its title, and room between lanes
AXIS = 18  # px under the last lane: instruction numbers


def _x(index: float, instructions: int) -> float:
    """Pixel x of instruction `index` (a block live at i covers [i, i + 1))."""
    return LEFT + index * (WIDTH - 2 * LEFT) / (instructions + 1)


def _ticks(instructions: int) -> range:
    step = max(1, -(-(instructions + 1) // 10))
    return range(0, instructions + 1, step)


def picture_svg(picture: Any, selected: str = "", node: str = "") -> str:
    """The SVG of a `MemoryPicture`: lanes top to bottom, a `<rect class="dmp-block">` per tensor carrying
    `data-value` and `data-node` and a `<title>` naming it; the block of value `selected`, and every block of graph
    node `node`, is drawn picked. An empty plan says so in words."""
    if not picture.lanes:
        return '<div class="dmp-empty">no planned memory: every tensor is a constant or left to the caller</div>'
    n = picture.instructions
    height = len(picture.lanes) * (LANE_GAP + LANE_HEIGHT) + AXIS
    parts = [
        f'<svg class="dmp-svg" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="11">'
    ]
    for k, lane in enumerate(picture.lanes):
        top = k * (LANE_GAP + LANE_HEIGHT) + LANE_GAP
        scale = LANE_HEIGHT / max(lane.nbytes, lane.peak, 1)
        title = f"{lane.device} · buffer {lane.buffer} · {format_bytes(lane.nbytes)} · {len(lane.blocks)} tensors"
        parts.append(f'<text class="dmp-lane-title" x="{LEFT}" y="{top - 8}">{html.escape(title)}</text>')
        parts.append(
            f'<rect class="dmp-lane" data-device="{html.escape(lane.device)}" x="{LEFT}" y="{top}" '
            f'width="{WIDTH - 2 * LEFT}" height="{LANE_HEIGHT}" fill="none" stroke="#90a4ae"/>'
        )
        colour = device_colour(lane.device)
        for b in lane.blocks:
            if b.nbytes == 0:
                continue
            x0, x1 = _x(b.first, n), _x(b.last + 1, n)
            y0, h = top + b.offset * scale, max(b.nbytes * scale, 1.0)
            picked = str(b.value) == selected or (node and b.node == node)
            tip = (
                f"{b.label}\nbytes {b.offset}..{b.offset + b.nbytes} of buffer {lane.buffer} ({lane.device})\n"
                f"live at instructions {b.first}..{b.last}"
            )
            parts.append(
                f'<rect class="dmp-block{" dmp-picked" if picked else ""}" data-value="{html.escape(str(b.value))}" '
                f'data-node="{html.escape(b.node)}" x="{x0:.1f}" y="{y0:.1f}" width="{x1 - x0:.1f}" '
                f'height="{h:.1f}" fill="{colour}" stroke="{"#1565c0" if picked else "#37474f"}" '
                f'stroke-width="{2.5 if picked else 0.6}"><title>{html.escape(tip)}</title></rect>'
            )
    axis = height - AXIS + 12
    parts += [f'<text x="{_x(i, n):.1f}" y="{axis}">{i}</text>' for i in _ticks(n)]
    parts.append("</svg>")
    return "".join(parts)


class MemoryPlanView(anywidget.AnyWidget):
    """`show(picture)` draws a `MemoryPicture`; a click on a tensor sets `selected` to its value (as text) and
    `selected_node` to its graph node ("" when none); `highlight(node)` picks the blocks of a graph node."""

    _esm = STATIC / "memory_plan.js"
    svg = t.Unicode("").tag(sync=True)
    summary = t.Unicode("").tag(sync=True)
    selected = t.Unicode("").tag(sync=True)
    selected_node = t.Unicode("").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.picture: Any = None  # the memory_picture on screen
        self._node = ""
        self.paused = False  # hidden (a folded section): nothing is drawn or sent until shown again
        self._stale = False  # a drawing was skipped while paused
        self.observe(self._picked, names="selected")

    def show(self, picture: Any) -> None:
        """Draw `picture`; a selection of a value it no longer holds is dropped."""
        self.picture = picture
        if self.selected and (picture is None or self._block(self.selected) is None):
            self.selected = ""
        self._draw()

    def show_error(self, text: str) -> None:
        """Say in the picture's place why there is none (the explorer's graph stays)."""
        self.picture, self.selected = None, ""
        self.summary = text
        self.svg = f'<div class="dmp-error" style="color:#c62828">{html.escape(text)}</div>'

    def highlight(self, node: str) -> None:
        """Pick the blocks written for graph node `node` (the graph's selection), without changing `selected`."""
        self._node = node
        self._draw()

    def pause(self, paused: bool) -> None:
        """Stop drawing while hidden, or draw what changed meanwhile once shown again: the browser can only swap the
        whole SVG, so on a big program (250 KB of SVG at 96 GPT-2 layers) every graph click would re-send it."""
        self.paused = paused
        if not paused and self._stale:
            self._draw()

    def _block(self, value: str) -> Any:
        return next((b for lane in self.picture.lanes for b in lane.blocks if str(b.value) == value), None)

    def _picked(self, change: Any) -> None:
        block = self._block(change["new"]) if self.picture is not None and change["new"] else None
        self.selected_node = block.node if block is not None else ""
        self._draw()

    def _draw(self) -> None:
        if self.paused:
            self._stale = True
            return
        self._stale = False
        if self.picture is None:
            self.svg, self.summary = "", ""
            return
        self.summary = self.picture.summary()
        self.svg = picture_svg(self.picture, self.selected, self._node)
