"""Pure HTML fragments the views show: tables, error boxes, notes. No widget or display calls."""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

WRAP = {"flex_flow": "row wrap"}  # layout of control rows: they wrap in narrow windows (1280 px and less)


def table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], css_class: str = "devcopy-table") -> str:
    """An HTML table of `rows` (mappings) restricted to `columns`, in that order."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(row.get(c)))}</td>" for c in columns) + "</tr>" for row in rows
    )
    return (
        f"<style>.{css_class} td, .{css_class} th {{padding:1px 10px 1px 0;text-align:left;"
        f"border-bottom:1px solid #e0e0e0}}</style>"
        f'<table class="{css_class}" style="border-collapse:collapse;font-family:monospace;font-size:12px">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def error_box(exc: BaseException) -> str:
    """A red box naming the exception type and its full message (which says what, the values and the fix)."""
    message = html.escape(str(exc)).replace("\n", "<br>")
    return (
        f'<div class="devcopy-error" style="border:1px solid #c62828;background:#ffebee;padding:6px;'
        f'font-family:monospace;white-space:normal"><b>{type(exc).__name__}</b>: {message}</div>'
    )


def note(text: str, css_class: str = "devcopy-note") -> str:
    """A line of plain text in a div that tests and the browser can find by class."""
    return f'<div class="{css_class}" style="font-family:monospace">{html.escape(text)}</div>'


def pre(text: str) -> str:
    """Preformatted text (tensor reprs, messages with line breaks)."""
    return f'<pre style="margin:2px 0">{html.escape(text)}</pre>'
