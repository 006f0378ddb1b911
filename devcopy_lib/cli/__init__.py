"""The `devcopy` command: one module per subcommand, each with `add_parser(subparsers)` and `run(args) -> Outcome`.

`main` keeps the contract of docs/reliability.md: with `--json` (anywhere in argv) exactly one JSON object on stdout
whatever happens, interrupts and `sys.exit` from the user's model code included (anything the command itself would
print on stdout goes to stderr meanwhile); exit codes from `common.KIND_EXITS`.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import warnings
from collections.abc import Iterator
from types import ModuleType

from .common import EXIT_OK, Outcome, Parser, failure, to_json

# subcommand -> module (each defines add_parser and run)
COMMANDS = {
    "place": "place",
    "run": "run",
    "registry": "registry",
    "bench": "bench",
    "info": "info",
}

# Known third-party noise, filtered here only: torch.export's own use of a pytree API it deprecated.
QUIET_WARNINGS = ((FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),)


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


def _outcome(argv: list[str]) -> Outcome | int:
    """The command's Outcome, a failure's Outcome, or the exit code of `--help`."""
    try:
        args = build_parser().parse_args(argv)
        outcome: Outcome = args.handler(args)
        return outcome
    except SystemExit as exc:  # --help (argparse's errors raise UsageError; the user's exits are UserCodeErrors)
        if exc.code in (None, 0):
            return EXIT_OK
        return failure(RuntimeError(f"exited with {exc.code!r}"))
    except (Exception, KeyboardInterrupt) as exc:
        return failure(exc)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    stdout = sys.stdout
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr if as_json else stdout):
        for category, message in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=category)
        outcome = _outcome(argv)
    if isinstance(outcome, int):
        return outcome
    for line in outcome.stderr:
        print(line, file=sys.stderr)
    text = to_json(outcome.payload) if as_json else outcome.render(outcome.payload)
    if text:
        print(text, file=stdout)
    return outcome.code
