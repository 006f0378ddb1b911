"""`devcopy registry`: which libs of a mode register which ops (kernel key, kernel name, source file)."""

from __future__ import annotations

from ..names import COPY_OPS, DEFAULT_LIBS, LIB_NAMES, MODES
from .common import Outcome, add_json, linked_libs, split_list

DEFAULT_OPS = ",".join((COPY_OPS["h2d"], COPY_OPS["d2h"]))


def collect(mode: str, libs: list[str], ops: list[str]) -> dict:
    from ..runtime.libs import registration_status

    linked = linked_libs(libs, LIB_NAMES, mode, "--libs")
    rows = registration_status(linked, ops)
    return {
        "ok": True,
        "mode": mode,
        "libs": [{"name": lib.name, "mode": lib.mode, "source": lib.source, "ops": len(lib.ops)} for lib in linked],
        "ops": ops,
        "rows": [row.as_dict() for row in rows],
    }


def _render(result: dict) -> str:
    lines = [f"mode: {result['mode']}; libs: " + ", ".join(f"{l['name']} ({l['ops']} ops)" for l in result["libs"])]
    for row in result["rows"]:
        state = (
            f"registered, key {row['kernel_key'] or 'fallback'}, {row['kernel_name']}"
            if row["registered"]
            else "NOT registered"
        )
        lines.append(f"  {row['op']:40} {row['lib']:26} {state}")
    if not result["rows"]:
        lines.append(f"  no op matches {', '.join(result['ops'])}")
    return "\n".join(lines)


def run(args) -> Outcome:
    libs = split_list(args.libs, "--libs") if args.libs is not None else list(DEFAULT_LIBS[args.mode])
    return Outcome(collect(args.mode, libs, split_list(args.ops, "--ops")), _render)


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("registry", help="which ops the libs of a mode register")
    parser.add_argument("--mode", default="portable", choices=MODES, help="runtime mode")
    parser.add_argument(
        "--libs", default=None, help="comma list of libs (portable; native,device_copy_ops_aten_lib); default per mode"
    )
    parser.add_argument(
        "--ops",
        default=DEFAULT_OPS,
        help="comma list of op names or glob patterns like 'aten::add*' (default: the two et_copy ops)",
    )
    add_json(parser)
    parser.set_defaults(handler=run)
