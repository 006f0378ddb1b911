"""`devcopy info`: which backend runs, which devices it sees, which library versions (workflows.environment)."""

from __future__ import annotations

import argparse
from typing import Any

from .common import Outcome, add_backend, add_json, backend_name


def _render(info: dict[str, Any]) -> str:
    """The text form of `describe_environment()`."""
    lines = [
        f"backend: {info['backend']}" + ("  (simulated accelerator: host memory, no GPU)" if info["simulated"] else "")
    ]
    lines += [f"  {d['device']}: {d['name']}" for d in info["devices"]]
    lines.append(f"python {info['python']}; " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> Outcome:
    """The `info` subcommand."""
    from ..workflows import environment

    return Outcome(environment.describe_environment(backend_name(args)), _render)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `devcopy info`."""
    parser = subparsers.add_parser("info", help="backend, devices and library versions")
    add_backend(parser)
    add_json(parser)
    parser.set_defaults(handler=run)
