"""ExecuTorch's own programs (docs/pte.md): a `.pte` read (`read_program`), run beside the same program run by torch
eagerly and by ExecuTorch's runtime (`run_program`), its operator table resolved by each mode and lib set
(`program_registry`): what `devcopy place|run|registry PATH.pte` report."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..compare import compare_outputs
from ..errors import InvalidArgumentError
from ..names import Strategy
from ..pte import executorch_reference
from ..pte.convert import pte_inputs, pte_program
from ..pte.executorch_runtime import executorch_operators, run_in_executorch
from ..pte.reader import PteProgram, open_pte
from ..pte.registration import pte_registration
from ..runtime.eager import eager_program
from ..runtime.operator_registry import KernelLib
from .trial import RunOptions, run_trial

RUNTIME_FIELD = "executorch"  # names: the result's field of ExecuTorch's own runtime, not the strategy


def need_executorch(what: str) -> None:
    """Refuse `what` (an InvalidArgumentError) where ExecuTorch, which reads and writes `.pte` files, is missing."""
    if not executorch_reference.available():
        raise InvalidArgumentError(
            f"{what} needs ExecuTorch 1.5.1 (the `reference` extra): pip install -e '.[reference]'"
        )


def open_program(path: str) -> PteProgram:
    """The program at `path`; a path that is no file is an InvalidArgumentError (found before any work), a file
    ExecuTorch cannot read a PteLoadError (kind `load`)."""
    need_executorch(f"reading {path}")
    if not os.path.isfile(path):
        problem = "is a directory" if os.path.isdir(path) else "does not exist"
        raise InvalidArgumentError(f"{path!r} {problem}; give the path of a .pte file (written by to_executorch())")
    return open_pte(path)


@dataclass(frozen=True)
class ProgramReading:
    """A `.pte` as ExecuTorch wrote it: the program, and (`to_dict`) the fields a placed model reports that a `.pte`
    has too - delegates, their devices, copies per run - with the program's own description."""

    path: str
    program: PteProgram

    def to_dict(self) -> dict[str, Any]:
        described = self.program.to_dict()
        copies = self.program.copies()
        return {
            "ok": True,
            "model": self.path,
            "delegates": len(self.program.delegates),
            "delegate_devices": {d["name"]: d["device"] for d in described["delegates"]},
            "copies": {direction: calls for direction, (calls, _) in copies.items()},
            "copy_bytes": {direction: nbytes for direction, (_, nbytes) in copies.items()},
            "program": described,
        }


def read_program(path: str) -> ProgramReading:
    """The `.pte` at `path`, read (see `open_program` for its errors)."""
    return ProgramReading(path, open_program(path))


def run_program(path: str, run: RunOptions, backend: str) -> dict[str, Any]:
    """The `.pte` at `path` loaded as `run` says (no trace: a `.pte` has no eager module to profile beside) on
    `backend`, called once on seeded random inputs (a .pte keeps no example inputs) and compared with the same
    program run by torch eagerly; ExecuTorch's portable_lib runs the same bytes and inputs beside it."""
    program = open_program(path)
    inputs = pte_inputs(program)
    call, result = run_trial(pte_program(program), inputs, replace(run, trace=None), backend)
    with torch.no_grad():  # the delegates' modules hold parameters that require grad
        expected = eager_program(pte_program(program))(*inputs)
    ok, max_abs_err = compare_outputs(call.outputs, expected)
    result[RUNTIME_FIELD] = _executorch_run(path, program, inputs, call.outputs)
    return {
        "ok": ok,
        "model": path,
        "mode": run.mode,
        "backend": call.backend,
        "strategy": Strategy.EXECUTORCH,  # ExecuTorch's PropagateDevicePass placed it
        "max_abs_err": max_abs_err,
        "reference": "the program run by torch eagerly (eager_program) on seeded random inputs",
        **result,
    }


def _executorch_run(path: str, program: PteProgram, inputs: Any, outputs: Any) -> dict[str, Any]:
    """ExecuTorch's portable_lib on the same bytes and inputs: whether it ran, its one-line summary, and where it ran
    the largest difference between its outputs and devcopy's."""
    with open(path, "rb") as file:
        theirs = run_in_executorch(file.read(), inputs, program.operators)
    difference = compare_outputs(outputs, theirs.outputs)[1] if theirs.outputs is not None else None
    return {"available": theirs.available, "ran": theirs.ok, "summary": theirs.summary(), "max_abs_err": difference}


def program_registry(path: str, lib_sets: list[tuple[str, list[KernelLib]]]) -> dict[str, Any]:
    """The operators of the `.pte` at `path` each (mode, linked libs) of `lib_sets` resolves, ExecuTorch's `Missing
    operator` lines and the fix where one lacks some, and what ExecuTorch's own portable_lib registers of the
    table."""
    program = open_program(path)
    sets = []
    for mode, libs in lib_sets:
        r = pte_registration(program, mode, libs)
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
    return {
        "ok": True,
        "program": path,
        "plan": program.plan,
        "operators": program.operators,
        "sets": sets,
        RUNTIME_FIELD: {
            "available": theirs is not None,
            "registered": len(theirs or ()),
            "missing": [op for op in program.operators if theirs is not None and op not in theirs],
        },
    }
