"""The files and comparisons `devcopy place` and `devcopy run` can add to their work: a placement report
(`--report FILE.html|FILE.json`), a diff against a second placement (`--diff-strategy`, `--diff-delegate`) and a
Chrome/Perfetto trace of a profiled call (`--trace FILE.json`). Every option is checked here before any work starts;
the library (workflows/) writes the files."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..names import STRATEGIES
from .common import UsageError, check_output_path, split_list

if TYPE_CHECKING:
    from ..workflows.model import PlacementOptions

TRACE_SUFFIXES = (".json",)


def add_place_exports(parser: argparse.ArgumentParser) -> None:
    """`devcopy place`'s --report, --diff-strategy and --diff-delegate."""
    parser.add_argument(
        "--report",
        metavar="FILE",
        default=None,
        help="also write the placement report to FILE: .html (one self-contained page: totals, strategies, "
        "graph, every node) or .json (the --json object plus provenance)",
    )
    parser.add_argument(
        "--diff-strategy",
        metavar="STRATEGY",
        default=None,
        choices=STRATEGIES,
        help=f"compare with the same model placed by STRATEGY ({', '.join(STRATEGIES)}): the copies that appear, "
        "vanish or change bytes (matched by the value they carry, direction and device), and the totals' difference",
    )
    parser.add_argument(
        "--diff-delegate",
        metavar="OPS",
        default=None,
        help="compare with the same model lowered with these delegated ops (comma list, as --delegate); "
        "with --diff-strategy too, the other placement changes both",
    )


def add_run_exports(parser: argparse.ArgumentParser) -> None:
    """`devcopy run`'s --trace."""
    parser.add_argument(
        "--trace",
        metavar="FILE",
        default=None,
        help="write the profiled call as a Chrome/Perfetto trace (FILE.json; open in ui.perfetto.dev): one "
        "event per instruction, each device a process with compute and copies tracks; implies --profile",
    )


def diff_target(
    args: argparse.Namespace, placement_options: Callable[[argparse.Namespace], PlacementOptions]
) -> PlacementOptions | None:
    """The options of the placement to compare with (None when no diff is asked for); checks --report, and the
    diff's ops with `placement_options` (place.py's), before any work (a bad one is a UsageError)."""
    from ..placement.report_export import REPORT_SUFFIXES

    check_output_path(args.report, "--report", REPORT_SUFFIXES)
    if args.diff_strategy is None and args.diff_delegate is None:
        return None
    if args.diff_delegate is not None:
        split_list(args.diff_delegate, "--diff-delegate")  # names something
    other = argparse.Namespace(**vars(args))
    other.strategy = args.diff_strategy or args.strategy
    other.delegate = args.diff_delegate if args.diff_delegate is not None else args.delegate
    placement_options(args)  # the command's own ops and targets first, so an error names the option that holds it
    try:
        return placement_options(other)
    except UsageError as exc:
        raise UsageError(f"--diff-delegate: {exc}") from None


def check_trace(args: argparse.Namespace, default_calls: int) -> None:
    """Check --trace's path before any work; --trace without --profile profiles `default_calls` calls."""
    check_output_path(args.trace, "--trace", TRACE_SUFFIXES)
    if args.trace is not None and not args.profile:
        args.profile = default_calls


def export_lines(result: dict[str, Any]) -> list[str]:
    """The text lines of what the exports added to a result: the diff, and where files were written."""
    from ..placement.diff import diff_lines

    lines = diff_lines(result["diff"]) if "diff" in result else []
    files = (("report_file", "report"), ("trace_file", "trace"))
    return lines + [f"{what} written to {result[key]}" for key, what in files if key in result]
