"""What every `devcopy` subcommand shares: exit codes, the error kinds, the one-JSON-object rule, and common options.

The contract (docs/reliability.md): with `--json`, exactly one JSON object on stdout whatever happens (finite numbers
only); exit 0 on success, 1 when the pass, the runtime or the user's model code fails, 2 on an argument error (found
before any work starts), 130 on an interrupt.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from ..names import BACKEND_CHOICES, ERROR_KINDS, DeviceRule, ErrorKind

if TYPE_CHECKING:
    from ..runtime.registry import KernelLib

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# Each error kind's exit code and what it means (docs/reliability.md lists them); the kinds are names.ErrorKind.
KIND_EXITS: dict[ErrorKind, tuple[int, str]] = {
    ErrorKind.USAGE: (EXIT_USAGE, "an argument (or DEVCOPY_BACKEND, or what MODEL names) is invalid; nothing ran"),
    ErrorKind.USER_CODE: (EXIT_REFUSED, "the model file or its factory raised or exited; `file` and `factory` name it"),
    ErrorKind.UNSUPPORTED_MODEL: (
        EXIT_REFUSED,
        "the model exports, but devcopy cannot place or run it (non-tensor outputs, data-dependent output sizes)",
    ),
    ErrorKind.PLACEMENT: (EXIT_REFUSED, "the device-placement pass refused the program under the options"),
    ErrorKind.MISSING_OPERATOR: (
        EXIT_REFUSED,
        "the linked libs do not register an operator the program calls; `missing` lists them",
    ),
    ErrorKind.REGISTRATION: (EXIT_REFUSED, "a kernel was registered twice"),
    ErrorKind.LOAD: (EXIT_REFUSED, "loading the method failed; `error_code` is ExecuTorch's Error name"),
    ErrorKind.EXECUTION: (EXIT_REFUSED, "running the method failed; `error_code` is ExecuTorch's Error name"),
    ErrorKind.DEVICE: (EXIT_REFUSED, "the device backend failed (a CUDA error, out of device memory)"),
    ErrorKind.EXECUTORCH_REFUSED: (
        EXIT_REFUSED,
        "ExecuTorch itself refused the program (the reference run); not a devcopy error",
    ),
    ErrorKind.INTERRUPTED: (EXIT_INTERRUPTED, "interrupted (Ctrl-C); a bench keeps the rows measured so far"),
    ErrorKind.INTERNAL: (EXIT_REFUSED, "a devcopy bug: anything else; the message says what was raised"),
}


class CliError(Exception):
    """A failure with its `kind` and extra JSON fields for the error object."""

    kind = ErrorKind.INTERNAL

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.fields = fields


class UsageError(CliError):
    """A bad argument: exit 2, the message says what was wrong and what is valid."""

    kind = ErrorKind.USAGE


class UserCodeError(CliError):
    """The user's model file or factory raised or exited: exit 1, naming the file and the factory."""

    kind = ErrorKind.USER_CODE


class UnsupportedModel(CliError):
    """The model loads and exports, but devcopy cannot place or run it."""

    kind = ErrorKind.UNSUPPORTED_MODEL


@dataclass
class Outcome:
    """What a subcommand hands back: the JSON object, its text rendering, the exit code."""

    payload: dict[str, Any]
    render: Callable[[dict[str, Any]], str]
    code: int = EXIT_OK
    stderr: list[str] = field(default_factory=list)  # lines for stderr (a failure's message, warnings)


class Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of exiting (so `--json` still gets its one object), and takes no
    abbreviations (`--js` is an error, not `--json`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def add_backend(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--backend",
        default="auto",
        choices=BACKEND_CHOICES,
        help="device backend (default: auto = cupy where CUDA is available, else simulated; env DEVCOPY_BACKEND)",
    )


def backend_name(args: argparse.Namespace) -> str:
    """The backend `--backend` (or DEVCOPY_BACKEND) selects; an unknown or unavailable one is a UsageError."""
    from ..devices.backend import select_backend

    try:
        return select_backend(args.backend)
    except (ValueError, RuntimeError) as exc:
        raise UsageError(str(exc)) from None


def split_list(text: str | None, option: str | None = None) -> list[str]:
    """`a, b` -> ['a', 'b']; with `option`, a list naming nothing (`--delegate ''`) is a UsageError."""
    parts = [part.strip() for part in (text or "").split(",") if part.strip()]
    if option is not None and not parts:
        raise UsageError(f"{option} {text!r} names nothing; give a comma list, or leave {option} out for the default")
    return parts


def check_choices(values: Iterable[str], valid: Iterable[str], what: str) -> list[str]:
    """Return `values` or raise UsageError naming each unknown one with its close matches."""
    valid = list(valid)
    values = list(values)
    for value in values:
        if value not in valid:
            close = difflib.get_close_matches(value, valid, n=5, cutoff=0.5)
            hint = f" Close matches: {', '.join(close)}." if close else ""
            raise UsageError(
                f"Unknown {what} {value!r}.{hint} Valid {what}s: {', '.join(sorted(valid)[:40])}"
                + (" ..." if len(valid) > 40 else "")
            )
    return values


def linked_libs(
    names: Sequence[str], valid: Iterable[str], mode: str, option: str, device_rule: str = DeviceRule.SEED
) -> list[KernelLib]:
    """The KernelLibs `names` link, each one known and of `mode`; anything else is a UsageError."""
    from ..runtime.libs import lib_by_name, libs_of_mode

    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(f"{option}: {', '.join(twice)} given twice; name each lib once")
    try:
        return libs_of_mode(mode, [lib_by_name(name, device_rule) for name in check_choices(names, valid, "lib")])
    except ValueError as exc:  # one mode's libs only: the same rule as load_method's (runtime.libs)
        raise UsageError(f"{option} {exc}") from None


def check_output_path(path: str | None, option: str, suffixes: Iterable[str] = ()) -> None:
    """Refuse an output file that cannot be written (a directory, a missing or read-only folder, a wrong suffix)
    before any work starts; nothing is created."""
    if path is None:
        return
    suffixes = tuple(suffixes)
    folder = os.path.dirname(os.path.abspath(path))
    if not path or os.path.isdir(path):
        problem = "is a directory" if path else "is empty"
    elif not os.path.isdir(folder):
        problem = f"is in a folder that does not exist ({folder})"
    elif not os.access(path if os.path.exists(path) else folder, os.W_OK):
        problem = "is not writable"
    elif suffixes and not path.lower().endswith(suffixes):
        problem = f"must end in {' or '.join(suffixes)}"
    else:
        return
    raise UsageError(f"{option} {path!r} {problem}; give a writable file path")


def error_payload(exc: BaseException) -> dict[str, Any]:
    """The `error` object of a failed command: kind (an ErrorKind), message, missing operators and extra fields."""
    kind, extra = classify(exc)
    missing = [{"index": int(i), "name": str(n)} for i, n in getattr(exc, "missing", [])]
    message = str(exc) or type(exc).__name__
    if kind is ErrorKind.INTERRUPTED and not str(exc):
        message = "interrupted (Ctrl-C / KeyboardInterrupt)"
    if kind is ErrorKind.INTERNAL:
        message = (
            f"devcopy failed unexpectedly ({type(exc).__name__}: {message}). This is a devcopy bug: please "
            "report it with the command line."
        )
    return {"kind": kind, "message": message, "missing": missing, **extra}


def classify(exc: BaseException) -> tuple[ErrorKind, dict[str, Any]]:
    """The ErrorKind of an exception - the `kind` it carries (docs/design.md §8) - and the fields it adds
    (`error_code`, `file`, ...)."""
    if isinstance(exc, CliError):
        return ErrorKind(exc.kind), exc.fields
    if isinstance(exc, KeyboardInterrupt):
        return ErrorKind.INTERRUPTED, {}
    kind = ErrorKind.DEVICE if isinstance(exc, MemoryError) else getattr(exc, "kind", None)
    if kind in ERROR_KINDS:
        code = getattr(getattr(exc, "error", None), "name", None)  # an ExecuTorch Error code, where there is one
        return ErrorKind(kind), ({"error_code": code} if isinstance(code, str) else {})
    return ErrorKind.INTERNAL, {"exception": type(exc).__name__}


def exit_code(exc: BaseException) -> int:
    return KIND_EXITS[classify(exc)[0]][0]


def finite(value: Any, notes: list[str], where: str = "") -> Any:
    """`value` with every non-finite float replaced by None, each replacement noted (JSON has no NaN/inf)."""
    if isinstance(value, float) and not math.isfinite(value):
        notes.append(f"{where or 'value'} is {value} (not representable in JSON: written as null)")
        return None
    if isinstance(value, dict):
        return {k: finite(v, notes, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v, notes, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def to_json(payload: dict[str, Any]) -> str:
    """One line of strict JSON: non-finite numbers become null with a `notes` entry each."""
    notes: list[str] = []
    clean = finite(payload, notes)
    if notes:
        clean["notes"] = [*clean.get("notes", []), *notes]
    return json.dumps(clean, default=str, allow_nan=False)


def failure(exc: BaseException) -> Outcome:
    """The Outcome of a failed command: `{"ok": false, "error": {...}}` and the kind's exit code."""
    error = error_payload(exc)
    return Outcome({"ok": False, "error": error}, lambda p: "", exit_code(exc), [error["message"]])
