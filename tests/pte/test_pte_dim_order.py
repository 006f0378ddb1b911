"""ExecuTorch's own .pte of ordinary models whose edge program holds its dim-order copies - `x + 1` (to_edge lifts
the scalar and casts it with `dim_order_ops::_to_dim_order_copy`), a clone (`_clone_dim_order`), a dtype cast, a
scalar inside `torch.cond`'s branch, and torchao's int8 weight-only linear (a contiguous copy of the transposed
weight) - load and run in devcopy's runtime in both modes, equal to eager and to ExecuTorch's own runtime (its
portable_lib). A copy into channels-last is refused: devcopy plans every tensor of a .pte contiguous."""

from __future__ import annotations

import functools

import pytest
import torch

from devcopy_lib.load import load_method
from devcopy_lib.pte.convert import pte_program
from devcopy_lib.pte.executorch_runtime import run_in_executorch
from devcopy_lib.pte.reader import open_pte
from devcopy_lib.pte.registration import pte_registration
from devcopy_lib.runtime.failures import ExecutionError
from devcopy_lib.tensors.error import Error

pytestmark = pytest.mark.reference
MODES = ["portable", "aten"]
TO_COPY, CLONE = "dim_order_ops::_to_dim_order_copy.out", "dim_order_ops::_clone_dim_order.out"


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


class CloneTwice(torch.nn.Module):
    def forward(self, x):
        return x.clone() * 2


class CastToDouble(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.float64) - 0.5


class ChannelsLast(torch.nn.Module):
    """A clone into channels-last: ExecuTorch plans out (and relu's out) in dim order (0, 2, 3, 1)."""

    def forward(self, x):
        return x.clone(memory_format=torch.channels_last).relu()


def _torchao_int8_weight_only():
    quantization = pytest.importorskip("torchao.quantization")
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4)).eval()
    quantization.quantize_(module, quantization.Int8WeightOnlyConfig())
    return module, (16,)


def _nested_cond():
    from control_flow_models import PLACED

    model, (example,), _ = PLACED["nested_cond"]
    return model, tuple(example.shape)


MODELS = {
    "add_one": (lambda: (AddOne(), (3, 4)), {TO_COPY}),
    "clone": (lambda: (CloneTwice(), (5,)), {CLONE}),
    "cast": (lambda: (CastToDouble(), (2, 3)), {TO_COPY}),
    "torchao_int8_weight_only": (_torchao_int8_weight_only, {TO_COPY}),
    "nested_cond": (_nested_cond, {TO_COPY}),  # a Python scalar inside torch.cond's branch
}


@functools.cache
def _built(name: str):
    from devcopy_lib.pte.backend import executorch_pte

    make, _ = MODELS[name] if name in MODELS else (lambda: (ChannelsLast(), (2, 3, 4, 5)), None)
    model, shape = make()
    example = torch.randn(2, *shape) if name.startswith("torchao") else torch.randn(*shape)
    data = executorch_pte(model, (example,), [])  # no delegate: the whole program runs on the CPU
    return model, example.shape, data


def _inputs(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_program_holds_the_dim_order_ops_and_both_modes_resolve_them(name):
    _, _, data = _built(name)
    p = open_pte(data)
    assert MODELS[name][1] <= set(p.operators)
    for mode in MODES:
        registration = pte_registration(p, mode)
        assert registration.ok, registration.message
        assert MODELS[name][1] <= set(registration.resolved)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_program_runs_equal_to_eager_and_to_executorchs_runtime(name, mode):
    model, shape, data = _built(name)
    with load_method(pte_program(open_pte(data)), mode) as method:
        for seed in range(3):
            x = _inputs(shape, seed)
            (got,) = method(x)
            theirs = run_in_executorch(data, (x,))
            assert theirs.ok, theirs.summary()
            (want,) = theirs.outputs
            assert got.dtype == want.dtype
            if name == "nested_cond":  # its else-branch's cos: ExecuTorch's own kernel rounds otherwise than torch's
                torch.testing.assert_close(got, want)
            else:
                assert torch.equal(got, want)
            with torch.no_grad():
                eager = model(x)
            if name.startswith("torchao"):  # the edge program multiplies another layout: float32 rounding
                torch.testing.assert_close(got, eager)
            else:
                assert got.dtype == eager.dtype and torch.equal(got, eager)


@pytest.mark.parametrize("mode", MODES)
def test_a_copy_into_channels_last_is_refused_at_the_call_where_executorch_runs_it(mode):
    """devcopy's .pte converter plans every tensor contiguous (its TensorSpec holds no dim order), so the clone's
    out is laid out (0, 1, 2, 3) where the program asks for (0, 2, 3, 1): the kernel's own check refuses the call,
    naming both orders, as ExecuTorch's kernel would refuse such an out. ExecuTorch plans out channels-last and runs."""
    model, shape, data = _built("channels_last")
    p = open_pte(data)
    assert [p.tensor(i).dim_order for i in (0, 1)] == [(0, 1, 2, 3), (0, 2, 3, 1)]  # the clone's self and out
    x = _inputs(shape, 0)
    theirs = run_in_executorch(data, (x,))
    assert theirs.ok and torch.equal(theirs.outputs[0], model(x))
    with load_method(pte_program(p), mode) as method:
        with pytest.raises(ExecutionError, match=r"instruction 0 \(dim_order_ops::_clone_dim_order.out\)") as info:
            method(x)
    assert info.value.error == Error.InvalidArgument
    assert "dim_order [0, 2, 3, 1] but out is laid out (0, 1, 2, 3)" in str(info.value)
