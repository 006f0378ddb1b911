"""ExecuTorch's own programs on the command line (docs/pte.md): `devcopy place|run|registry PATH.pte` read a `.pte`
instead of lowering a model, and `devcopy place MODEL --save-pte PATH` writes the program ExecuTorch's pipeline makes
with devcopy's backend. Each subcommand keeps its own JSON keys where they mean the same thing (`delegates`,
`copies`, `max_abs_err`, ...) and adds `program`; every failure is one of the shared error kinds."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..names import DEFAULT_LIBS, MODES, NATIVE_LIB, Direction, Mode, Partition, Strategy, format_bytes
from ..runtime.files import write_bytes
from . import model_spec
from .common import Outcome, UsageError, capture_option, check_output_path, linked_libs, method_fields

if TYPE_CHECKING:
    import torch

    from ..placement.place import PlacedProgram
    from ..pte.reader import PteProgram

SUFFIX = ".pte"
RUNTIME_FIELD = "executorch"  # names: registry's JSON field of ExecuTorch's own runtime, not the strategy
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


def _need_executorch(what: str) -> None:
    from ..pte import executorch_reference

    if not executorch_reference.available():
        raise UsageError(f"{what} needs ExecuTorch 1.5.1 (the `reference` extra): pip install -e '.[reference]'")


def open_program(path: str) -> PteProgram:
    """The program at `path`; a path that is no file is a UsageError (found before any work), a file ExecuTorch
    cannot read a PteLoadError (kind `load`)."""
    from ..pte.reader import open_pte

    _need_executorch(f"reading {path}")
    if not os.path.isfile(path):
        problem = "is a directory" if os.path.isdir(path) else "does not exist"
        raise UsageError(f"{path!r} {problem}; give the path of a .pte file (written by to_executorch())")
    return open_pte(path)


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


def _placement_fields(program: PteProgram) -> dict[str, Any]:
    """The keys `devcopy place MODEL` reports that a `.pte` has too: delegates, their devices, copies per run."""
    copies = program.copies()
    return {
        "delegates": len(program.delegates),
        "delegate_devices": {d["name"]: d["device"] for d in program.to_dict()["delegates"]},
        "copies": {direction: calls for direction, (calls, _) in copies.items()},
        "copy_bytes": {direction: nbytes for direction, (_, nbytes) in copies.items()},
    }


def place(args: argparse.Namespace) -> Outcome:
    """`devcopy place PATH.pte`: the program as ExecuTorch wrote it."""
    refuse_placement_options(args, {"compare_executorch": False, "save_pte": None})
    program = open_program(args.model)
    result = {"ok": True, "model": args.model, **_placement_fields(program), "program": program.to_dict()}
    return Outcome(result, lambda r: _render_place(r, program))


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


def run(args: argparse.Namespace, libs: list[Any] | None, backend: str, profile: Callable[..., Any]) -> dict[str, Any]:
    """`devcopy run PATH.pte`: load the program in `args.mode` with `libs` on `backend`, call it once on seeded
    random inputs (a .pte keeps no example inputs) and compare with the same program run by torch eagerly;
    `profile(method, inputs, repeat, backend)` gives `--profile`'s fields."""
    import torch

    from ..compare import compare_outputs
    from ..devices.backend import make_allocator
    from ..devices.registry import scoped_allocators
    from ..load import load_method
    from ..pte.convert import pte_inputs, pte_program
    from ..runtime.eager import eager_program

    refuse_placement_options(args)
    program = open_program(args.model)
    inputs = pte_inputs(program)
    with (
        make_allocator(backend) as allocator,
        scoped_allocators(allocator),
        load_method(pte_program(program), args.mode, libs, capture=capture_option(args)) as method,
    ):
        outputs = method(*inputs)
        result = method_fields(method)
        if args.profile:
            result.update(profile(method, tuple(inputs), args.profile, allocator.backend))
    with torch.no_grad():  # the delegates' modules hold parameters that require grad
        expected = eager_program(pte_program(program))(*inputs)
    ok, max_abs_err = compare_outputs(outputs, expected)
    result[RUNTIME_FIELD] = _executorch_run(args.model, program, inputs, outputs)
    return {
        "ok": ok,
        "model": args.model,
        "mode": args.mode,
        "backend": allocator.backend,
        "strategy": Strategy.EXECUTORCH,  # ExecuTorch's PropagateDevicePass placed it
        "max_abs_err": max_abs_err,
        "reference": "the program run by torch eagerly (eager_program) on seeded random inputs",
        **result,
    }


