"""What every `devcopy` subcommand shares: exit codes, the error kinds, the one-JSON-object rule, and common options.

The contract (docs/reliability.md): with `--json`, exactly one JSON object on stdout whatever happens (finite numbers
only); exit 0 on success, 1 when the pass, the runtime or the user's model code fails, 2 on an argument error (found
before any work starts), 130 on an interrupt (SIGINT, SIGTERM or SIGHUP).
"""

from __future__ import annotations

import argparse
import difflib
import errno
import json
import math
import os
import re
import signal
import stat
from collections.abc import Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

from ..names import BACKEND_CHOICES, ERROR_KINDS, DeviceRule, ErrorKind

if TYPE_CHECKING:
    from ..runtime.capture import CaptureOption
    from ..runtime.operator_registry import KernelLib

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

# Each error kind's exit code and what it means (docs/reliability.md lists them); the kinds are names.ErrorKind.
KIND_EXITS: dict[ErrorKind, tuple[int, str]] = {
    ErrorKind.USAGE: (EXIT_USAGE, "an argument (or DEVCOPY_BACKEND, or what MODEL names) is invalid; nothing ran"),
    ErrorKind.USER_CODE: (
        EXIT_REFUSED,
        "the model file or its factory raised, exited or ended the process; `file` and `factory` name it",
    ),
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
    ErrorKind.INTERRUPTED: (
        EXIT_INTERRUPTED,
        "interrupted (Ctrl-C, SIGINT, SIGTERM or SIGHUP); a bench keeps the rows measured so far",
    ),
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


class Interrupted(KeyboardInterrupt):
    """A stop request (SIGINT, SIGTERM, SIGHUP) raised as an interrupt, so every command stops as on Ctrl-C: a bench
    keeps its finished rows, a Method its state; `kind` interrupted, exit 130."""

    WORDS = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up: the terminal closed"}

    @classmethod
    def by_signal(cls, signum: int) -> Interrupted:
        sig = signal.Signals(signum)
        return cls(f"interrupted ({cls.WORDS.get(sig, 'a signal')}, {sig.name})")


def describe(exc: BaseException) -> str:
    """`str(exc)`, or a fallback naming the type when the exception's own `__str__` fails (user code can define any
    exception), so a message can always be built."""
    try:
        return str(exc)
    except KeyboardInterrupt:
        raise
    except BaseException as inner:
        return f"<a {type(exc).__name__} whose message cannot be printed: its __str__ raised {type(inner).__name__}>"


def encodable(text: str, encoding: str | None) -> str:
    """`text` with what `encoding` cannot write (a non-UTF-8 file name's surrogates) as backslash escapes."""
    codec = encoding or "utf-8"
    return text.encode(codec, "backslashreplace").decode(codec)


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


MAX_COUNT = 100_000  # the most a count option (`--profile N`) takes: more is a typo, not a measurement
NAME_MAX, PATH_MAX = 255, 4096  # bytes in one file name / a whole path (Linux)
KERNEL_FOLDERS = ("/proc", "/sys")  # kernel interfaces that look like files: never an output
# Names of the standard streams (fd 1, fd 2), also through /proc; `_stream_fd` follows symbolic links to them.
STREAM_NAME = re.compile(r"/dev/std(out|err)|(/dev|/proc/(self|thread-self|\d+))/fd/([12])")


@dataclass(frozen=True)
class JsonStream:
    """Where a running `--json` command's one object goes: the file's (st_dev, st_ino), None where unknown."""

    identity: tuple[int, int] | None


# Set while a `--json` command runs (cli.execute), so that every output option refuses the JSON stream itself.
JSON_STREAM: ContextVar[JsonStream | None] = ContextVar("JSON_STREAM", default=None)


def count_type(low: int = 1, high: int = MAX_COUNT) -> Callable[[str], int]:
    """An argparse `type` for a count option: a whole number in low..high, or a usage error naming the bounds (an
    unbounded count would run forever)."""

    def parse(text: str) -> int:
        try:
            value: int | None = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"takes a whole number in {low}..{high}, got {text[:40]!r}")
        return value

    return parse


def check_output_path(path: str | None, option: str, suffixes: Iterable[str] = ()) -> None:
    """Refuse an output file that cannot be written before any work starts; nothing is created. Refused: a directory,
    a missing or read-only folder, a wrong suffix, a dangling symbolic link or a loop, a name over 255 bytes, a
    device, FIFO or socket (`/dev/full`; `/dev/null` is fine), anything under /proc or /sys, and, under `--json`, the
    JSON stream itself (`/dev/stdout`, `/proc/self/fd/1`, the file stdout is redirected to)."""
    if path is None:
        return
    problem = _output_problem(path, tuple(suffixes))
    if problem is not None:
        raise UsageError(f"{option} {path!r} {problem}")


