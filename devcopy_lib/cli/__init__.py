"""The `devcopy` command: one module per subcommand, each with `add_parser(subparsers)` and `run(args) -> Outcome`.

`main` keeps the contract of docs/reliability.md: with `--json` (anywhere in argv) exactly one JSON object on stdout
whatever happens, interrupts, `sys.exit` and any exception from the user's model code included (anything the command
itself would print on stdout goes to stderr meanwhile); exit codes from `common.KIND_EXITS`. The `devcopy` process
(`main()` without argv) runs the command in a supervised worker (process.py), so that even what no exception handler
sees - fd-level writes, `os._exit`, a fork, a lingering thread, a signal - keeps that contract.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import sys
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, TextIO

from . import model_spec, process
from .common import JSON_STREAM, JsonStream, Outcome, Parser, UsageError, encodable, failure, to_json

Announce = Callable[[str, str], Any]  # told (file, factory) of the user's model file before its code runs

# subcommand -> module (each defines add_parser and run)
COMMANDS = {
    "place": "place",
    "run": "run",
    "registry": "registry",
    "bench": "bench",
    "info": "info",
}

# Known noise, filtered here only: torch.export's own use of a pytree API it deprecated; and the note that
# torchvision's compiled ops did not load (a CUDA torchvision wheel beside a CPU torch, models/extras.py): the models
# the command runs are pure Python and never call those ops, so repeating it on every `devcopy run resnet18` tells
# the user nothing they can act on (the library API still warns once; docs/real_models.md has the matching wheel).
QUIET_WARNINGS = (
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
    (RuntimeWarning, r"torchvision's compiled ops did not load"),
)


def _available() -> Iterator[tuple[str, ModuleType]]:
    """Each subcommand's (name, module); a subcommand whose module this install lacks is skipped."""
    for name, module in COMMANDS.items():
        try:
            yield name, importlib.import_module(f".{module}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{module}":
                raise


def build_parser() -> Parser:
    parser = Parser(prog="devcopy", description="Device copies across the host/accelerator boundary.")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for _, module in _available():
        module.add_parser(subparsers)
    return parser


def _parse(argv: list[str]) -> argparse.Namespace | Outcome:
    """The parsed arguments, or the Outcome of `--help`: the help text, as `{"ok": true, "help": ...}` under --json."""
    shown = io.StringIO()
    parser = build_parser()
    if not [arg for arg in argv if arg != "--json"]:  # bare `devcopy`: what it can do, as a usage error (exit 2)
        raise UsageError(f"devcopy: give a subcommand\n{parser.format_help().rstrip()}")
    try:
        with contextlib.redirect_stdout(shown):
            return parser.parse_args(argv)
    except SystemExit as exc:  # --help (argparse's errors raise UsageError)
        if exc.code not in (None, 0):
            raise
        return Outcome({"ok": True, "help": shown.getvalue()}, lambda payload: str(payload["help"]).rstrip("\n"))


def _outcome(argv: list[str], announce: Announce | None) -> Outcome:
    """The command's Outcome, or a failure's: nothing escapes, whatever the user's code raises."""
    try:
        args = _parse(argv)
        if isinstance(args, Outcome):
            return args
        if announce is not None and isinstance(getattr(args, "model", None), str):
            named = model_spec.user_file(args.model)
            if named is not None:
                announce(*named)
        outcome: Outcome = args.handler(args)
        return outcome
    except SystemExit as exc:  # the user's exits are UserCodeErrors: this one is devcopy's own
        return failure(RuntimeError(f"exited with {exc.code!r}"))
    except BaseException as exc:
        return failure(exc)


def execute(
    argv: list[str], announce: Announce | None = None, stdout_identity: tuple[int, int] | None = None
) -> tuple[int, str, list[str]]:
    """Run the command: (exit code, the text for stdout, the lines for stderr). `announce(file, factory)` is told the
    user's model file before its code runs; `stdout_identity` is the file the JSON goes to (outputs refuse it)."""
    as_json = "--json" in argv
    token = JSON_STREAM.set(JsonStream(stdout_identity) if as_json else None)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext(),
        ):
            for category, message in QUIET_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=category)
            outcome = _outcome(argv, announce)
        text = to_json(outcome.payload) if as_json else outcome.render(outcome.payload)
    finally:
        JSON_STREAM.reset(token)
    return outcome.code, text, outcome.stderr


def main(argv: list[str] | None = None) -> int:
    """`devcopy`. Without argv (the console script, `python -m devcopy_lib`) the command runs in a supervised worker
    process (process.py); with argv (tests, notebooks) it runs here, its stdout redirected at the Python level only."""
    if argv is None:
        return process.supervise(sys.argv[1:], execute)
    code, text, lines = execute(list(argv), stdout_identity=process.identity(sys.stdout))
    for line in lines:
        _print(line, sys.stderr)
    if text:
        _print(text, sys.stdout)
    return code


def _print(text: str, stream: TextIO) -> None:
    print(encodable(text, getattr(stream, "encoding", None)), file=stream)
