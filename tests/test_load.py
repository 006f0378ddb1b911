"""load_method: placed programs run in both modes and match eager PyTorch; failures are clean and nothing leaks."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.utils._pytree as pytree

from devcopy_lib import models
from devcopy_lib.devices import DeviceCopyError, SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.emitter.emit import emit
from devcopy_lib.load import load_method, trial_call
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.names import Direction
from devcopy_lib.ops.schema import ET_COPY_OPS_YAML
from devcopy_lib.placement.place import place_devices
from devcopy_lib.runtime.failures import ExecutionError, LoadError
from devcopy_lib.runtime.libs import aten_lib, lib_by_name
from devcopy_lib.runtime.resolve import MissingOperatorError
from devcopy_lib.tensors.error import Error


@functools.cache
def _lowered(name: str, **lowering):
    module, inputs = models.MODELS[name]()
    return module, inputs, export_and_lower(module, inputs, **lowering)


def _eager(module, inputs) -> list[torch.Tensor]:
    return pytree.tree_leaves(module(*inputs))


def _check_matches_eager(method, module, inputs):
    outputs = method(*inputs)
    expected = _eager(module, inputs)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        assert got.device.type == "cpu"
        torch.testing.assert_close(got, want)


def _balanced(allocator) -> bool:
    stats = allocator.stats
    return allocator.live_allocations() == 0 and stats.allocate_count == stats.deallocate_count


_MODES = [("portable", None), ("aten", "seed"), ("aten", "tensor")]


@pytest.mark.parametrize("strategy", ["executorch", "dedupe"])
@pytest.mark.parametrize("mode, rule", _MODES, ids=["portable", "aten-seed", "aten-tensor"])
@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_every_sample_model_matches_eager_in_both_modes(sim, name, mode, rule, strategy):
    module, inputs, lowered = _lowered(name)
    libs = None if mode == "portable" else aten_lib(custom_ops=[ET_COPY_OPS_YAML], device_rule=rule)
    with load_method(place_devices(lowered, strategy), mode, libs) as method:
        _check_matches_eager(method, module, inputs)
        assert method.copies_executed["h2d"] >= 1 and method.caller_copies == 0
    assert _balanced(sim)


def test_copies_executed_count_each_et_copy_kernel_run(sim):
    module, inputs, lowered = _lowered("add")
    with load_method(place_devices(lowered)) as method:
        method(*inputs)
        method(*inputs)
        assert method.copies_executed == {"h2d": 4, "d2h": 2}
    assert sim.stats.h2d_count == 4 and sim.stats.d2h_count == 2


def test_delegate_owned_constants_are_copied_to_the_device_once_at_load(sim):
    module, inputs, lowered = _lowered("mlp")
    with load_method(place_devices(lowered)) as method:
        at_load = sim.stats.h2d_count
        assert at_load == 4  # two weights, two biases
        method(*inputs)
        assert sim.stats.h2d_count - at_load == method.copies_executed["h2d"] == 1


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_skip_switches_make_the_caller_move_inputs_and_outputs(sim, mode):
    module, inputs, lowered = _lowered("add")
    placed = place_devices(lowered, skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True)
    with load_method(placed, mode) as method:
        _check_matches_eager(method, module, inputs)
        assert method.copies_executed == {"h2d": 0, "d2h": 0}
        assert method.caller_copies == 3
    assert _balanced(sim)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_dynamic_shapes_are_planned_at_the_bound_and_outputs_shrink(sim, mode):
    module, _ = models.mlp()
    batch = torch.export.Dim("batch", max=8)
    lowered = export_and_lower(module, (torch.randn(8, 8),), dynamic_shapes=({0: batch},))
    with load_method(place_devices(lowered), mode) as method:
        for rows in (8, 3, 1, 6):
            x = torch.randn(rows, 8)
            (out,) = method(x)
            assert out.shape == (rows, 4)
            torch.testing.assert_close(out, module(x))
        with pytest.raises(ExecutionError, match=r"dimension 0 \(batch\) was exported for sizes 0\.\.8") as info:
            method(torch.randn(9, 8))
        assert info.value.error is Error.InvalidArgument


def test_cuda1_target_plans_and_copies_on_index_1(sim):
    module, inputs = models.add()
    lowered = export_and_lower(module, inputs, target_device="cuda:1")
    with load_method(place_devices(lowered)) as method:
        assert set(method.arena_sizes) == {"cpu", "cuda:1"}
        _check_matches_eager(method, module, inputs)
    assert sim.stats.last_h2d.index == 1


def test_two_devices_get_separate_arenas_and_cross_device_copies(sim):
    module, inputs = models.back_to_back()
    lowered = export_and_lower(
        module, inputs, partition="per_node", target_device={"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    )
    with load_method(place_devices(lowered), "aten", aten_lib([ET_COPY_OPS_YAML], device_rule="tensor")) as method:
        assert set(method.arena_sizes) == {"cpu", "cuda:0", "cuda:1"}
        _check_matches_eager(method, module, inputs)


def test_without_non_cpu_memory_planning_delegates_compute_on_host_memory(sim):
    module, inputs, lowered = _lowered("add")
    with load_method(place_devices(lowered, non_cpu_memory_planning=False)) as method:
        assert set(method.arena_sizes) == {"cpu"}
        _check_matches_eager(method, module, inputs)
        assert method.copies_executed == {"h2d": 0, "d2h": 0}


def test_missing_device_copy_ops_fail_at_load_in_aten_mode_with_only_native(sim):
    _, _, lowered = _lowered("add")
    with pytest.raises(MissingOperatorError, match=r"Missing operator: \[0\] et_copy::_h2d_copy.out") as info:
        load_method(place_devices(lowered), "aten", ["native"])
    assert info.value.missing == [(0, "et_copy::_h2d_copy.out"), (1, "et_copy::_d2h_copy.out")]
    assert "device_copy_ops_aten_lib" in str(info.value)
    assert sim.stats.allocate_count == 0  # refused before any memory was taken


def test_libs_of_the_other_mode_are_refused(sim):
    _, _, lowered = _lowered("add")
    with pytest.raises(ValueError, match="not portable-mode libs"):
        load_method(place_devices(lowered), "portable", [lib_by_name("native")])


def test_no_allocator_registered_fails_the_load_with_not_found():
    _, _, lowered = _lowered("add")
    with scoped_allocators():
        with pytest.raises(LoadError, match="No DeviceAllocator registered for CUDA") as info:
            load_method(place_devices(lowered))
    assert (info.value.kind, info.value.error.name) == ("load", "NotFound")


def test_a_backend_argument_registers_that_backend_when_none_is():
    module, inputs, lowered = _lowered("add")
    with scoped_allocators():
        with load_method(place_devices(lowered), backend="simulated") as method:
            _check_matches_eager(method, module, inputs)


class _FaultyAllocator(SimulatedCudaAllocator):
    """Fails the n-th device allocation, or the n-th host->device copy, once."""

    def __init__(self, fail_allocation: int = 0, fail_copy: int = 0) -> None:
        super().__init__()
        self.fail_allocation, self.fail_copy = fail_allocation, fail_copy
        self.allocations = self.copies = 0

    def _allocate(self, nbytes, index, alignment):
        self.allocations += 1
        if self.allocations in (self.fail_allocation, self.fail_allocation + 1):  # also fail the one retry
            raise MemoryError("injected")
        return super()._allocate(nbytes, index, alignment)

    def _copy_in(self, dst, src_address, nbytes, index):
        self.copies += 1
        if self.copies == self.fail_copy:
            raise DeviceCopyError("injected copy failure")
        super()._copy_in(dst, src_address, nbytes, index)


def test_an_arena_allocation_failure_fails_the_load_and_frees_everything():
    _, _, lowered = _lowered("mlp")
    allocator = _FaultyAllocator(fail_allocation=2)  # the arena succeeds, the first constant fails
    with scoped_allocators(allocator):
        with pytest.raises(LoadError, match="Could not allocate") as info:
            load_method(place_devices(lowered))
    assert (info.value.kind, info.value.error.name) == ("load", "MemoryAllocationFailed")
    assert _balanced(allocator) and allocator.stats.allocate_count == 1


def test_a_constant_copy_failure_at_load_frees_everything():
    _, _, lowered = _lowered("mlp")
    allocator = _FaultyAllocator(fail_copy=2)
    with scoped_allocators(allocator):
        with pytest.raises(LoadError, match="injected copy failure"):
            load_method(place_devices(lowered))
    assert _balanced(allocator)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_copy_failure_mid_run_is_a_clean_error_and_close_balances(mode):
    module, inputs, lowered = _lowered("add")
    allocator = _FaultyAllocator(fail_copy=2)
    with scoped_allocators(allocator):
        method = load_method(place_devices(lowered), mode)
        with pytest.raises(ExecutionError, match=r"instruction 1 \(et_copy::_h2d_copy.out\)") as info:
            method(*inputs)
        assert info.value.error is Error.Internal
        _check_matches_eager(method, module, inputs)  # the fault was one-off: the method still runs
        method.close()
    assert _balanced(allocator)


def test_inputs_are_checked_by_count_dtype_and_shape(sim):
    _, inputs, lowered = _lowered("add")
    with load_method(place_devices(lowered)) as method:
        with pytest.raises(ExecutionError, match="takes 2 inputs, got 1"):
            method(inputs[0])
        with pytest.raises(ExecutionError, match="expected a CPU torch.float32 tensor"):
            method(inputs[0].double(), inputs[1])
        with pytest.raises(
            ExecutionError, match=r"input 0: dimension 0 is static in the plan \(size 4\) and cannot take 2"
        ):
            method(torch.randn(2, 4), inputs[1])


def test_a_closed_method_refuses_to_run_and_closing_twice_is_harmless(sim):
    _, inputs, lowered = _lowered("add")
    method = load_method(place_devices(lowered))
    method.close()
    method.close()
    with pytest.raises(ExecutionError, match="closed"):
        method(*inputs)
    assert _balanced(sim)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_thousand_load_run_close_cycles_leak_nothing(sim, mode):
    module, inputs, lowered = _lowered("add")
    program = emit(place_devices(lowered))
    for _ in range(1000):
        with load_method(program, mode) as method:
            method(*inputs)
    assert _balanced(sim) and sim.stats.allocate_count == 1000
    assert sim.stats.live_bytes == 0


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["portable", "aten"])
@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_every_sample_model_matches_eager_on_cuda_with_cupy(name, mode):
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    module, inputs, lowered = _lowered(name)
    allocator = CupyCudaAllocator()
    with scoped_allocators(allocator):
        with load_method(place_devices(lowered), mode) as method:
            _check_matches_eager(method, module, inputs)
    assert allocator.live_allocations() == 0


@pytest.mark.gpu
def test_a_module_moved_to_the_gpu_after_lowering_still_loads_and_matches():
    """`.cuda()` moves the parameters the lowered program shares with the module: the constants load from the GPU."""
    module, inputs = models.MODELS["mlp"]()
    lowered = export_and_lower(module, inputs)
    expected = _eager(module, inputs)
    module.cuda()
    with load_method(place_devices(lowered), backend="cupy") as method:
        for got, want in zip(method(*inputs), expected, strict=True):
            torch.testing.assert_close(got, want)


def test_trial_call_runs_once_on_its_own_allocator_and_keeps_the_counts():
    module, inputs, lowered = _lowered("mlp")
    checked = []
    call = trial_call(place_devices(lowered), inputs, backend="simulated", before_load=checked.append, profile_calls=2)
    assert len(checked) == 1 and checked[0].closed  # handed the fresh allocator, closed on return
    assert call.backend == "simulated" and set(call.summary) == {
        "copies_executed",
        "caller_copies",
        "arena_bytes",
        "capture",
    }
    assert call.summary["copies_executed"][Direction.H2D] > 0 and call.profile and len(call.program.instructions) > 0
    for got, want in zip(call.outputs, _eager(module, inputs), strict=True):
        torch.testing.assert_close(got, want)


def test_trial_call_refused_before_load_loads_nothing():
    _, inputs, lowered = _lowered("mlp")

    def refuse(allocator):
        raise ValueError("no such device")

    with pytest.raises(ValueError, match="no such device"):
        trial_call(place_devices(lowered), inputs, backend="simulated", before_load=refuse)
