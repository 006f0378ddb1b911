"""The precompiled plan of a loaded Method: shared safely by threads, usable after an interrupt, freed when dropped,
bound to the allocators it was loaded with, strict about dynamic shapes and about which device a delegate reads."""

from __future__ import annotations

import dataclasses
import functools
import gc
import re
import warnings

import pytest
import torch
from torch import nn

from devcopy_lib import models
from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.devices.device import Device
from devcopy_lib.devices.errors import DeviceCopyError
from devcopy_lib.emitter.emit import emit
from devcopy_lib.load import load_method
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.ops.schema import ET_COPY_OPS_YAML
from devcopy_lib.placement.place import place_devices
from devcopy_lib.runtime.failures import ExecutionError, LoadError
from devcopy_lib.runtime.libs import aten_lib, libs_of_mode
from devcopy_lib.runtime.method import Method
from devcopy_lib.runtime.program import DelegateCall
from devcopy_lib.runtime.resolve import resolve_operators
from devcopy_lib.tensors.error import Error
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism


class _ReluMix(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y) * 2 - y


class _CpuCumsum(nn.Module):
    def forward(self, a, b):
        return torch.cumsum(a + b, 0) * b


def _libs(mode):
    return None if mode == "portable" else aten_lib(custom_ops=[ET_COPY_OPS_YAML])


