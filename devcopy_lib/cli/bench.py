"""`devcopy bench`: time host<->device copies over sizes, directions and host-memory kinds, on the selected backend."""
from __future__ import annotations

import sys

from ..bench.harness import Policy, TextProgress
from ..bench.sizes import format_size, parse_sizes
from ..bench.sweep import DIRECTIONS, MEMORIES, default_sizes, sweep
from ..devices.backend import select_backend
from .common import UsageError, add_backend, add_json, emit


def run(args) -> int:
    try:
        sizes = parse_sizes(args.sizes) if args.sizes else None
    except ValueError as exc:
        raise UsageError(f"--sizes: {exc}") from None
    backend = select_backend(args.backend)
    directions = DIRECTIONS if args.direction == "all" else (args.direction,)
    memories = MEMORIES if args.memory == "all" else (args.memory,)
    progress = None if args.json or not sys.stderr.isatty() else TextProgress()
    result = sweep(backend, sizes or default_sizes(backend), directions, memories,
                   Policy.quick() if args.quick else Policy(), progress)
    if args.csv:
        result.write_csv(args.csv)
    if args.plot:
        from ..bench.plots import plot_bandwidth

        plot_bandwidth(result, args.plot)
    payload = {"backend": result.backend, "device": result.device, "rows": result.rows()}
    emit(payload, args.json, _render)
    for warning in result.warnings:
        print("warning:", warning, file=sys.stderr)
    return 0


def _render(payload: dict) -> str:
    lines = [f"backend: {payload['backend']}  device: {payload['device']}",
             f"{'method':<20} {'dir':<5} {'memory':<9} {'bytes':>6} {'clock':<6} {'median':>11} {'GB/s':>8}"]
    for r in payload["rows"]:
        lines.append(f"{r['method']:<20} {r['direction']:<5} {r['memory']:<9} {format_size(r['bytes']):>6} "
                     f"{r['clock']:<6} {r['median_s'] * 1e6:>9.1f}us {r['gbps']:>8.2f}")
    return "\n".join(lines)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("bench", help="time host<->device copies (both clocks, baselines, devcopy)")
    add_backend(parser)
    parser.add_argument("--sizes", help="e.g. 4K,1M,64M or 4K..1G (binary K/M/G; A..B: every power of two between)")
    parser.add_argument("--direction", default="all", choices=["h2d", "d2h", "both", "all"])
    parser.add_argument("--memory", default="all", choices=["pageable", "pinned", "all"])
    parser.add_argument("--csv", metavar="FILE", help="write every measurement with its raw samples as CSV")
    parser.add_argument("--plot", metavar="FILE", help="write a bandwidth-vs-size plot (PNG; needs matplotlib)")
    parser.add_argument("--quick", action="store_true", help="few samples per case (smoke runs)")
    add_json(parser)
    parser.set_defaults(handler=run)
