"""End to end over random DAGs: export, lower, place, emit, plan, load and run in both modes; equal to eager.

Every example delegates: the delegated ops are drawn from the ops its graph has. Shapes and dtypes vary, and inputs
are random bit patterns (negatives, NaN, infinities, -0.0), so copies carry values arithmetic tests rarely meet. Each
example is one graph lowered once and run under both strategies in both modes (4 programs); the memory plan of each
is checked too: live tensors never share bytes. The `deep` variant runs many more, unseeded (`make test-deep`).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_dags import random_bits, same_bits
from torch import nn

from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.emitter.emit import emit
from devcopy_lib.load import load_method
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.ops.schema import ET_COPY_OPS_YAML
from devcopy_lib.placement.place import PlacementError, place_devices
from devcopy_lib.runtime.libs import aten_lib
from devcopy_lib.runtime.memory_plan import lifetimes
from devcopy_lib.runtime.program import TensorValue

UNARY = {
    "sin": torch.sin,
    "relu": torch.relu,
    "neg": torch.neg,
    "cos": torch.cos,
    "cumsum": lambda x: torch.cumsum(x, 0),
    "scale": lambda x: x * 0.5,
}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}
# The overload each op becomes after decomposition; cumsum is never delegated (it stays a CPU op).
OVERLOAD = {
    "sin": "sin.default",
    "relu": "relu.default",
    "neg": "neg.default",
    "cos": "cos.default",
    "scale": "mul.Tensor",
    "add": "add.Tensor",
    "sub": "sub.Tensor",
    "mul": "mul.Tensor",
}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SHAPES = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


class _Dag(nn.Module):
    """Runs `ops` [(name, a, b)] over a value pool that starts with the inputs; returns the chosen values."""

    def __init__(self, ops: list[tuple[str, int, int]], outputs: list[int]) -> None:
        super().__init__()
        self.ops, self.outputs = ops, outputs

    def forward(self, *inputs):
        pool = list(inputs)
        for name, a, b in self.ops:
            pool.append(UNARY[name](pool[a]) if name in UNARY else BINARY[name](pool[a], pool[b]))
        return tuple(pool[i] for i in self.outputs)


@st.composite
def _dags(draw):
    """(n_inputs, ops, outputs); the first op is a delegable one and an output, so every graph has something to
    delegate."""
    n_inputs = draw(st.integers(1, 3))
    ops = []
    for step in range(draw(st.integers(1, 6))):
        size = n_inputs + step
        names = sorted(OVERLOAD) if step == 0 else sorted(UNARY) + sorted(BINARY)
        ops.append((draw(st.sampled_from(names)), draw(st.integers(0, size - 1)), draw(st.integers(0, size - 1))))
    results = list(range(n_inputs, n_inputs + len(ops)))
    extra = draw(st.lists(st.sampled_from(results), max_size=1))
    outputs = list(dict.fromkeys([results[-1], results[0], *extra]))  # the first op's value is used: never dead
    return n_inputs, ops, outputs


def _live_ops(n_inputs: int, ops: list[tuple[str, int, int]], outputs: list[int]) -> list[tuple[str, int, int]]:
    """The ops whose values reach an output (export drops the others, so they cannot be delegated)."""
    live, needed = [], set(outputs)
    for index in reversed(range(len(ops))):
        name, a, b = ops[index]
        if n_inputs + index in needed:
            live.append(ops[index])
            needed |= {a} if name in UNARY else {a, b}
    return live


def _assert_plan_sound(program) -> None:
    """Tensors live at the same time never overlap in one buffer; every buffer holds one device."""
    plan, spans = program.memory_plan, lifetimes(program)
    placed = [
        (i, plan.allocations[i])
        for i, v in enumerate(program.values)
        if isinstance(v, TensorValue) and i in plan.allocations
    ]
    for i, where in placed:
        assert plan.buffers[where.buffer].device == program.values[i].spec.device
    for n, (i, wi) in enumerate(placed):
        for j, wj in placed[n + 1 :]:
            if wi.buffer != wj.buffer or not (spans[i][0] <= spans[j][1] and spans[j][0] <= spans[i][1]):
                continue
            size_i, size_j = program.values[i].spec.nbytes, program.values[j].spec.nbytes
            assert wi.offset + size_i <= wj.offset or wj.offset + size_j <= wi.offset


def _place(lowered, strategy: str, skip: bool):
    """Place with the skip switches when drawn; a graph whose inputs cannot skip their H2D is placed without."""
    if skip:
        try:
            return place_devices(lowered, strategy, skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True)
        except PlacementError:
            pass
    return place_devices(lowered, strategy)


def check_random_dag(data) -> None:
    """One random graph that delegates, at a random shape and dtype, run 4 ways; each output equal to eager."""
    n_inputs, ops, outputs = data.draw(_dags(), label="dag")
    graph_ops = sorted({OVERLOAD[name] for name, _, _ in _live_ops(n_inputs, ops, outputs) if name in OVERLOAD})
    delegated = data.draw(st.lists(st.sampled_from(graph_ops), min_size=1, unique=True), label="delegated")
    shape, dtype = data.draw(SHAPES, label="shape"), data.draw(st.sampled_from(DTYPES), label="dtype")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    model = _Dag(ops, outputs)
    inputs = tuple(random_bits(dtype, shape, seed + i) for i in range(n_inputs))
    expected = model(*inputs)
    lowered = export_and_lower(
        model,
        inputs,
        delegate_ops=delegated,
        target_device=data.draw(st.sampled_from(["cuda:0", "cuda:1"]), label="target"),
        partition=data.draw(st.sampled_from(["capability", "per_node"]), label="partition"),
    )
    assert lowered.delegates, f"{delegated} are in the graph, so something is delegated"
    sim = SimulatedCudaAllocator()
    with scoped_allocators(sim):
        _run_all(
            lowered,
            inputs,
            expected,
            data.draw(st.booleans(), label="skip"),
            data.draw(st.sampled_from(["seed", "tensor"]), label="rule"),
        )
    assert sim.stats.h2d_count + sim.stats.d2h_count > 0, "a delegated program copies"
    assert sim.live_allocations() == 0


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_dags_match_eager_in_both_modes_and_strategies(data):
    check_random_dag(data)


@pytest.mark.deep
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_dags_match_eager_in_both_modes_and_strategies_deep(data):
    check_random_dag(data)


def _run_all(lowered, inputs, expected, skip: bool, rule: str) -> None:
    for strategy in ("executorch", "dedupe"):
        program = emit(_place(lowered, strategy, skip))
        for mode in ("portable", "aten"):
            libs = None if mode == "portable" else aten_lib([ET_COPY_OPS_YAML], device_rule=rule)
            with load_method(program, mode, libs) as method:
                _assert_plan_sound(program)
                for got, want in zip(method(*inputs), expected, strict=True):
                    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_the_public_api_runs_the_whole_flow(sim, mode):
    import devcopy_lib

    module, inputs = devcopy_lib.models.cpu_between()
    placed = devcopy_lib.place_devices(devcopy_lib.export_and_lower(module, inputs), strategy="dedupe")
    with devcopy_lib.load_method(placed, mode=mode) as method:
        (out,) = method(*inputs)
    torch.testing.assert_close(out, module(*inputs))


class _Neg(nn.Module):
    def forward(self, x):
        return -x


@pytest.mark.parametrize("mode", ["portable", "aten"])
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int64]),
    shape=SHAPES,
    seed=st.integers(0, 2**32 - 1),
)
def test_copies_carry_every_bit_pattern_through_a_delegate(mode, dtype, shape, seed):
    """H2D, a delegated `neg`, D2H: the output has eager's bits exactly (NaN payloads, -0.0 and infinities too)."""
    x = random_bits(dtype, shape, seed)
    lowered = export_and_lower(_Neg(), (x,), delegate_ops=["neg.default"])
    with scoped_allocators(SimulatedCudaAllocator()), load_method(place_devices(lowered), mode) as method:
        (out,) = method(x)
        assert dict(method.copies_executed) == {"h2d": 1, "d2h": 1}
    assert same_bits(out, -x)