@functools.cache
def _program(name: str):
    module, inputs = models.MODELS[name]()
    return module, inputs, emit(place_devices(export_and_lower(module, inputs)))


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_one_method_shared_by_threads_returns_each_caller_its_own_outputs(sim, mode, run_concurrently):
    module = _ReluMix()
    example = (torch.randn(64, 64), torch.randn(64, 64))
    wrong = []

    def worker(seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        for _ in range(40):
            x, y = torch.randn(64, 64, generator=generator), torch.randn(64, 64, generator=generator)
            (got,) = method(x, y)
            if not torch.equal(got, module(x, y)):
                wrong.append(seed)

    with load_method(place_devices(export_and_lower(module, example)), mode, _libs(mode)) as method:
        run_concurrently(worker, switch_interval=1e-5)
    assert wrong == []


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_an_interrupt_mid_call_leaves_the_method_usable(sim, mode):
    module, inputs, program = _program("add")
    with load_method(program, mode, _libs(mode)) as method:

        def interrupt_at_the_delegate(step):
            if step.kind == "delegate":
                raise KeyboardInterrupt
            step.run()

        with pytest.raises(KeyboardInterrupt):
            method(*inputs, on_step=interrupt_at_the_delegate)
        x, y = torch.randn(4, 4), torch.randn(4, 4)
        (got,) = method(x, y)  # the next call is not blocked and rewrites everything the interrupted one left
        torch.testing.assert_close(got, module(x, y))


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_an_interrupt_before_the_first_input_is_set_propagates_as_itself(sim, mode, monkeypatch):
    """Ctrl-C arriving as the call starts setting inputs (here: at the loop's first step) is the KeyboardInterrupt
    the user pressed, counts no copy, and leaves the method usable."""
    from devcopy_lib.runtime import plan

    module, inputs, program = _program("add")
    with load_method(program, mode, _libs(mode)) as method:

        def interrupted(*_):
            raise KeyboardInterrupt

        monkeypatch.setattr(plan, "zip", interrupted, raising=False)
        with pytest.raises(KeyboardInterrupt):
            method(*inputs)
        monkeypatch.undo()
        assert method.caller_copies == 0
        x, y = torch.randn(4, 4), torch.randn(4, 4)
        torch.testing.assert_close(method(x, y)[0], module(x, y))


def test_a_method_dropped_without_close_frees_its_device_memory(sim):
    _, inputs, program = _program("mlp")
    for _ in range(20):
        method = load_method(program)
        method(*inputs)
        assert sim.live_allocations() > 0
        del method
    gc.collect()
    assert sim.live_allocations() == 0 and sim.stats.allocate_count == sim.stats.deallocate_count


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_method_keeps_the_allocator_it_was_loaded_with(sim, mode):
    module, inputs, program = _program("add")
    with load_method(program, mode, _libs(mode)) as method:
        other = SimulatedCudaAllocator()
        with scoped_allocators(other):  # what a background sweep or another notebook cell may register
            (got,) = method(*inputs)
        torch.testing.assert_close(got, module(*inputs))
        assert other.stats.h2d_count == 0 and sim.stats.h2d_count == 2 and sim.stats.d2h_count == 1


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_static_program_refuses_an_input_of_other_sizes_naming_the_dimension(sim, mode):
    module, _ = models.mlp()
    with load_method(place_devices(export_and_lower(module, (torch.randn(16, 8),))), mode, _libs(mode)) as method:
        with pytest.raises(
            ExecutionError, match=r"input 0: dimension 0 is static in the plan \(size 16\) and cannot take 4 .*Dim"
        ) as info:
            method(torch.randn(4, 8))
        assert info.value.error is Error.InvalidArgument and method.copies_executed == {"h2d": 0, "d2h": 0}
        x = torch.randn(16, 8)
        torch.testing.assert_close(method(x)[0], module(x))


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_dynamic_shapes_refuse_a_changed_static_dimension(sim, mode):
    module, _ = models.mlp()
    batch = torch.export.Dim("batch", max=16)
    lowered = export_and_lower(module, (torch.randn(16, 8),), dynamic_shapes=({0: batch},))
    with load_method(place_devices(lowered), mode, _libs(mode)) as method:
        with pytest.raises(
            ExecutionError, match=r"input 0: dimension 1 is static in the plan \(size 8\) and cannot take 9"
        ) as info:
            method(torch.randn(4, 9))  # 36 elements fit the plan of 16x8, the second dimension was exported static
        assert info.value.error is Error.InvalidArgument
        with pytest.raises(ExecutionError, match=r"dimension 1 is static in the plan \(size 8\) and cannot take 7"):
            method(torch.randn(4, 7))
        x = torch.randn(5, 8)
        torch.testing.assert_close(method(x)[0], module(x))  # still runs after the refusals


def test_aten_mode_resizes_dynamic_outputs_without_torch_warnings(sim, capfd):
    module = _CpuCumsum()
    rows = torch.export.Dim("rows", max=8)
    example = (torch.randn(8, 4), torch.randn(8, 4))
    lowered = export_and_lower(module, example, dynamic_shapes=({0: rows}, {0: rows}))
    with load_method(place_devices(lowered), "aten", _libs("aten")) as method:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in (8, 3, 6, 1):
                a, b = torch.randn(n, 4), torch.randn(n, 4)
                torch.testing.assert_close(method(a, b)[0], module(a, b))
    assert [str(w.message) for w in caught if "resized" in str(w.message)] == []
    assert "resized" not in capfd.readouterr().err  # PyTorch's C++ warning goes to stderr directly


def test_a_delegate_reading_another_devices_memory_is_refused_at_load(sim):
    _, _, program = _program("add")
    moved = dataclasses.replace(
        program, delegates=[dataclasses.replace(d, device=Device.parse("cuda:1")) for d in program.delegates]
    )
    with pytest.raises(LoadError, match=r"delegate delegate_0 on cuda:1\): input 0 is in cuda:0 memory") as info:
        load_method(moved)
    assert (info.value.kind, info.value.error.name) == ("load", "InvalidProgram")
    assert sim.live_allocations() == 0  # nothing kept from the refused load


def test_the_plan_prepares_each_instruction_once_and_copies_keep_the_allocator_statistics(sim):
    _, inputs, program = _program("transformer_block")
    with load_method(program) as method:
        expected = [
            "delegate"
            if isinstance(ins, DelegateCall)
            else "copy"
            if program.operators[ins.op].startswith("et_copy::")
            else "kernel"
            for ins in program.instructions
        ]
        assert [step.kind for step in method.steps] == expected and {"copy", "delegate"} <= set(expected)
        at_load, bytes_at_load = sim.stats.h2d_count, sim.stats.h2d_bytes  # the delegates' constants
        method(*inputs)
        copies = [step for step in method.steps if step.kind == "copy"]
        assert (
            sim.stats.h2d_count - at_load == method.copies_executed["h2d"] == sum(s.direction == "h2d" for s in copies)
        )
        assert sim.stats.h2d_bytes - bytes_at_load == sum(s.moved for s in copies if s.direction == "h2d")
        assert sim.stats.d2h_bytes == sum(s.moved for s in copies if s.direction == "d2h")


def test_a_planned_copy_refuses_more_than_it_validated_and_a_freed_buffer(sim):
    import numpy as np

    ptr = sim.allocate(64)
    host = np.arange(64, dtype=np.uint8)
    planned = sim.planned_copy("h2d", ptr, host, 64, 0)
    planned(32)
    assert sim.stats.h2d_count == 1 and sim.stats.h2d_bytes == 32 and sim.stats.last_h2d.size == 32
    with pytest.raises(ValueError, match="validated for 0..64 bytes"):
        planned(65)
    with pytest.raises(ValueError, match="do not fit in the device allocation"):
        sim.planned_copy("d2h", ptr, np.empty(128, np.uint8), 128, 0)
    sim.deallocate(ptr)
    with pytest.raises(ValueError, match="already freed"):
        planned(8)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_on_cuda_the_plan_matches_eager_is_thread_safe_and_profiles_on_events(mode, run_concurrently):
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    allocator = CupyCudaAllocator()
    module, inputs, program = _program("transformer_block")
    with scoped_allocators(allocator), load_method(program, mode, _libs(mode)) as method:
        torch.testing.assert_close(method(*inputs)[0], module(*inputs))
        results = []

        def worker(seed: int) -> None:
            x = torch.randn(1, 4, 16, generator=torch.Generator().manual_seed(seed))
            results.extend(
                torch.equal(method(x)[0], method(x)[0]) and torch.allclose(method(x)[0], module(x), atol=1e-5)
                for _ in range(20)
            )

        run_concurrently(worker)
        assert results and all(results)
        rows = method.profile(*inputs, repeat=3)
        assert {r["clock"] for r in rows if r["kind"] != "kernel"} == {"events"}
        assert {r["memory"] for r in rows if r["kind"] == "copy"} == {"pinned"}  # the arenas are page-locked
    assert allocator.live_allocations() == 0


def test_a_planned_copy_is_refused_for_another_devices_index(sim):
    import numpy as np

    ptr = sim.allocate(64, 0)
    with pytest.raises(ValueError, match="lives on cuda:0 but index 1 was passed"):
        sim.planned_copy("h2d", ptr, np.zeros(64, np.uint8), 64, 1)
    assert sim.planned_copy("h2d", ptr, np.zeros(64, np.uint8), 64, -1).index == 0  # -1: the current device


def _boxed_only(kernel, calls):
    """`kernel` as a user would register it: a plain boxed function, no prepare step."""

    def boxed(ctx, args):
        calls.append(kernel.name)
        return kernel.fn(ctx, args)

    return dataclasses.replace(kernel, fn=boxed)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_kernel_without_prepare_runs_boxed_every_call_on_the_methods_allocator(sim, mode):
    module, inputs, program = _program("add")
    calls = []
    kernels = [
        _boxed_only(k, calls) if k.name.startswith("et_copy::") else k
        for k in resolve_operators(program, libs_of_mode(mode, _libs(mode)))
    ]
    with Method(program, mode, kernels) as method:
        other = SimulatedCudaAllocator()
        for _ in range(2):
            with scoped_allocators(other):  # registered after load: the method's copies must not use it
                torch.testing.assert_close(method(*inputs)[0], module(*inputs))
        assert len(calls) == 6 and set(calls) == {"et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"}
        assert other.stats.h2d_count == 0 and sim.stats.h2d_count == 4 and sim.stats.d2h_count == 2
        assert method.copies_executed == {"h2d": 4, "d2h": 2}


def test_a_failing_kernel_without_prepare_names_its_instruction(sim):
    _, inputs, program = _program("add")

    def refuse(ctx, args):
        ctx.fail(Error.NotSupported, "refused by the user's kernel")
        return args[-1]

    kernels = [
        dataclasses.replace(k, fn=refuse) if k.name == "et_copy::_d2h_copy.out" else k
        for k in resolve_operators(program, libs_of_mode("portable", None))
    ]
    with Method(program, "portable", kernels) as method:
        index = next(s.index for s in method.steps if s.direction == "d2h")
        with pytest.raises(
            ExecutionError,
            match=rf"^instruction {index} \(et_copy::_d2h_copy.out\) failed with "
            "NotSupported: refused by the user's kernel$",
        ) as info:
            method(*inputs)
        assert info.value.error is Error.NotSupported and method.copies_executed == {"h2d": 2, "d2h": 0}


class _FailNextCopyIn(SimulatedCudaAllocator):
    """Fails the next host->device copy once `armed`."""

    armed = False

    def _copy_in(self, dst, src_address, nbytes, index):
        if self.armed:
            self.armed = False
            raise DeviceCopyError("injected copy failure")
        super()._copy_in(dst, src_address, nbytes, index)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_failed_dynamic_copy_in_a_loaded_method_leaves_its_out_as_it_was(mode):
    module, _ = models.mlp()
    batch = torch.export.Dim("batch", max=16)
    lowered = export_and_lower(module, (torch.randn(16, 8),), dynamic_shapes=({0: batch},))
    allocator = _FailNextCopyIn()
    with scoped_allocators(allocator), load_method(place_devices(lowered), mode, _libs(mode)) as method:
        method(torch.randn(16, 8))
        copy = next(step for step in method.steps if step.direction == "h2d")
        assert copy.moved == 16 * 8 * 4
        allocator.armed = True
        with pytest.raises(
            ExecutionError,
            match=rf"^instruction {copy.index} \(et_copy::_h2d_copy.out\) failed with "
            r"Internal: et_copy::_h2d_copy.out: device copy .*injected copy failure",
        ) as info:
            method(torch.randn(5, 8))
        assert info.value.error is Error.Internal
        assert copy.moved == 16 * 8 * 4  # out kept the sizes of the last call that succeeded, not (5, 8)
        x = torch.randn(5, 8)
        torch.testing.assert_close(method(x)[0], module(x))
        assert copy.moved == 5 * 8 * 4


class _Double(nn.Module):
    def forward(self, x):
        return x * 2


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_method_and_a_portable_tensor_resize_by_one_rule(sim, mode):
    """ExecuTorch's rule (docs/semantics.md §3.1): a DYNAMIC_BOUND tensor takes any sizes of its rank whose element
    count fits its capacity; a method's input is held to its torch.export.Dims first, so (2, 8) fits the tensor but
    is refused naming `cols` (max 4); within the Dims, another rank is refused by both."""
    module = _Double()
    rows, cols = torch.export.Dim("rows", max=4), torch.export.Dim("cols", max=4)
    lowered = export_and_lower(module, (torch.randn(4, 4),), dynamic_shapes=({0: rows, 1: cols},))
    tensor = PortableTensor.empty(torch.float32, (4, 4), dynamism=TensorShapeDynamism.DYNAMIC_BOUND)
    answers = []
    with load_method(place_devices(lowered), mode, _libs(mode)) as method:
        assert not tensor.resize_problem((2, 8))
        with pytest.raises(ExecutionError, match=r"dimension 1 \(cols\) was exported for sizes 0\.\.4"):
            method(torch.randn(2, 8))
        for sizes in [(2, 4), (3, 3), (4, 4), (2, 2, 4), (1, 4)]:
            x = torch.randn(sizes)
            problem = tensor.resize_problem(sizes)
            if problem:
                with pytest.raises(ExecutionError, match="^input 0: " + re.escape(problem) + "$"):
                    method(x)
            else:
                torch.testing.assert_close(method(x)[0], module(x))
                tensor.resize(sizes)
            answers.append(not problem)
    assert answers == [True, True, True, False, True]


def test_a_cpu_only_program_loads_without_the_device_backend_it_names():
    """backend= only matters when the program has device memory: a CPU-only program loads with 'cupy' even where
    CuPy is absent, and runs."""
    from devcopy_lib.runtime.method import load_program

    module, inputs = models.add()
    program = emit(place_devices(export_and_lower(module, inputs, delegate_ops=[])))
    with load_program(program, backend="cupy") as method:
        torch.testing.assert_close(method(*inputs)[0], module(*inputs))


def test_an_input_of_the_wrong_type_is_named_with_its_type():
    module, inputs = models.add()
    with load_method(place_devices(export_and_lower(module, inputs)), backend="simulated") as method:
        with pytest.raises(ExecutionError, match=r"input 0: expected a CPU torch.float32 tensor, got str"):
            method("x", inputs[1])


def test_load_program_names_an_unknown_mode_and_the_valid_ones():
    from devcopy_lib.runtime.method import load_program

    module, inputs = models.add()
    program = emit(place_devices(export_and_lower(module, inputs, delegate_ops=[])))
    with pytest.raises(ValueError, match=r"^Unknown mode 'fast'\. Valid: portable, aten$"):
        load_program(program, mode="fast")
