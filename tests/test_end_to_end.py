"""End to end over random DAGs: export, lower, place, emit, plan, load and run in both modes; equal to eager.

Each example is one random graph lowered once, then run under both strategies in both modes (4 programs), so the
60 examples load and run 240 programs. The memory plan of each is checked too: live tensors never share bytes.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.ops.schema import ET_COPY_OPS_YAML
from devcopy_lib.passes.emit import emit
from devcopy_lib.passes.lower import export_and_lower
from devcopy_lib.passes.placement import PlacementError, place_devices
from devcopy_lib.runtime.libs import aten_lib
from devcopy_lib.runtime.memory_plan import lifetimes
from devcopy_lib.load import load_method
from devcopy_lib.runtime.program import TensorValue

UNARY = {"sin": torch.sin, "relu": torch.relu, "neg": torch.neg, "cos": torch.cos,
         "cumsum": lambda x: torch.cumsum(x, 0), "scale": lambda x: x * 0.5}
BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}
DELEGABLE = ["add.Tensor", "sub.Tensor", "mul.Tensor", "sin.default", "relu.default", "neg.default", "cos.default"]


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
    n_inputs = draw(st.integers(1, 3))
    ops = []
    for step in range(draw(st.integers(1, 6))):
        size = n_inputs + step
        name = draw(st.sampled_from(sorted(UNARY) + sorted(BINARY)))
        ops.append((name, draw(st.integers(0, size - 1)), draw(st.integers(0, size - 1))))
    results = list(range(n_inputs, n_inputs + len(ops)))
    extra = draw(st.lists(st.sampled_from(results), max_size=1))
    outputs = list(dict.fromkeys([results[-1], *extra]))
    return n_inputs, ops, outputs


def _assert_plan_sound(program) -> None:
    """Tensors live at the same time never overlap in one buffer; every buffer holds one device."""
    plan, spans = program.memory_plan, lifetimes(program)
    placed = [(i, plan.allocations[i]) for i, v in enumerate(program.values)
              if isinstance(v, TensorValue) and i in plan.allocations]
    for i, where in placed:
        assert plan.buffers[where.buffer].device == program.values[i].spec.device
    for n, (i, wi) in enumerate(placed):
        for j, wj in placed[n + 1:]:
            if wi.buffer != wj.buffer or not (spans[i][0] <= spans[j][1] and spans[j][0] <= spans[i][1]):
                continue
            size_i, size_j = program.values[i].spec.nbytes, program.values[j].spec.nbytes
            assert wi.offset + size_i <= wj.offset or wj.offset + size_j <= wi.offset


def _place(lowered, strategy: str, skip: bool):
    """Place with the skip switches when drawn; a graph whose inputs cannot skip their H2D is placed without."""
    if skip:
        try:
            return place_devices(lowered, strategy, skip_h2d_for_method_inputs=True,
                                 skip_d2h_for_method_outputs=True)
        except PlacementError:
            pass
    return place_devices(lowered, strategy)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=_dags(), delegated=st.lists(st.sampled_from(DELEGABLE), min_size=1, unique=True),
       target=st.sampled_from(["cuda:0", "cuda:1"]), partition=st.sampled_from(["capability", "per_node"]),
       rule=st.sampled_from(["seed", "tensor"]), skip=st.booleans())
def test_random_dags_match_eager_in_both_modes_and_strategies(dag, delegated, target, partition, rule, skip):
    n_inputs, ops, outputs = dag
    model = _Dag(ops, outputs)
    inputs = tuple(torch.randn(3, 4) for _ in range(n_inputs))
    expected = model(*inputs)
    lowered = export_and_lower(model, inputs, delegate_ops=delegated, target_device=target, partition=partition)
    sim = SimulatedCudaAllocator()
    with scoped_allocators(sim):
        _run_all(lowered, inputs, expected, skip, rule)
    assert sim.live_allocations() == 0


def _run_all(lowered, inputs, expected, skip: bool, rule: str) -> None:
    for strategy in ("executorch", "dedupe"):
        program = emit(_place(lowered, strategy, skip))
        for mode in ("portable", "aten"):
            libs = None if mode == "portable" else aten_lib([ET_COPY_OPS_YAML], device_rule=rule)
            with load_method(program, mode, libs) as method:
                _assert_plan_sound(program)
                for got, want in zip(method(*inputs), expected, strict=True):
                    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_the_public_api_runs_the_whole_flow(sim, mode):
    import devcopy_lib

    module, inputs = devcopy_lib.models.cpu_between()
    placed = devcopy_lib.place_devices(devcopy_lib.export_and_lower(module, inputs), strategy="dedupe")
    with devcopy_lib.load_method(placed, mode=mode) as method:
        (out,) = method(*inputs)
    torch.testing.assert_close(out, module(*inputs))
