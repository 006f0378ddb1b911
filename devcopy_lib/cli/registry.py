"""`devcopy registry`: which libs of a mode register which ops (kernel key, kernel name, source file;
`runtime.resolve.registry_report`), or what each mode resolves of a `.pte`'s operator table (pte.py)."""

from __future__ import annotations

import argparse
from typing import Any

from ..names import COPY_OP, DEFAULT_LIBS, LIB_NAMES, MODES, Direction, Mode
from . import pte
from .common import Outcome, Parser, UsageError, add_json, linked_libs, split_list

DEFAULT_OPS = ",".join((COPY_OP[Direction.H2D].name, COPY_OP[Direction.D2H].name))


def _render(result: dict[str, Any]) -> str:
    lines = [
        f"mode: {result['mode']}; libs: " + ", ".join(f"{lib['name']} ({lib['ops']} ops)" for lib in result["libs"])
    ]
    for row in result["rows"]:
        state = (
            f"registered, key {row['kernel_key'] or 'fallback'}, {row['kernel_name']}"
            if row["registered"]
            else "NOT registered"
        )
        lines.append(f"  {row['op']:40} {row['lib']:26} {state}")
    if not result["rows"]:
        lines.append(f"  no op matches {', '.join(result['ops'])}")
    for fix in result["fixes"]:
        lines.append(
            f"fix: {fix['op']}: add {' or '.join(fix['libs'])} to --libs"
            if fix["libs"]
            else f"fix: {fix['op']}: no {result['mode']}-mode lib registers it; register a kernel for it"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> Outcome:
    given_libs = split_list(args.libs, "--libs") if args.libs is not None else None
    if args.program is not None:  # ExecuTorch's own program: its operator table in each mode and lib set
        if not pte.is_pte(args.program):
            raise UsageError(f"PROGRAM {args.program!r} is not a .pte path; give an ExecuTorch program (file.pte)")
        return pte.registry(args.program, args.mode, given_libs, args.ops is not None)
    from ..runtime.resolve import registry_report

    mode = args.mode or Mode.PORTABLE
    ops = split_list(DEFAULT_OPS if args.ops is None else args.ops, "--ops")
    linked = linked_libs(DEFAULT_LIBS[mode] if given_libs is None else given_libs, LIB_NAMES, mode, "--libs")
    return Outcome(registry_report(mode, linked, ops), _render)


def add_parser(subparsers: argparse._SubParsersAction[Parser]) -> None:
    parser = subparsers.add_parser("registry", help="which ops the libs of a mode register")
    parser.add_argument(
        "program",
        nargs="?",
        default=None,
        metavar="PATH.pte",
        help="an ExecuTorch program: the operators each mode and lib set resolves, and what a runtime misses",
    )
    parser.add_argument("--mode", default=None, choices=MODES, help="runtime mode (default portable)")
    parser.add_argument(
        "--libs", default=None, help="comma list of libs (portable; native,device_copy_ops_aten_lib); default per mode"
    )
    parser.add_argument(
        "--ops",
        default=None,
        help="comma list of op names or glob patterns like 'aten::add*' (default: the two et_copy ops)",
    )
    add_json(parser)
    parser.set_defaults(handler=run)
