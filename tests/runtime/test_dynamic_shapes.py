"""Dynamic shapes end to end (docs/semantics.md §5b, §6): an MLP, a conv net and a transformer block exported with a
dynamic batch and sequence place as ExecuTorch places them (no copy of a symbolic size), emit their sizes as
primitive instructions and run equal to eager at three sizes per dimension in both modes; a size outside a Dim's
bounds is refused naming the Dim."""

from __future__ import annotations

import functools
import operator

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, load_method, place_devices
from devcopy_lib.emitter.emit import emit
from devcopy_lib.kernels.prim_ops import SymBox, SymList, current, prim_name
from devcopy_lib.lowering.nodes import is_d2h, is_h2d
from devcopy_lib.models.samples import transformer_block
from devcopy_lib.names import MODES
from devcopy_lib.pte.executorch_reference import available
from devcopy_lib.runtime.failures import ExecutionError
from devcopy_lib.runtime.program import SymListValue, SymValue
from devcopy_lib.runtime.resolve import PRIM_LIB, resolve_operators

BACKENDS = ["simulated", pytest.param("cupy", marks=pytest.mark.gpu)]
BATCH = torch.export.Dim("batch", min=1, max=8)
SEQ = torch.export.Dim("seq", min=2, max=16)
# three sizes per dimension within the bounds: the smallest, one between, the largest
SIZES = [(1, 2), (3, 7), (8, 16)]
# the default set delegates the views too; with the others the views and their size lists run on the CPU
OP_SETS = {
    "default": DEFAULT_DELEGATE_OPS,
    "matrix": ("mm.default", "bmm.default", "addmm.default"),
    "elementwise": ("add.Tensor", "mul.Tensor", "relu.default"),
}


class _Mlp(nn.Module):
    """Linear-ReLU-Linear over (batch, seq, features): the flattening views carry batch * seq."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class _ConvNet(nn.Module):
    """Two 1-d convolutions over a sequence, a mean over it and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(4, 8, 3, padding=1), nn.Conv1d(8, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv2(torch.relu(self.conv1(x)))).mean(dim=-1))


def _mlp() -> tuple[nn.Module, int, int]:
    torch.manual_seed(0)
    return _Mlp(), 1, 8  # module, the sequence dimension, the feature size


def _conv() -> tuple[nn.Module, int, int]:
    torch.manual_seed(0)
    return _ConvNet(), 2, 4


def _transformer() -> tuple[nn.Module, int, int]:
    module, _ = transformer_block()
    return module, 1, 16


MODELS = {"mlp": _mlp, "conv": _conv, "transformer": _transformer}


def _input(name: str, batch: int, seq: int) -> torch.Tensor:
    _, seq_dim, features = MODELS[name]()
    sizes = [batch, features, seq] if seq_dim == 2 else [batch, seq, features]
    return torch.randn(sizes)


def _dynamic_shapes(name: str) -> dict[str, dict[int, torch.export.Dim]]:
    return {"x": {0: BATCH, MODELS[name]()[1]: SEQ}}


@functools.cache
def _lowered(name: str, ops: tuple[str, ...]):  # noqa: ANN202 - a test helper
    module = MODELS[name]()[0]
    return module, export_and_lower(module, (_input(name, 2, 4),), list(ops), dynamic_shapes=_dynamic_shapes(name))


@functools.cache
def _placed(name: str, ops: tuple[str, ...] = DEFAULT_DELEGATE_OPS):  # noqa: ANN202 - a test helper
    module, lowered = _lowered(name, ops)
    return module, place_devices(lowered)


def _counts(placed) -> tuple[int, int, int]:  # noqa: ANN001
    return placed.report.delegates, placed.report.copies["h2d"], placed.report.copies["d2h"]


@pytest.mark.parametrize("name", MODELS)
def test_no_copy_moves_a_symbolic_size(name):
    """Every H2D/D2H copies a tensor: a `sym_size.int` or a product of sizes reaches a delegate as it is."""
    _, placed = _placed(name)
    copies = [n for n in placed.graph_module.graph.nodes if is_h2d(n) or is_d2h(n)]
    assert copies and all(isinstance(n.args[0].meta["val"], torch.Tensor) for n in copies)


