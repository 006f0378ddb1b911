"""The `devcopy` command: one module per subcommand, each with `add_parser(subparsers)` and `run(args) -> int`."""
from __future__ import annotations

import importlib
import sys

from .common import EXIT_REFUSED, EXIT_USAGE, Parser, UsageError, fail

# subcommand -> module (each defines add_parser and run)
COMMANDS = {
    "place": "place",
    "run": "run",
    "registry": "registry",
    "bench": "bench",
    "info": "info",
}


def _available():
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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    try:
        args = build_parser().parse_args(argv)
        return int(args.handler(args) or 0)
    except UsageError as exc:
        return fail(exc, as_json, EXIT_USAGE)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except Exception as exc:  # a refusal by the pass or the runtime: the message names what and how to fix
        return fail(exc, as_json, EXIT_REFUSED)
