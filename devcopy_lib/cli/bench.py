"""`devcopy bench`: time host<->device copies over sizes, directions and host-memory kinds, on the selected backend
(bench.sweep.sweep_to_files). Every argument (sizes, output paths, what the backend can time) is checked before the
first copy; Ctrl-C keeps the rows measured so far, in the JSON and the CSV (exit 130)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import Any

from ..bench.harness import Policy, TextProgress
from ..bench.sizes import parse_sizes
from ..bench.sweep import DIRECTIONS, MEMORIES, NothingToTime, sweep_to_files
from ..names import format_bytes, format_seconds
from .common import (
    EXIT_INTERRUPTED,
    Outcome,
    Parser,
    UsageError,
    add_backend,
    add_json,
    backend_name,
    check_output_path,
    error_payload,
    exit_code,
)

MAX_SIZE = 1 << 40  # 1 TiB: more than any device or host here holds; a larger size is a typo


def _sizes(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        sizes = parse_sizes(text)
    except ValueError as exc:
        raise UsageError(f"--sizes: {exc}") from None
    if sizes[-1] > MAX_SIZE:
        raise UsageError(
            f"--sizes {text!r}: {format_bytes(sizes[-1])} is more than {format_bytes(MAX_SIZE)}; give sizes up "
            "to 1G or so (e.g. 4K..1G)"
        )
    return sizes


# Formats matplotlib writes through Pillow, by Pillow's format name: each needs Pillow's writer for it.
PILLOW_FORMATS = {
    "jpg": "JPEG",
    "jpeg": "JPEG",
    "tif": "TIFF",
    "tiff": "TIFF",
    "gif": "GIF",
    "webp": "WEBP",
    "avif": "AVIF",
}


def _check_plot(path: str) -> None:
    """Refuse a `--plot` path before the sweep: a format matplotlib cannot write, or one whose writer (a TeX system
    for .pgf, Pillow's writer for .webp ...) is not available here."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise UsageError(
            "--plot needs matplotlib: pip install matplotlib (or the lab extra), or leave --plot out"
        ) from None
    formats = FigureCanvasAgg.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    missing = _missing_writer(ext) if ext in formats else None
    if missing:
        raise UsageError(
            f"--plot {path!r}: matplotlib writes .{ext} with {missing}, which is not available here; give a .png, "
            ".svg or .pdf path, or install it"
        )
    check_output_path(path, "--plot", tuple(f".{name}" for name in formats if not _missing_writer(name)))


def _missing_writer(ext: str) -> str | None:
    """What writing format `ext` needs and this machine lacks, or None."""
    if ext == "pgf":
        import matplotlib

        tex = matplotlib.rcParams["pgf.texsystem"]
        return None if shutil.which(tex) else f"{tex} (a TeX system on PATH)"
    if ext in PILLOW_FORMATS:
        from PIL import Image

        Image.init()
        return None if PILLOW_FORMATS[ext] in Image.SAVE else f"Pillow's {PILLOW_FORMATS[ext]} writer"
    return None


def run(args: argparse.Namespace) -> Outcome:
    sizes = _sizes(args.sizes)
    check_output_path(args.csv, "--csv")
    if args.plot is not None:
        _check_plot(args.plot)
    name = backend_name(args)
    directions = DIRECTIONS if args.direction == "all" else (args.direction,)
    memories = MEMORIES if args.memory == "all" else (args.memory,)
    progress = None if args.json or not sys.stderr.isatty() else TextProgress()
    policy = Policy.quick() if args.quick else Policy()
    try:
        report = sweep_to_files(name, sizes, directions, memories, policy, progress, args.csv, args.plot)
    except NothingToTime as exc:
        raise UsageError(
            f"the {exc.backend} backend cannot time --direction {'/'.join(exc.directions)} with --memory "
            f"{'/'.join(exc.memories)}: it times {', '.join(exc.can)} only. Pick one of those (or --backend cupy "
            "on a CUDA machine)."
        ) from None
    result = report.result
    payload: dict[str, Any] = {
        "ok": report.interrupted is None and report.write_failure is None,
        "backend": result.backend,
        "device": result.device,
        "rows": result.rows(),
        "written": report.outputs,  # the files written (absolute paths; no plot for an interrupted sweep)
    }
    if report.interrupted:
        payload["error"] = error_payload(report.interrupted)
        return Outcome(payload, _render, EXIT_INTERRUPTED, [f"interrupted: kept {len(payload['rows'])} row(s)"])
    if report.write_failure:
        kind, path, error = report.write_failure
        failed = UsageError(
            f"--{kind} {path!r}: writing failed after the sweep ({error.strerror or error}); the measured rows are in "
            "the output. Give a path with room to write."
        )
        payload["error"] = error_payload(failed)
        return Outcome(payload, _render, exit_code(failed), [payload["error"]["message"]])
    return Outcome(payload, _render, 0, [f"warning: {w}" for w in result.warnings])


def _render(payload: dict[str, Any]) -> str:
    lines = [
        f"backend: {payload['backend']}  device: {payload['device']}",
        f"{'method':<20} {'dir':<5} {'memory':<15} {'bytes':>9} {'clock':<6} {'median':>10} {'GB/s':>8}",
    ]
    for r in payload["rows"]:
        lines.append(
            f"{r['method']:<20} {r['direction']:<5} {r['memory']:<15} {format_bytes(r['bytes']):>9} "
            f"{r['clock']:<6} {format_seconds(r['median_s']):>10} {r['gbps']:>8.2f}"
        )
    lines += [f"{kind} written to {path}" for kind, path in payload.get("written", {}).items()]
    return "\n".join(lines)


def add_parser(subparsers: argparse._SubParsersAction[Parser]) -> None:
    parser = subparsers.add_parser("bench", help="time host<->device copies (both clocks, baselines, devcopy)")
    add_backend(parser)
    parser.add_argument("--sizes", help="e.g. 4K,1M,64M or 4K..1G (binary K/M/G; A..B: every power of two between)")
    parser.add_argument("--direction", default="all", choices=[*DIRECTIONS, "all"])
    parser.add_argument("--memory", default="all", choices=[*MEMORIES, "all"])
    parser.add_argument("--csv", metavar="FILE", help="write every measurement with its raw samples as CSV")
    parser.add_argument("--plot", metavar="FILE", help="write a bandwidth-vs-size plot (PNG; needs matplotlib)")
    parser.add_argument("--quick", action="store_true", help="few samples per case (smoke runs)")
    add_json(parser)
    parser.set_defaults(handler=run)
