"""ExecuTorch's own programs on the command line (docs/pte.md): `devcopy place|run|registry PATH.pte` read a `.pte`
instead of lowering a model, and `devcopy place MODEL --save-pte PATH` writes the program ExecuTorch's pipeline makes
with devcopy's backend. Each subcommand keeps its own JSON keys where they mean the same thing (`delegates`,
`copies`, `max_abs_err`, ...) and adds `program`; every failure is one of the shared error kinds."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..names import DEFAULT_LIBS, MODES, NATIVE_LIB, Direction, Mode, Partition, Strategy, format_bytes
from .common import Outcome, UsageError, check_output_path, linked_libs

if TYPE_CHECKING:
    from ..pte.reader import PteProgram
    from ..workflows.trial import RunOptions

SUFFIX = ".pte"
# the placement options and their defaults: a .pte was placed by ExecuTorch already, so none applies to one
PLACEMENT_DEFAULTS = {
    "delegate": None,
    "target": None,
    "strategy": Strategy.EXECUTORCH,
    "partition": Partition.CAPABILITY,
    "skip_h2d_inputs": False,
    "skip_d2h_outputs": False,
    "hoist_constants": False,
    "resident_buffers": False,
}


def is_pte(spec: str | None) -> bool:
    """Whether MODEL (or registry's PROGRAM) names a `.pte` file rather than a sample or a model file."""
    return bool(spec) and str(spec).lower().endswith(SUFFIX)


def refuse_placement_options(args: argparse.Namespace, extra: dict[str, Any] | None = None) -> None:
    """A UsageError naming each placement option given with a `.pte`: ExecuTorch placed the program already."""
    given = [
        "--" + name.replace("_", "-")
        for name, default in {**PLACEMENT_DEFAULTS, **(extra or {})}.items()
        if getattr(args, name, default) != default
    ]
    if given:
        verb = "does" if len(given) == 1 else "do"
        raise UsageError(
            f"{', '.join(given)} {verb} not apply to {args.model}: a .pte is a program ExecuTorch already placed. "
            "Drop them, or pass the model (a sample or file.py:factory) to place it again"
        )


def place(args: argparse.Namespace) -> Outcome:
    """`devcopy place PATH.pte`: the program as ExecuTorch wrote it (workflows.program.read_program)."""
    from ..workflows.program import read_program

    refuse_placement_options(args, {"compare_executorch": False, "save_pte": None})
    reading = read_program(args.model)
    return Outcome(reading.to_dict(), lambda r: _render_place(r, reading.program))


def _render_place(result: dict[str, Any], program: PteProgram) -> str:
    where = ", ".join(f"{name} on {device}" for name, device in result["delegate_devices"].items())
    copies, nbytes = result["copies"], result["copy_bytes"]
    buffers = ", ".join(f"{b['index']}: {b['device']} {format_bytes(b['bytes'])}" for b in result["program"]["buffers"])
    return "\n".join(
        [
            f"{result['model']}: ExecuTorch program ({format_bytes(program.size)}), plan {program.plan}, "
            f"{result['delegates']} delegate(s) ({where or 'none'})",
            str(program),
            f"buffers: {buffers}",
            f"copies: {copies[Direction.H2D]} H2D ({format_bytes(nbytes[Direction.H2D])}), "
            f"{copies[Direction.D2H]} D2H ({format_bytes(nbytes[Direction.D2H])}) per run",
        ]
    )


def run(args: argparse.Namespace, options: RunOptions, backend: str) -> dict[str, Any]:
    """`devcopy run PATH.pte`: the program run as `options` say on `backend` beside torch's eager run of it and
    ExecuTorch's own (workflows.program.run_program); no placement option applies."""
    from ..workflows.program import run_program

    refuse_placement_options(args)
    return run_program(args.model, options, backend)


def lib_sets(mode: str | None, libs: list[str] | None) -> list[tuple[str, list[str]]]:
    """The (mode, libs) sets `devcopy registry PATH.pte` resolves: the given one, or each mode's default and the
    seed's ATen runtime without device_copy_ops_aten_lib."""
    if libs is not None:
        return [(mode or Mode.PORTABLE, libs)]
    sets = [(m, [str(lib) for lib in DEFAULT_LIBS[Mode(m)]]) for m in MODES if mode in (None, m)]
    if mode in (None, Mode.ATEN):
        sets.append((Mode.ATEN, [str(NATIVE_LIB)]))
    return sets


def registry(path: str, mode: str | None, libs: list[str] | None, ops_given: bool) -> Outcome:
    """`devcopy registry PATH.pte`: the operators each mode and lib set resolves, ExecuTorch's `Missing operator`
    lines and the fix where one lacks some, and what ExecuTorch's own portable_lib registers of the table
    (workflows.program.program_registry)."""
    from ..names import LIB_NAMES
    from ..workflows.program import program_registry

    if ops_given:
        raise UsageError("--ops does not apply with a .pte: the program's operator table is the list; drop --ops")
    sets = [(m, linked_libs(names, LIB_NAMES, m, "--libs")) for m, names in lib_sets(mode, libs)]
    return Outcome(program_registry(path, sets), _render_registry)


def _render_registry(result: dict[str, Any]) -> str:
    from ..workflows.program import RUNTIME_FIELD

    lines = [f"{result['program']}: plan {result['plan']}, operators {', '.join(result['operators'])}"]
    for s in result["sets"]:
        head = f"{s['mode']} mode, libs {','.join(s['libs'])}: "
        if s["ok"]:
            lines.append(head + f"resolves all {len(s['resolved'])}")
            continue
        lines.append(head + f"{len(s['missing'])} of {len(result['operators'])} MISSING")
        lines.extend("  " + line for line in s["message"].splitlines())
    et = result[RUNTIME_FIELD]
    if et["available"]:
        lacks = f", lacks {', '.join(et['missing'])}" if et["missing"] else ", every one of the table among them"
        lines.append(f"ExecuTorch's portable_lib registers {et['registered']} operators{lacks}")
    return "\n".join(lines)


def check_save(args: argparse.Namespace) -> None:
    """`--save-pte PATH`, before any work: a writable `.pte` path, ExecuTorch installed, one target device (devcopy's
    partitioner gives every delegate one `target_device` spec), a model rather than a `.pte`."""
    if args.save_pte is None:
        return
    from ..workflows.program import need_executorch

    check_output_path(args.save_pte, "--save-pte", (SUFFIX,))
    need_executorch("--save-pte")
    if any("=" in value for value in args.target or ()):
        raise UsageError(
            "--save-pte writes one target device for every delegate (ExecuTorch's target_device compile spec); "
            "drop the OP=DEVICE forms of --target"
        )
