"""What every `devcopy` subcommand shares: exit codes, the one-JSON-object rule, and common options."""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from typing import Any, Callable, Iterable

from ..names import BACKEND_CHOICES

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A bad argument: exit 2, the message says what was wrong and what is valid."""


class Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting, so `--json` still gets its one object."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def add_backend(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend", default="auto", choices=BACKEND_CHOICES,
        help="device backend (default: auto = cupy where CUDA is available, else simulated; env DEVCOPY_BACKEND)",
    )


def split_list(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def check_choices(values: Iterable[str], valid: Iterable[str], what: str) -> list[str]:
    """Return `values` or raise UsageError naming each unknown one with its close matches."""
    valid = list(valid)
    values = list(values)
    for value in values:
        if value not in valid:
            close = difflib.get_close_matches(value, valid, n=5, cutoff=0.5)
            hint = f" Close matches: {', '.join(close)}." if close else ""
            raise UsageError(f"Unknown {what} {value!r}.{hint} Valid {what}s: {', '.join(sorted(valid)[:40])}"
                             + (" ..." if len(valid) > 40 else ""))
    return values


def error_payload(exc: BaseException) -> dict[str, Any]:
    """The `error` object of a refused command: kind, message and any missing operators."""
    missing = [{"index": int(i), "name": str(n)} for i, n in getattr(exc, "missing", [])]
    return {"kind": getattr(exc, "kind", type(exc).__name__), "message": str(exc), "missing": missing}


def emit(result: dict[str, Any], as_json: bool, render: Callable[[dict[str, Any]], str]) -> None:
    if as_json:
        print(json.dumps(result, default=str))
    else:
        print(render(result))


def fail(exc: BaseException, as_json: bool, code: int) -> int:
    print(str(exc), file=sys.stderr)
    if as_json:
        print(json.dumps({"ok": False, "error": error_payload(exc)}, default=str))
    return code
