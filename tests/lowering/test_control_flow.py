"""Control flow as ExecuTorch 1.5.1 handles it (docs/semantics.md §5c, docs/differences.md): `torch.cond`,
`control_flow.map` and `torch.scan` are placed with the op and its branches on the CPU and only top-level ops
partitioned (counts equal to ExecuTorch's), emitted with jumps over inline chains and run in both modes equal to
eager; `torch.while_loop`, which ExecuTorch's to_edge or emitter refuses, is refused at lowering; what ExecuTorch's
emitter refuses of map and scan is refused by name. Never a traceback, from the library or the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from control_flow_models import PLACED, MapTwoInputs, WhileLoop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_executorch_reference import MATRIX, assert_agree, both

from devcopy_lib import DEFAULT_DELEGATE_OPS, emit, export_and_lower, load_method, place_devices
from devcopy_lib.lowering.lower import UnsupportedModelError
from devcopy_lib.lowering.nodes import node_kind
from devcopy_lib.runtime.program import JumpFalseCall, MoveCall

MODES = ["portable", "aten"]


@pytest.fixture(scope="module")
def placed():
    """Each sample exported, lowered and placed once (export is the slow part)."""
    return {name: place_devices(export_and_lower(model, inputs)) for name, (model, inputs, _) in PLACED.items()}


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


@pytest.mark.parametrize("name", sorted(PLACED))
def test_control_flow_stays_on_the_cpu_and_only_top_level_ops_are_delegated(name):
    model, inputs, _ = PLACED[name]
    lowered = export_and_lower(model, inputs)  # the branches' sin/cos/add are delegate ops, yet stay in the branches
    top = {"add.Tensor", "mul.Tensor", "cos.default", "relu.default"}  # what each sample computes outside branches
    assert all(set(d.ops) <= top for d in lowered.delegates.values())
    for got, want in zip(_as_tuple(lowered(*inputs)), _as_tuple(model(*inputs)), strict=True):
        torch.testing.assert_close(got, want)  # the branches run as CPU submodules
    flow = [
        n
        for n in place_devices(lowered).graph_module.graph.nodes
        if isinstance(n.target, torch._ops.HigherOrderOperator)
    ]
    assert flow and all(node_kind(n) == "cpu_op" and str(n.meta["device"]) == "cpu" for n in flow)


@pytest.mark.parametrize(
    ("name", "counts"),
    # ExecuTorch's own numbers, compared live in the reference test below: a delegate's result copied back for the
    # CPU's predicate / loop, the construct's results copied into the next delegate
    [("cond", (2, 4, 2)), ("map", (2, 3, 2)), ("scan", (2, 5, 3))],
)
def test_control_flow_places_with_the_counts_executorch_gives(placed, name, counts):
    report = placed[name].report
    assert (report.delegates, report.copies["h2d"], report.copies["d2h"]) == counts


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(PLACED))
@pytest.mark.parametrize(
    "ops", [DEFAULT_DELEGATE_OPS, MATRIX, ("relu.default", "add.Tensor")], ids=["default", "matrix", "relu_add"]
)
@pytest.mark.parametrize("options", [{}, {"skip_d2h_for_method_outputs": True}], ids=["", "skip_d2h"])
def test_control_flow_places_like_executorch(name, ops, options):
    model, inputs, _ = PLACED[name]
    assert not assert_agree(*both(model, inputs, list(ops), **options), (name, ops, options))


@pytest.mark.parametrize("name", sorted(PLACED))
@pytest.mark.parametrize("mode", MODES)
def test_control_flow_runs_equal_to_eager(sim, placed, name, mode):
    model, inputs, _ = PLACED[name]
    with load_method(placed[name], mode) as method:
        for seed in range(4):  # new inputs each call: a cond takes either branch
            call = tuple(torch.randn(t.shape, generator=torch.Generator().manual_seed(seed)) for t in inputs)
            for got, want in zip(method(*call), _as_tuple(model(*call)), strict=True):
                torch.testing.assert_close(got, want)


def test_cond_is_emitted_as_executorch_emits_it(placed):
    """jump_false(pred) -> the false branch; the true branch moved into the cond's value; an unconditional jump
    (a constant False) over the false branch, which is moved likewise."""
    program = emit(placed["cond_then_add"])
    jumps = [(i, ins) for i, ins in enumerate(program.instructions) if isinstance(ins, JumpFalseCall)]
    moves = [i for i, ins in enumerate(program.instructions) if isinstance(ins, MoveCall)]
    (choose, first), (skip, second) = jumps
    assert first.destination == skip + 1 and second.destination == moves[1] + 1
    assert program.values[second.cond].value is False and choose < moves[0] < skip < moves[1]
    assert [program.instruction_name(i) for i in range(choose + 1, second.destination)] == [
        "aten::sin.out",
        "move",
        "jump",
        "aten::cos.out",
        "move",
    ]
    region = program.control_flow[0]
    assert (region.node, region.construct, [label for label, *_ in region.branches]) == (
        "cond",
        "torch.cond",
        ["true", "false"],
    )


@pytest.mark.parametrize("name", ["map", "scan"])
def test_a_loop_jumps_back_to_its_select_and_resets_its_counter(placed, name):
    program = emit(placed[name])
    names = [program.instruction_name(i) for i in range(len(program.instructions))]
    back = names.index("jump")
    assert program.instructions[back].destination == names.index("aten::select_copy.int_out")
    assert names[back - 3 : back] == [
        "executorch_prim::et_copy_index.tensor",
        "executorch_prim::add.Scalar",
        "executorch_prim::eq.Scalar",
    ]
    assert names[back + 1] == "executorch_prim::sub.Scalar"  # the next call starts at row 0 again


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.floats(-4, 4, allow_nan=False, width=32), min_size=4, max_size=4))
def test_cond_takes_the_branch_eager_takes_and_says_so(sim, placed, mode, values):
    x = torch.tensor(values)
    model = PLACED["cond_then_add"][0]
    with load_method(placed["cond_then_add"], mode) as method:
        torch.testing.assert_close(method(x)[0], model(x))
        (outcome,) = method.control_flow
        assert outcome["branch"] == ("true" if x.sum() > 0 else "false") and outcome["iterations"] == 1


@pytest.fixture(scope="module")
def dynamic_loops():
    """map and scan exported with a torch.export.Dim over the scanned dimension: one program, any length."""
    n = torch.export.Dim("n", min=1, max=9)
    return {
        name: place_devices(export_and_lower(PLACED[name][0], PLACED[name][1], dynamic_shapes=({0: n}, None)))
        for name in ("map", "scan")
    }


@pytest.mark.parametrize("name", ["map", "scan"])
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=3), seed=st.integers(0, 2**16))
def test_a_loop_runs_as_many_times_as_its_input_is_long(sim, dynamic_loops, name, mode, lengths, seed):
    model = PLACED[name][0]
    generator = torch.Generator().manual_seed(seed)
    with load_method(dynamic_loops[name], mode) as method:
        for length in lengths:  # one method, calls of other lengths in turn: the stacked result shrinks and grows
            call = (torch.randn(length, 4, generator=generator), torch.randn(4, generator=generator))
            for got, want in zip(method(*call), _as_tuple(model(*call)), strict=True):
                torch.testing.assert_close(got, want)
            (outcome,) = method.control_flow
            assert outcome["iterations"] == length and outcome["branch"] == "body"


def test_nested_cond_reports_both_levels(sim, placed):
    model = PLACED["nested_cond"][0]
    with load_method(placed["nested_cond"], "portable") as method:
        x = torch.full((4,), 0.75)  # sum > 0 and mean > 0.5: the outer and the inner true branch
        torch.testing.assert_close(method(x)[0], model(x))
        assert sorted(o["branch"] for o in method.control_flow) == ["true", "true"]
        x = -x  # the outer false branch: the inner cond does not run at all
        torch.testing.assert_close(method(x)[0], model(x))
        assert sorted(str(o["branch"]) for o in method.control_flow) == ["None", "false"]


def test_map_over_two_inputs_is_refused_by_name_as_executorch_refuses_it(sim):
    placed = place_devices(export_and_lower(MapTwoInputs(), (torch.randn(3, 4), torch.randn(3, 4))))
    with pytest.raises(UnsupportedModelError, match=r"is control_flow.map .*maps over 2 inputs") as info:
        load_method(placed, "portable")
    assert info.value.kind == "unsupported_model" and "ExecuTorch 1.5.1's emitter refuses it too" in str(info.value)


@pytest.mark.reference
def test_executorch_refuses_map_over_two_inputs_too():
    from devcopy_lib.pte.executorch_reference import ExecuTorchRefusal, executorch_program

    with pytest.raises((ExecuTorchRefusal, RuntimeError)):
        _ = executorch_program(MapTwoInputs(), (torch.randn(3, 4), torch.randn(3, 4)), DEFAULT_DELEGATE_OPS).buffer


def test_while_loop_is_refused_at_lowering_naming_the_construct():
    with pytest.raises(UnsupportedModelError, match=r"is torch.while_loop \(control flow over subgraphs\)") as info:
        export_and_lower(WhileLoop(), (torch.randn(4),))
    assert info.value.kind == "unsupported_model" and "ExecuTorch 1.5.1 does not" in str(info.value)


@pytest.mark.reference
def test_executorch_refuses_while_loop_too():
    from devcopy_lib.pte.executorch_reference import ExecuTorchRefusal, executorch_counts

    with pytest.raises(ExecuTorchRefusal):  # here in to_edge; with tensor carries its emitter refuses while_loop
        executorch_counts(WhileLoop(), (torch.randn(4),), DEFAULT_DELEGATE_OPS)


def test_the_cli_places_and_runs_cond(tmp_path):
    path = tmp_path / "cond_model.py"
    path.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,)) + x\n"
        "def build():\n    return M(), (torch.randn(4),)\n"
    )
    cli = [sys.executable, "-m", "devcopy_lib"]
    place = subprocess.run([*cli, "place", f"{path}:build", "--json"], capture_output=True, text=True)
    assert place.returncode == 0 and json.loads(place.stdout)["delegate_devices"] == {"delegate_0": "cuda:0"}
    run = subprocess.run(
        [*cli, "run", f"{path}:build", "--json", "--backend", "simulated"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout)["ok"] is True