def _output_problem(path: str, suffixes: tuple[str, ...]) -> str | None:
    """What is wrong with `path` as an output file, with the fix; None when it can be written."""
    fix = "give a writable file path"
    if not path or "\0" in path:
        return f"is {'empty' if not path else 'not a path (it holds a NUL byte)'}; {fix}"
    too_long = [part for part in os.fsencode(path).split(b"/") if len(part) > NAME_MAX]
    if too_long or len(os.fsencode(path)) > PATH_MAX:
        what = f"a name of {len(too_long[0])} bytes" if too_long else f"{len(os.fsencode(path))} bytes"
        return f"is too long ({what}; at most {NAME_MAX} bytes a name, {PATH_MAX} a path); give a shorter name"
    if os.path.basename(path) in ("", ".", ".."):
        return f"names a folder, not a file; {fix} (a file name inside it)"
    stream = _stream_fd(path)
    if stream == 1 and JSON_STREAM.get() is not None:
        return "is stdout, where the one JSON object goes; give a file path, or leave --json out"
    json_problem = _json_stream_problem(path)
    if json_problem or stream is not None:  # stdout or stderr otherwise: written to as the streams they are
        return json_problem
    return _file_problem(path, fix) or _place_problem(path, suffixes, fix)


def _json_stream_problem(path: str) -> str | None:
    """Under --json: refuse the file stdout is redirected to (also through another name, such as /dev/stderr)."""
    json_stream = JSON_STREAM.get()
    try:
        info = os.stat(path)
    except OSError:
        return None
    if json_stream is None or json_stream.identity != (info.st_dev, info.st_ino) or os.path.samefile(path, os.devnull):
        return None
    return "is the file stdout writes to, where the one JSON object goes; give another file, or leave --json out"


def _stream_fd(path: str) -> int | None:
    """1 or 2 when `path` names stdout or stderr (/dev/stdout, /proc/self/fd/1, a symbolic link to one)."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own bound on a chain of symbolic links
        match = STREAM_NAME.fullmatch(current)
        if match:
            return 1 if match.group(1) == "out" or match.group(4) == "1" else 2
        try:
            current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
        except OSError:
            return None
    return None


def _file_problem(path: str, fix: str) -> str | None:
    """What is wrong with the file `path` names (when it exists, or is a link): a directory, a dangling link or a
    loop, a device, FIFO or socket."""
    try:
        info = os.stat(path)
    except OSError as exc:
        if not os.path.islink(path):
            return None  # nothing there yet: the folder decides
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop; remove the link or give another path"
        return f"is a dangling symbolic link (to {os.readlink(path)!r}); remove it or give another path"
    if os.path.samefile(path, os.devnull):
        return None
    if stat.S_ISDIR(info.st_mode):
        return f"is a directory; {fix} (a file name inside it)"
    if not stat.S_ISREG(info.st_mode):
        return f"is not a regular file (a device, FIFO or socket); {fix}"
    return None


def _place_problem(path: str, suffixes: tuple[str, ...], fix: str) -> str | None:
    """What is wrong with where `path` would be written: a missing, kernel or read-only folder, a wrong suffix."""
    folder = os.path.dirname(os.path.abspath(path))
    real = os.path.realpath(folder)
    kernel = [root for root in KERNEL_FOLDERS if real == root or real.startswith(f"{root}/")]
    if kernel:
        return f"is under {kernel[0]}, a kernel interface, not storage; {fix}"
    if not os.path.isdir(folder):
        return f"is in a folder that does not exist ({folder}); {fix}"
    if not os.access(path if os.path.exists(path) else folder, os.W_OK):
        return f"is not writable; {fix}"
    if suffixes and not path.lower().endswith(suffixes):
        return f"must end in {' or '.join(suffixes)}; {fix}"
    return None


def error_payload(exc: BaseException) -> dict[str, Any]:
    """The `error` object of a failed command: kind (an ErrorKind), message, missing operators and extra fields."""
    kind, extra = classify(exc)
    missing = [{"index": int(i), "name": str(n)} for i, n in getattr(exc, "missing", [])]
    text = describe(exc)
    message = text or type(exc).__name__
    if kind is ErrorKind.INTERRUPTED and not text:
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


def capture_option(args: argparse.Namespace) -> CaptureOption:
    """`--capture` / `--no-capture` as load_method's `capture`: True, False, or 'auto' when neither was given."""
    value: bool | None = getattr(args, "capture", None)
    return "auto" if value is None else value


def add_capture(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--capture",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="graph replay of the device work (CUDA graphs): --capture requires it (an error naming why where no "
        "step can be recorded), --no-capture turns it off; default: on where it is safe",
    )
