"""The report's per-call byte split by role (placement/roles.py): a KV cache held as a mutated buffer or passed in and
returned updated is `cache`, what is computed from weights alone is `weights`, the rest `activations`; per direction
the roles add up to the report's copy bytes, with and without hoisting, for every strategy."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from devcopy_lib import export_and_lower, place_devices
from devcopy_lib.lowering.nodes import node_kind
from devcopy_lib.names import COPY_ROLES, STRATEGIES, CopyRole

from .random_dags import random_dags

OPS = ["mm.default", "mul.Tensor", "add.Tensor"]


class InPlaceCache(nn.Module):
    """A 4 x 8 cache buffer written at `position` in place, read by a matmul with a transposed weight."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(4, 8))
        self.weight = nn.Parameter(torch.randn(8, 8), requires_grad=False)

    def forward(self, x: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        self.cache.index_copy_(0, position, x)
        return self.cache @ self.weight.t() + x * 2


class FunctionalCache(nn.Module):
    """The same step with the cache as an input, returned updated after the result."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8, 8), requires_grad=False)

    def forward(self, x: torch.Tensor, position: torch.Tensor, cache: torch.Tensor):
        cache = cache.index_copy(0, position, x)
        return cache @ self.weight.t() + x * 2, cache


def _placed(module, inputs, **options):
    torch.manual_seed(0)
    return place_devices(export_and_lower(module, inputs, OPS), **options)


def _inputs(functional: bool):
    torch.manual_seed(0)
    x, position = torch.randn(1, 8), torch.tensor([2])
    return (x, position, torch.randn(4, 8)) if functional else (x, position)


@pytest.mark.parametrize("module", [InPlaceCache, FunctionalCache], ids=["buffer", "functional"])
def test_a_cache_a_transposed_weight_and_an_input_are_told_apart(sim, module):
    report = _placed(module(), _inputs(module is FunctionalCache)).report
    # one delegate (mm, mul, add): the updated cache (4 x 8), the weight's transpose (8 x 8), the lifted scalar 2
    # cast to float (4 B, computed from a constant) and x (1 x 8) go in, the result (4 x 8) comes out
    assert report.copies == {"h2d": 4, "d2h": 1}
    assert report.bytes_by_role() == {
        CopyRole.CACHE: {"h2d": 128, "d2h": 0},
        CopyRole.WEIGHTS: {"h2d": 260, "d2h": 0},
        CopyRole.ACTIVATIONS: {"h2d": 32, "d2h": 128},
    }
    assert "cache 128 B H2D, 0 B D2H · weights 260 B H2D" in report.roles_line()


def test_hoisting_takes_the_weights_out_of_every_call(sim):
    report = _placed(InPlaceCache(), _inputs(False), hoist_constants=True).report
    assert report.bytes_by_role()[CopyRole.WEIGHTS] == {"h2d": 0, "d2h": 0}
    assert report.bytes_by_role()[CopyRole.CACHE] == {"h2d": 128, "d2h": 0}


class PassThrough(nn.Module):
    """Returns its input unchanged beside the result: not state (nothing is written into it)."""

    def forward(self, x: torch.Tensor):
        return x * 2, x.clone()


def test_an_input_returned_as_it_came_is_not_a_cache(sim):
    report = _placed(PassThrough(), (torch.randn(4, 8),)).report
    assert report.bytes_by_role()[CopyRole.ACTIVATIONS] == {"h2d": 128, "d2h": 128}
    assert report.bytes_by_role()[CopyRole.CACHE] == {"h2d": 0, "d2h": 0}


class Stateful(nn.Module):
    """A random DAG whose first two values are a buffer (read, then written with the DAG's last value: state) and a
    transposed weight (weights-derived); the rest are the user's inputs."""

    def __init__(self, dag) -> None:
        super().__init__()
        self.dag = dag
        self.register_buffer("state", torch.randn(3, 3))
        self.weight = nn.Parameter(torch.randn(3, 3), requires_grad=False)

    def forward(self, *inputs: torch.Tensor):
        outputs = self.dag(self.state * 1, self.weight.t(), *inputs)
        self.state.copy_(outputs[-1])
        return outputs


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    dag=random_dags(),
    ops=st.sets(st.sampled_from(["add.Tensor", "mul.Tensor", "mm.default", "sin.default"]), min_size=1),
    strategy=st.sampled_from(STRATEGIES[:2]),
    hoist=st.booleans(),
)
def test_the_roles_add_up_to_the_copy_bytes_and_the_buffer_is_cache(sim, dag, ops, strategy, hoist):
    module, inputs = dag
    placed = place_devices(
        export_and_lower(Stateful(module), inputs[2:], sorted(ops)), strategy=strategy, hoist_constants=hoist
    )
    split = placed.report.bytes_by_role()
    assert list(split) == list(COPY_ROLES)
    for direction, total in placed.report.copy_bytes.items():
        assert sum(role[direction] for role in split.values()) == total, (direction, split, placed.report.copy_bytes)
    buffer = next(n for n in placed.graph_module.graph.nodes if n.op == "get_attr" and "state" in str(n.target))
    copied = [u for u in buffer.users if node_kind(u) == "h2d"]  # the buffer itself to the device (`state * 1`)
    assert split[CopyRole.CACHE]["h2d"] >= 36 * len(copied)


def test_what_a_delegate_graph_passes_through_is_found_once_and_stays_right(sim, monkeypatch):
    """The inner lineage of a delegate graph is kept per graph: a second placement of the same lowering (another
    strategy) reads it again instead of walking the graph, and gets the roles a fresh walk gives."""
    from devcopy_lib.lowering import delegate
    from devcopy_lib.placement import roles

    lowered = export_and_lower(FunctionalCache(), _inputs(True), OPS)
    first = place_devices(lowered).report.bytes_by_role()
    walks = []
    walk = roles._outputs_of
    monkeypatch.setattr(roles, "_outputs_of", lambda *args: walks.append(args) or walk(*args))
    second = place_devices(lowered, strategy="dedupe").report.bytes_by_role()
    assert walks == [] and second == first
    monkeypatch.setattr(delegate, "_FACTS", type(delegate._FACTS)())  # cold: every delegate graph walked again
    assert place_devices(lowered, strategy="dedupe").report.bytes_by_role() == first and walks