def _executorch_run(path: str, program: PteProgram, inputs: Sequence[Any], outputs: Sequence[Any]) -> dict[str, Any]:
    """ExecuTorch's portable_lib on the same bytes and inputs: whether it ran, its one-line summary, and where it ran
    the largest difference between its outputs and devcopy's."""
    from ..compare import compare_outputs
    from ..pte.executorch_runtime import run_in_executorch

    with open(path, "rb") as file:
        theirs = run_in_executorch(file.read(), inputs, program.operators)
    difference = compare_outputs(outputs, theirs.outputs)[1] if theirs.outputs is not None else None
    return {"available": theirs.available, "ran": theirs.ok, "summary": theirs.summary(), "max_abs_err": difference}


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
    lines and the fix where one lacks some, and what ExecuTorch's own portable_lib registers of the table."""
    from ..names import LIB_NAMES
    from ..pte.executorch_runtime import executorch_operators
    from ..pte.registration import pte_registration

    if ops_given:
        raise UsageError("--ops does not apply with a .pte: the program's operator table is the list; drop --ops")
    program = open_program(path)
    sets = []
    for set_mode, names in lib_sets(mode, libs):
        r = pte_registration(program, set_mode, linked_libs(names, LIB_NAMES, set_mode, "--libs"))
        sets.append(
            {
                "mode": r.mode,
                "libs": list(r.libs),
                "ok": r.ok,
                "resolved": r.resolved,
                "missing": [{"index": i, "name": name} for i, name in r.missing],
                "message": r.message,
                "rows": [row.as_dict() for row in r.rows],
            }
        )
    theirs = executorch_operators()
    executorch = {
        "available": theirs is not None,
        "registered": len(theirs or ()),
        "missing": [op for op in program.operators if theirs is not None and op not in theirs],
    }
    result = {
        "ok": True,
        "program": path,
        "plan": program.plan,
        "operators": program.operators,
        "sets": sets,
        RUNTIME_FIELD: executorch,
    }
    return Outcome(result, _render_registry)


def _render_registry(result: dict[str, Any]) -> str:
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
    check_output_path(args.save_pte, "--save-pte", (SUFFIX,))
    _need_executorch("--save-pte")
    if any("=" in value for value in args.target or ()):
        raise UsageError(
            "--save-pte writes one target device for every delegate (ExecuTorch's target_device compile spec); "
            "drop the OP=DEVICE forms of --target"
        )


def save(
    args: argparse.Namespace,
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    placed: PlacedProgram,
    target: str,
) -> dict[str, Any]:
    """Write the `.pte` ExecuTorch's own pipeline makes of the model with devcopy's partitioner and backend (the
    same delegate ops, `target` device, partitioning and skip options) to `args.save_pte`, whole or not at all."""
    from ..pte.backend import executorch_pte
    from ..pte.reader import open_pte

    # ExecuTorch exports the model again, running its forward: what the user's code raises or exits there is theirs
    with model_spec.user_code(args.model, "ExecuTorch's torch.export (--save-pte traces the model again)"):
        data = executorch_pte(
            module,
            inputs,
            placed.delegate_ops,
            target,
            args.partition,
            args.skip_h2d_inputs,
            args.skip_d2h_outputs,
        )
    write_bytes(args.save_pte, data)  # whole or not at all, 0644 like a report
    program = open_pte(data)
    copies = program.copies()
    saved = {"path": args.save_pte, "bytes": len(data), "operators": program.operators}
    saved["copies"] = {direction: calls for direction, (calls, _) in copies.items()}
    if args.strategy != Strategy.EXECUTORCH or args.hoist_constants or args.resident_buffers:
        saved["note"] = "ExecuTorch places with its own PropagateDevicePass: the .pte has its copies, not --strategy's"
    return saved