@pytest.mark.reference
@pytest.mark.skipif(not available(), reason="needs ExecuTorch 1.5.1 (the `reference` extra) to compare with")
@pytest.mark.parametrize(
    ("name", "ops", "skip_d2h"),
    [*((n, "default", False) for n in MODELS), ("transformer", "default", True), ("transformer", "matrix", False)],
)
def test_placement_counts_equal_executorchs(name, ops, skip_d2h):
    from devcopy_lib.pte.executorch_reference import executorch_counts

    module, lowered = _lowered(name, OP_SETS[ops])
    placed = place_devices(lowered, skip_d2h_for_method_outputs=skip_d2h)
    theirs = executorch_counts(
        module,
        (_input(name, 2, 4),),
        OP_SETS[ops],
        dynamic_shapes=_dynamic_shapes(name),
        skip_d2h_for_method_outputs=skip_d2h,
    )
    assert _counts(placed) == (theirs["delegates"], theirs["h2d"], theirs["d2h"])


def test_sizes_are_primitive_instructions_named_as_executorch_names_them():
    program = emit(_placed("transformer")[1])
    assert {"aten::sym_size.int", "executorch_prim::mul.Scalar"} <= set(program.operators)
    assert any(isinstance(v, SymValue) for v in program.values)


@pytest.mark.parametrize("mode", MODES)
def test_primitive_ops_resolve_whatever_libs_are_linked(mode):
    names = ["aten::sym_size.int", "executorch_prim::mul.Scalar", "executorch_prim::floordiv.Scalar"]
    kernels = resolve_operators(names, [], mode=mode)
    assert [k.lib for k in kernels] == [PRIM_LIB] * 3 and {k.mode for k in kernels} == {mode}
    out = SymBox(0)
    kernels[1](None, [SymBox(6), 7, out])
    assert out.value == 42
    kernels[2](None, [SymBox(17), 4, out])
    assert out.value == 4


def test_a_python_target_that_is_no_primitive_is_not_taken_for_one():
    assert prim_name(operator.getitem) is None and prim_name(torch.ops.aten.add.Tensor) is None
    assert prim_name(operator.floordiv) == "executorch_prim::floordiv.Scalar"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ops", OP_SETS)
@pytest.mark.parametrize("name", MODELS)
def test_runs_equal_to_eager_at_three_sizes_per_dim(name, ops, mode, backend):
    module, placed = _placed(name, OP_SETS[ops])
    with load_method(placed, mode, backend=backend) as method:
        for batch, seq in SIZES:
            x = _input(name, batch, seq)
            torch.testing.assert_close(method(x)[0], module(x))


def test_cpu_views_take_their_sizes_as_a_list_read_at_the_call():
    """With only the matmuls delegated, the views run on the CPU with sizes computed at the call (a SymList)."""
    program = emit(_placed("transformer", OP_SETS["matrix"])[1])
    assert any(isinstance(v, SymListValue) for v in program.values)


@settings(max_examples=6, deadline=None)
@given(batch=st.integers(1, 8), seq=st.integers(2, 16), mode=st.sampled_from(MODES))
def test_any_size_within_the_bounds_runs_equal_to_eager(batch, seq, mode):
    module, placed = _placed("mlp")
    with load_method(placed, mode, backend="simulated") as method:
        x = _input("mlp", batch, seq)
        torch.testing.assert_close(method(x)[0], module(x))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("batch", "seq", "words"),
    [
        (9, 4, "(batch) was exported for sizes 1..8"),
        (2, 17, "(seq) was exported for sizes 2..16"),
        (2, 1, "(seq) was exported for sizes 2..16"),
    ],
)
def test_a_size_outside_the_bounds_is_refused_naming_the_dim(mode, batch, seq, words):
    _, placed = _placed("transformer")
    with load_method(placed, mode, backend="simulated") as method:
        with pytest.raises(ExecutionError, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
            method(_input("transformer", batch, seq))
        x = _input("transformer", 2, 4)  # the method still runs after the refusal
        torch.testing.assert_close(method(x)[0], _placed("transformer")[0](x))


def test_a_symlist_reads_its_items_now():
    box = SymBox(3)
    items = SymList([box, 16])
    box.value = 5
    assert current(items) == [5, 16]


@pytest.mark.parametrize("ops", ["default", "matrix"])
def test_eager_program_computes_the_sizes_too(ops):
    """The eager reference runs the primitive instructions and the size lists (at the planned sizes, the bound)."""
    from devcopy_lib import eager_program

    module, placed = _placed("transformer", OP_SETS[ops])
    x = _input("transformer", 8, 16)
    torch.testing.assert_close(eager_program(emit(placed))(x)[0], module(x))
