"""The `executorch` strategy as ExecuTorch 1.5.1 lowers: to_edge's scalar lifting, dropped assertions, and programs
that mutate a buffer or an input (counts pinned here; test_executorch_reference.py checks them against ExecuTorch)."""

import copy

import pytest
import torch
from placement_helpers import Fn, count, inputs
from torch import nn

from devcopy_lib import export_and_lower, load_method, place_devices
from devcopy_lib.lowering.nodes import node_kind


def placed_counts(module, args, ops, **options):
    placed = place_devices(export_and_lower(module, args, ops), **options)
    return placed, (placed.report.delegates, placed.report.copies["h2d"], placed.report.copies["d2h"])


def run_like_eager(placed, module, args, calls=2):
    """Each call of the loaded program (both modes) equals a call of the module, mutations included."""
    for mode in ("portable", "aten"):
        eager = copy.deepcopy(module)
        with load_method(placed, mode) as method:
            for _ in range(calls):
                ours, theirs = [a.clone() for a in args], [a.clone() for a in args]
                got, want = method(*ours), eager(*theirs)
                for g, w in zip(got, want if isinstance(want, tuple) else (want,), strict=True):
                    torch.testing.assert_close(g, w)
                for o, t in zip(ours, theirs, strict=True):  # a mutated input reaches the caller as in eager
                    torch.testing.assert_close(o, t)


def test_an_int_scalar_of_a_float_op_is_a_constant_cast_on_the_cpu_then_copied(sim):
    placed, counts = placed_counts(Fn(lambda x: x + 1), inputs(1), ["add.Tensor"])
    assert counts == (1, 2, 1)
    cast = next(n for n in placed.graph_module.graph.nodes if node_kind(n) == "cpu_op")
    assert cast.target is torch.ops.aten._to_copy.default and cast.kwargs["dtype"] is torch.float32
    constant = placed.graph_module.get_buffer(cast.args[0].target)
    assert constant.dtype is torch.int64 and constant.dim() == 0 and constant.item() == 1
    run_like_eager(placed, Fn(lambda x: x + 1), inputs(1))


def test_a_float_scalar_of_a_float32_op_needs_no_cast_and_is_owned_by_the_delegate():
    _, counts = placed_counts(Fn(lambda x: x * 2.5), inputs(1), ["mul.Tensor"])
    assert counts == (1, 1, 1)


def test_hardswish_scalars_are_lifted_like_to_edge(sim):
    module = Fn(lambda x: nn.functional.hardswish(x))
    placed, counts = placed_counts(module, inputs(1), ["add.Tensor", "mul.Tensor", "div.Tensor", "clamp.default"])
    # `+ 3` and `/ 6` are lifted and cast on the CPU; clamp's bounds are Scalars and stay scalars
    assert counts == (1, 3, 1)
    run_like_eager(placed, module, inputs(1))


def test_no_copy_for_a_value_only_an_assertion_reads():
    module = Fn(lambda x: torch.sin(x).to(torch.float32).cos())  # `.to` of the same dtype: only an assertion
    placed, counts = placed_counts(module, inputs(1), ["sin.default", "cos.default"])
    assert counts == (1, 1, 1)
    assert not any("assert" in str(n.target) for n in placed.graph_module.graph.nodes)


class BufferUpdate(nn.Module):
    """`b += x; return sin(b)`: a mutated buffer read by a delegate."""

    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(2, 2))

    def forward(self, x):
        self.b.add_(x)
        return torch.sin(self.b)


def test_a_mutated_buffer_read_by_a_delegate_is_copied_in_and_its_new_value_out(sim):
    module = BufferUpdate()
    placed, counts = placed_counts(module, inputs(1), ["add.Tensor", "sin.default"])
    assert counts == (1, 2, 2)  # H2D of b and x; D2H of the new b (written back) and of the output
    write_back = [n for n in placed.graph_module.graph.nodes if n.target is torch.ops.aten.copy_.default]
    assert len(write_back) == 1 and node_kind(write_back[0].args[1]) == "d2h"
    run_like_eager(placed, module, inputs(1), calls=3)  # the buffer keeps its state across calls
    torch.testing.assert_close(module.b, torch.ones(2, 2))  # lowering and running never touch the model's buffer


def test_a_mutated_input_is_written_back_to_the_callers_tensor(sim):
    def mutate(x, y):
        x.mul_(2)
        return x + y

    placed, counts = placed_counts(Fn(mutate), inputs(2), ["add.Tensor", "mul.Tensor"])
    assert counts == (1, 3, 2) and placed.written_back_inputs == (0,)
    run_like_eager(placed, Fn(mutate), inputs(2))


def test_skip_h2d_refuses_a_mutated_input_it_cannot_retag():
    def mutate(x):
        x.add_(1.0)
        return x.sin()

    with pytest.raises(RuntimeError, match="exactly one user"):
        placed_counts(Fn(mutate), inputs(1), ["add.Tensor", "sin.default"], skip_h2d_for_method_inputs=True)


def test_a_whole_dimension_slice_is_dropped_as_to_edge_drops_it():
    module = Fn(lambda x: torch.sin(x)[:2].cos())  # x has 2 rows: the slice keeps them all
    placed, counts = placed_counts(module, inputs(1), ["sin.default", "cos.default"])
    assert counts == (1, 1, 1) and count(placed.graph_module, "cpu_op") == 0


@pytest.mark.gpu
def test_mutation_lifting_and_hoisting_run_equal_to_eager_on_cuda_with_cupy():
    from devcopy_lib.devices import scoped_allocators
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    def mutate(x, y):
        x.mul_(2)
        return x + y + 1

    with scoped_allocators(CupyCudaAllocator()):
        for module, n_inputs, ops in [
            (BufferUpdate(), 1, ["add.Tensor", "sin.default"]),
            (Fn(mutate), 2, ["add.Tensor", "mul.Tensor"]),
        ]:
            for hoist in (False, True):
                placed = place_devices(export_and_lower(module, inputs(n_inputs), ops), hoist_constants=hoist)
                run_like_eager(placed, module, inputs(n_inputs), calls=3)


def test_each_loaded_method_has_its_own_buffer_state(sim):
    """Two methods loaded from one emitted program, as in ExecuTorch: each starts from the buffer's initial value and
    its calls change only its own state; a method loaded later starts afresh too."""
    from devcopy_lib import emit

    program = emit(place_devices(export_and_lower(BufferUpdate(), inputs(1), ["add.Tensor", "sin.default"])))
    for mode in ("portable", "aten"):
        with load_method(program, mode) as first, load_method(program, mode) as second:
            first(*inputs(1)), first(*inputs(1))
            torch.testing.assert_close(second(*inputs(1))[0], BufferUpdate()(*inputs(1)))
            torch.testing.assert_close(first(*inputs(1))[0], torch.sin(torch.ones(2, 2) + 3 * inputs(1)[0]))
        with load_method(program, mode) as later:
            torch.testing.assert_close(later(*inputs(1))[0], BufferUpdate()(*inputs(1)))
