"""A .pte ExecuTorch made of a program with control flow (`torch.cond`, `control_flow.map`, `torch.scan`) runs in
devcopy's runtime in both modes equal to eager: its JumpFalseCalls, MoveCalls and loop primitives become devcopy's,
with ExecuTorch's memory plan kept."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from control_flow_models import PLACED

from devcopy_lib.load import load_method
from devcopy_lib.pte.convert import PteUnsupportedError, pte_program
from devcopy_lib.pte.reader import PteJumpFalse, PteMove, open_pte
from devcopy_lib.runtime.program import JumpFalseCall, KernelCall, MoveCall, SymValue

pytestmark = pytest.mark.reference
# nested_cond multiplies by a Python scalar, which ExecuTorch's program casts with dim_order_ops::_to_dim_order_copy
RUNNABLE = ["cond", "cond_then_add", "map", "scan", "nested_cond"]


@functools.cache
def _pte(name: str) -> bytes:
    from devcopy_lib.pte.backend import executorch_pte

    model, inputs, _ = PLACED[name]
    return executorch_pte(model, inputs)


@pytest.mark.parametrize("name", RUNNABLE)
@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_executorchs_control_flow_program_runs_equal_to_eager(sim, name, mode):
    model, inputs, _ = PLACED[name]
    with load_method(pte_program(open_pte(_pte(name))), mode) as method:
        for seed in range(4):
            call = tuple(torch.randn(t.shape, generator=torch.Generator().manual_seed(seed)) for t in inputs)
            want = model(*call)
            for got, expected in zip(method(*call), want if isinstance(want, tuple) else (want,), strict=True):
                torch.testing.assert_close(got, expected)


def test_jumps_and_moves_become_devcopys_and_written_scalars_run_time_values():
    p = open_pte(_pte("cond_then_add"))
    program = pte_program(p)
    theirs = [(i, ins) for i, ins in enumerate(p.instructions) if isinstance(ins, (PteJumpFalse, PteMove))]
    assert theirs and all(
        program.instructions[i]
        == (
            JumpFalseCall(ins.cond, ins.destination)
            if isinstance(ins, PteJumpFalse)
            else MoveCall(ins.source, ins.target)
        )
        for i, ins in theirs
    )


def test_a_loops_counter_is_a_run_time_scalar_and_scans_copy_runs_as_copy_out():
    program = pte_program(open_pte(_pte("scan")))
    assert "aten::copy.out" in program.operators and "aten::copy_" not in program.operators
    counters = {
        ins.args[-1]
        for ins in program.instructions
        if isinstance(ins, KernelCall) and program.operators[ins.op] == "executorch_prim::add.Scalar"
    }
    assert counters and all(isinstance(program.values[i], SymValue) for i in counters)


def test_a_jump_out_of_the_program_is_refused_by_name():
    p = open_pte(_pte("cond_then_add"))
    position = next(i for i, ins in enumerate(p.instructions) if isinstance(ins, PteJumpFalse))
    instructions = list(p.instructions)
    instructions[position] = dataclasses.replace(instructions[position], destination=len(instructions) + 5)
    broken = dataclasses.replace(p, instructions=instructions)
    with pytest.raises(PteUnsupportedError, match=rf"instruction {position} jumps to {len(instructions) + 5}"):
        pte_program(broken)
