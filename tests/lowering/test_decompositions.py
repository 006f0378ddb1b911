"""devcopy decomposes what ExecuTorch's `to_edge` decomposes (lowering/decompositions.py): the same table, so a
normalisation head (`F.normalize`: a vector norm, a clamp, a division, then a linear) has ExecuTorch's copies and
runs in portable mode, which has no `linalg_vector_norm` kernel (docs/semantics.md)."""

import copy

import pytest
import torch
from test_executorch_reference import MATRIX, assert_agree, both
from torch.nn import functional as F

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, export_program, load_method, place_devices
from devcopy_lib.lowering.decompositions import edge_decompositions
from devcopy_lib.lowering.lower import model_ops

# The ops a normalisation head decomposes into, each delegated: the set where a norm left whole differs most
ELEMENTWISE = ("pow.Tensor_Scalar", "sum.dim_IntList", "clamp.default", "div.Tensor", "expand.default", "mul.Tensor")


class NormalizeHead(torch.nn.Module):
    """`linear(normalize(x))`, or with `explicit` the same written out: `x / norm(x).clamp_min(eps)`."""

    def __init__(self, explicit: bool = False):
        super().__init__()
        self.fc, self.explicit = torch.nn.Linear(8, 4), explicit

    def forward(self, x):
        if self.explicit:
            return self.fc(x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(1e-12))
        return self.fc(F.normalize(x, dim=-1))


@pytest.mark.reference
def test_the_table_is_executorchs():
    from executorch.exir.tracer import _default_decomposition_table

    theirs = set(_default_decomposition_table().keys())  # after ExecuTorch registered its ops: both see them
    assert set(edge_decompositions().keys()) == theirs


def test_a_vector_norm_is_decomposed_like_to_edge():
    ops = model_ops(export_program(NormalizeHead(), (torch.randn(2, 8),)))
    assert "linalg_vector_norm.default" not in ops and {"pow.Tensor_Scalar", "sum.dim_IntList"} <= set(ops)


@pytest.mark.reference
@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("ops", [DEFAULT_DELEGATE_OPS, ELEMENTWISE, MATRIX], ids=["default", "elementwise", "matrix"])
def test_a_normalisation_head_places_like_executorch(explicit, ops):
    assert not assert_agree(*both(NormalizeHead(explicit), (torch.randn(2, 8),), list(ops)), (explicit, ops))


@pytest.mark.parametrize("ops", [DEFAULT_DELEGATE_OPS, ELEMENTWISE], ids=["default", "elementwise"])
def test_a_normalisation_head_runs_like_eager_in_both_modes(sim, ops):
    module, x = NormalizeHead(), torch.randn(3, 8)
    placed = place_devices(export_and_lower(module, (x,), list(ops)))
    for mode in ("portable", "aten"):
        with load_method(placed, mode) as method:
            (got,) = method(x.clone())
        torch.testing.assert_close(got, copy.deepcopy(module)(x))
