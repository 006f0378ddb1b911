"""The runtime's side of control flow (docs/semantics.md §5c): jumps checked at load, moves, the loop primitive
`et_copy_index`, lifetimes kept live over a loop, what a call did at each construct, and graph replay staying off
(what runs depends on the data)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from control_flow_models import PLACED

from devcopy_lib import emit, export_and_lower, load_method, place_devices
from devcopy_lib.kernels.prepared import KernelFailure
from devcopy_lib.kernels.prim_ops import et_copy_index
from devcopy_lib.load import load_program
from devcopy_lib.runtime.capture import CONTROL_FLOW_REASON
from devcopy_lib.runtime.failures import LoadError
from devcopy_lib.runtime.memory_plan import lifetimes
from devcopy_lib.runtime.program import JumpFalseCall, MoveCall, TensorValue
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism


@pytest.fixture(scope="module")
def programs():
    return {
        name: emit(place_devices(export_and_lower(PLACED[name][0], PLACED[name][1])))
        for name in ("cond_then_add", "map", "scan")
    }


def _fresh(program):
    return dataclasses.replace(program, instructions=list(program.instructions), memory_plan=None)


def _replace(program, kind, **changes):
    """A copy of `program` with its first instruction of `kind` changed."""
    broken = _fresh(program)
    position = next(i for i, ins in enumerate(broken.instructions) if isinstance(ins, kind))
    broken.instructions[position] = dataclasses.replace(broken.instructions[position], **changes)
    return broken, position


def test_a_jump_outside_the_program_is_refused_at_load(sim, programs):
    broken, position = _replace(programs["cond_then_add"], JumpFalseCall, destination=10_000)
    with pytest.raises(LoadError, match=rf"instruction {position} \(jump\): destination 10000 is outside") as info:
        load_program(broken)
    assert info.value.error == Error.InvalidProgram


def test_a_jump_on_a_float_tensor_is_refused_at_load(sim, programs):
    program = programs["cond_then_add"]
    floats = next(
        i for i, v in enumerate(program.values) if isinstance(v, TensorValue) and v.spec.dtype == torch.float32
    )
    broken, position = _replace(program, JumpFalseCall, cond=floats)
    with pytest.raises(LoadError, match=rf"instruction {position} \(jump\): its condition .* torch.float32 tensor"):
        load_program(broken)


def test_a_move_between_dtypes_is_refused_at_load(sim, programs):
    program = programs["cond_then_add"]
    pred = next(i for i, v in enumerate(program.values) if isinstance(v, TensorValue) and v.spec.dtype == torch.bool)
    broken, position = _replace(program, MoveCall, move_from=pred)
    with pytest.raises(LoadError, match=rf"instruction {position} \(move .*\): moves a torch.bool tensor"):
        load_program(broken)


@pytest.mark.parametrize("name", ["map", "scan"])
def test_a_value_touched_in_a_loop_lives_through_the_whole_loop(programs, name):
    program = programs[name]
    back = next(i for i, ins in enumerate(program.instructions) if isinstance(ins, JumpFalseCall))
    head = program.instructions[back].destination
    spans = lifetimes(program)
    inside = [index for index, (first, last) in spans.items() if first <= back and last >= head]
    assert inside and all(spans[i][0] <= head and spans[i][1] >= back for i in inside)


def test_a_loop_without_the_widening_would_share_bytes():
    """What the widening prevents: a body value whose own span ends early could otherwise take the bytes of one
    the next iteration still reads (checked on the lifetimes alone)."""
    from devcopy_lib.runtime.program import KernelCall, Program, ScalarValue, TensorSpec

    spec = TensorSpec(torch.float32, (4,))
    program = Program(
        values=[TensorValue(spec), TensorValue(spec), ScalarValue(False)],
        instructions=[KernelCall(0, (0, 1)), KernelCall(0, (1, 1)), JumpFalseCall(2, 0)],
        operators=["aten::sin.out"],
        inputs=[],
        outputs=[],
    )
    assert lifetimes(program)[0] == (0, 2)  # read at 0 only, yet live until the jump back to 0


def test_et_copy_index_grows_the_stacked_rows_and_checks_shapes():
    to = PortableTensor.empty(torch.float32, (3, 2), dynamism=TensorShapeDynamism.DYNAMIC_BOUND)
    for row in range(3):
        et_copy_index(to, PortableTensor.from_torch(torch.full((2,), float(row))), row)
        assert to.sizes == (row + 1, 2)
    torch.testing.assert_close(to.host_view(), torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]))
    with pytest.raises(KernelFailure, match="one dimension more") as info:
        et_copy_index(to, PortableTensor.from_torch(torch.zeros(3, 2)), 0)
    assert info.value.error == Error.InvalidArgument
    with pytest.raises(KernelFailure, match=r"row 1 of sizes \[3\] does not match"):
        et_copy_index(to, PortableTensor.from_torch(torch.zeros(3)), 1)
    with pytest.raises(KernelFailure, match="InvalidArgument|cannot|capacity|exceed"):
        et_copy_index(to, PortableTensor.from_torch(torch.zeros(2)), 3)  # a fourth row: past the planned three


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_et_copy_index_in_aten_mode_refuses_rows_past_its_memory(mode):
    if mode == "portable":
        to = PortableTensor.empty(torch.float32, (2, 2), dynamism=TensorShapeDynamism.DYNAMIC_BOUND)
    else:
        to = torch.zeros(2, 2)
    et_copy_index(to, torch.ones(2) if mode == "aten" else PortableTensor.from_torch(torch.ones(2)), 1)
    with pytest.raises(KernelFailure):
        et_copy_index(to, torch.ones(2) if mode == "aten" else PortableTensor.from_torch(torch.ones(2)), 2)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_control_flow_method_replays_no_graph_and_says_why(sim, programs, mode):
    with load_program(_fresh(programs["map"]), mode) as method:
        method(*(torch.randn(t.shape) for t in PLACED["map"][1]))
        summary = method.capture
        assert not summary["on"] and CONTROL_FLOW_REASON in summary["line"]
    with pytest.raises(LoadError, match="control flow") as info:
        load_program(_fresh(programs["map"]), mode, capture=True)
    assert info.value.error == Error.NotSupported


def test_copies_are_counted_as_they_ran_on_every_call(sim, programs):
    with load_program(_fresh(programs["map"])) as method:
        assert method.control_flow[0]["branch"] is None  # before the first call
        for calls in (1, 2):
            method(*(torch.randn(t.shape) for t in PLACED["map"][1]))
            assert method.copies_executed == {"h2d": 3 * calls, "d2h": 2 * calls}


def test_a_failure_inside_a_loop_names_the_instruction(sim, programs):
    program = _fresh(programs["map"])
    position = next(
        i
        for i, ins in enumerate(program.instructions)
        if getattr(ins, "op", None) is not None and program.operators[ins.op].endswith("et_copy_index.tensor")
    )
    row_input = program.inputs[1]  # (4,): a row has as many dimensions, not one fewer
    ins = program.instructions[position]
    program.instructions[position] = dataclasses.replace(ins, args=(row_input, *ins.args[1:]))
    with load_program(program) as method:
        with pytest.raises(Exception, match=rf"instruction {position} \(executorch_prim::et_copy_index") as info:
            method(*(torch.randn(t.shape) for t in PLACED["map"][1]))
        assert info.value.kind == "execution" and "one dimension more" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cond", "map", "scan"])
@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_control_flow_runs_on_cupy_equal_to_eager(name, mode):
    model, inputs, _ = PLACED[name]
    with load_method(place_devices(export_and_lower(model, inputs)), mode, backend="cupy") as method:
        for seed in range(3):
            call = tuple(torch.randn(t.shape, generator=torch.Generator().manual_seed(seed)) for t in inputs)
            want = model(*call)
            for got, expected in zip(method(*call), want if isinstance(want, tuple) else (want,), strict=True):
                torch.testing.assert_close(got, expected)
