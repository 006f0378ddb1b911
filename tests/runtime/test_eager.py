"""`eager_program`: a placed Program run by torch eagerly gives the module's outputs for every sample model, with
hoisted constants computed once, and runs no devcopy copy: the reference the call-overhead benchmark times against."""

import pytest
import torch
import torch.utils._pytree as pytree

from devcopy_lib import (
    eager_program,
    emit,
    export_and_lower,
    load_method,
    make_allocator,
    models,
    place_devices,
    scoped_allocators,
)


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_the_placed_program_run_by_torch_equals_the_module(name):
    module, inputs = models.MODELS[name]()
    module.eval()
    with torch.no_grad():
        expected = pytree.tree_leaves(module(*inputs))
        run = eager_program(emit(place_devices(export_and_lower(module, inputs))))
        got = run(*inputs)
        again = run(*inputs)  # the tensors are reused across calls; outputs are the caller's own
    assert len(got) == len(expected)
    for ours, theirs, second in zip(got, expected, again, strict=True):
        torch.testing.assert_close(ours, theirs)
        torch.testing.assert_close(second, theirs)
        assert ours.data_ptr() != second.data_ptr()


class TransposedWeight(torch.nn.Module):
    """`x @ w.t()`: the transpose depends on the weight alone, so hoisting computes it (and copies it) at load."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 2, generator=torch.Generator().manual_seed(0)))

    def forward(self, x):
        return torch.mm(x, self.w.t())


def test_hoisted_constants_are_computed_once_and_the_result_holds():
    module, x = TransposedWeight(), torch.randn(3, 2)
    with torch.no_grad():
        program = emit(place_devices(export_and_lower(module, (x,), ["mm.default"]), hoist_constants=True))
        assert program.load_instructions > 0
        run = eager_program(program)
        for _ in range(2):
            torch.testing.assert_close(run(x)[0], module(x))


def test_no_devcopy_copy_runs():
    module, inputs = models.add()
    program = emit(place_devices(export_and_lower(module, inputs)))
    with make_allocator("simulated") as allocator, scoped_allocators(allocator):
        eager_program(program)(*inputs)
        assert (allocator.stats.h2d_count, allocator.stats.d2h_count) == (0, 0)
        with load_method(program) as method:  # what the same program costs through devcopy: its copies
            method(*inputs)
        assert allocator.stats.h2d_count > 0 and allocator.stats.d2h_count > 0
