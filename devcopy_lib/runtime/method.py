"""`load_method` and `Method`: load a placed program in one runtime mode and execute it.

Loading resolves every operator in the linked libs (a missing one fails here, not at execution), allocates the
planned arenas through the registered allocators, copies delegate-owned constants to their device once and builds
each instruction's argument list; executing then only runs the prepared steps. CPU ops run the mode's kernels,
delegates run on the device (device code reads device memory through `device_view`), copies run the `et_copy`
kernels resolved from the libs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..devices.allocator import DeviceAllocator, DevicePtr
from ..devices.backend import ensure_cuda_allocator
from ..tensors.context import KernelRuntimeContext
from .device_views import device_view
from ..tensors.error import Error
from .failures import ExecutionError, LoadError
from ..names import COPY_DIRECTIONS, DEFAULT_LIBS
from .libs import as_libs
from .memory import OwnedMemory, allocator_for
from .memory_plan import plan_program
from .mode_tensors import MODES
from .program import DelegateCall, KernelCall, Program, ScalarValue, TensorListValue, TensorSpec, TensorValue
from .resolve import resolve_operators



@dataclass
class _Slot:
    """One tensor value at run time: the mode's tensor and the memory under it (host bytes or a device pointer)."""

    spec: TensorSpec
    tensor: Any
    ptr: DevicePtr | None = None
    allocator: DeviceAllocator | None = None


def _host_bytes(tensor: torch.Tensor) -> np.ndarray:
    """The bytes of a contiguous CPU tensor as a uint8 array (zero-copy)."""
    return tensor.reshape(-1).view(torch.uint8).numpy()


class Method:
    """A loaded program: `method(*inputs)` returns the outputs as CPU tensors. Close it (or use `with`) to free its
    arenas; `copies_executed` counts et_copy kernel runs, `caller_copies` the moves the caller side made."""

    def __init__(self, program: Program, mode: str, kernels: Sequence[Any]) -> None:
        self.program = program
        self.mode = mode
        self.kernels = list(kernels)
        self.copies_executed = {"h2d": 0, "d2h": 0}
        if "et_copy::_d2d_copy.out" in program.operators:  # devcopy's peer copies, counted when the program has them
            self.copies_executed["d2d"] = 0
        self.caller_copies = 0
        self._tensors = MODES[mode]()
        self._memory = OwnedMemory()
        self._closed = False
        try:
            self._slots: dict[int, _Slot] = {}
            self._objects: list[Any] = []
            arenas = self._allocate_arenas()
            for index, value in enumerate(program.values):
                self._objects.append(self._build(index, value, arenas))
            self._steps = [self._step(position, ins) for position, ins in enumerate(program.instructions)]
            self.load_copies = self._run_load_part()
        except BaseException:
            self._memory.free()
            raise

    # ---- load -----------------------------------------------------------------------------------------------
    def _allocate_arenas(self) -> list[Any]:
        """Buffer i -> host bytes (CPU) or a device pointer; buffer 0 (constants) lives in the program."""
        return [None] + [
            self._memory.host(b.nbytes) if b.device.is_cpu else self._memory.device(b.device, b.nbytes)
            for b in self.program.memory_plan.buffers[1:]
        ]

    def _build(self, index: int, value: Any, arenas: list[Any]) -> Any:
        if isinstance(value, ScalarValue):
            return value.value
        if isinstance(value, TensorListValue):
            return [None if i is None else self._objects[i] for i in value.items]
        slot = self._tensor_slot(index, value, arenas)
        self._slots[index] = slot
        return slot.tensor

    def _tensor_slot(self, index: int, value: TensorValue, arenas: list[Any]) -> _Slot:
        spec = value.spec
        if value.is_constant and spec.device.is_cpu:
            return _Slot(spec, self._tensors.constant(value.data))
        if value.planned and not value.is_constant:
            where = self.program.memory_plan.allocations[index]
            base = arenas[where.buffer]
            if spec.device.is_cpu:
                return _Slot(spec, self._tensors.host(spec, base[where.offset:where.offset + spec.nbytes]))
            return self._device_slot(spec, base + where.offset)
        if spec.device.is_cpu:  # a graph input/output the caller provides (skip switches)
            return _Slot(spec, self._tensors.host(spec, self._memory.host(spec.nbytes)))
        slot = self._device_slot(spec, self._memory.device(spec.device, spec.nbytes))
        if value.is_constant:
            self._load_constant(slot, value.data)
        return slot

    def _device_slot(self, spec: TensorSpec, ptr: DevicePtr) -> _Slot:
        allocator = allocator_for(spec.device)
        return _Slot(spec, self._tensors.device(spec, ptr, allocator), ptr, allocator)

    def _load_constant(self, slot: _Slot, data: torch.Tensor) -> None:
        """A delegate-owned constant: one H2D at load (not counted in copies_executed)."""
        try:
            slot.allocator.copy_host_to_device(slot.ptr, _host_bytes(data.contiguous()), slot.spec.nbytes,
                                               slot.ptr.index)
        except Exception as exc:
            raise LoadError(Error.Internal, f"Copying a {list(data.shape)} constant to {slot.spec.device} at load "
                                            f"failed: {exc}") from exc

    def _run_load_part(self) -> dict[str, int]:
        """Run the program's load-time instructions (hoisted constants) once; the copies they made, counted apart."""
        count = self.program.load_instructions
        for step in self._steps[:count]:
            step()
        self._steps = self._steps[count:]
        made = dict(self.copies_executed)
        for direction in self.copies_executed:
            self.copies_executed[direction] = 0
        return made

    def _step(self, position: int, instruction: Any) -> Callable[[], None]:
        if isinstance(instruction, KernelCall):
            return self._kernel_step(position, instruction)
        return self._delegate_step(position, instruction)

    def _kernel_step(self, position: int, call: KernelCall) -> Callable[[], None]:
        kernel, args = self.kernels[call.op], [self._objects[i] for i in call.args]
        name = self.program.operators[call.op]
        direction, copies = COPY_DIRECTIONS.get(name), self.copies_executed

        def step() -> None:
            ctx = KernelRuntimeContext()
            try:
                kernel(ctx, args)
            except Exception as exc:  # ATen-mode kernels raise instead of failing the context
                raise ExecutionError(Error.Internal, f"instruction {position} ({name}) raised: {exc}") from exc
            if not ctx.ok:
                raise ExecutionError(ctx.failure_state(), f"instruction {position} ({name}) failed with "
                                                          f"{ctx.failure_state().name}: {ctx.message}")
            if direction:
                copies[direction] += 1

        return step

    def _delegate_step(self, position: int, call: DelegateCall) -> Callable[[], None]:
        delegate = self.program.delegates[call.delegate]
        inputs = [self._slots[i] for i in (*call.args, *delegate.constants)]
        outputs = [self._slots[i] for i in call.outputs]
        module, view, resize = delegate.module, self._device_code_view, self._tensors.resize
        what = f"instruction {position} (delegate {delegate.name} on {delegate.device})"
        on_gpu = any(slot.allocator is not None and slot.allocator.backend == "cupy" for slot in outputs)

        def step() -> None:
            try:
                results = module(*[view(slot) for slot in inputs])
            except Exception as exc:
                raise ExecutionError(Error.Internal, f"{what} raised: {exc}") from exc
            for slot, result in zip(outputs, results):
                resize(slot.tensor, slot.spec, tuple(result.shape), f"{what} output")
                view(slot).copy_(result)
            if on_gpu:  # the next copy may run on the copy engine's own stream
                torch.cuda.synchronize()

        return step

    def _device_code_view(self, slot: _Slot) -> torch.Tensor:
        """What device code computes on: a view of device memory, or the host tensor of a CPU value."""
        if slot.ptr is None:
            return self._tensors.host_tensor(slot.tensor)
        return device_view(slot.allocator, slot.ptr, slot.spec.dtype, self._tensors.sizes(slot.tensor))

    # ---- execute --------------------------------------------------------------------------------------------
    def __call__(self, *inputs: torch.Tensor) -> tuple[Any, ...]:
        """Run once: inputs (CPU tensors) in, outputs as new CPU tensors out."""
        if self._closed:
            raise ExecutionError(Error.InvalidState, "This method was closed; load it again to run it.")
        if len(inputs) != len(self.program.inputs):
            raise ExecutionError(Error.InvalidArgument,
                                 f"The method takes {len(self.program.inputs)} inputs, got {len(inputs)}.")
        for position, (index, tensor) in enumerate(zip(self.program.inputs, inputs)):
            self._set_input(position, self._slots[index], tensor)
        for step in self._steps:
            step()
        for position in self.program.written_back_inputs:  # a mutated input: the caller sees it, as in eager
            inputs[position].copy_(self._output(self.program.inputs[position]))
        return tuple(self._output(index) for index in self.program.outputs)

    def _set_input(self, position: int, slot: _Slot, tensor: torch.Tensor) -> None:
        spec = slot.spec
        if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu" or tensor.dtype != spec.dtype:
            raise ExecutionError(Error.InvalidArgument,
                                 f"input {position}: expected a CPU {spec.dtype} tensor, got {_describe(tensor)}")
        self._tensors.resize(slot.tensor, spec, tuple(tensor.shape), f"input {position}")
        if slot.ptr is None:
            self._tensors.host_tensor(slot.tensor).copy_(tensor)
            return
        nbytes = tensor.numel() * tensor.element_size()
        slot.allocator.copy_host_to_device(slot.ptr, _host_bytes(tensor.detach().contiguous()), nbytes,
                                           slot.ptr.index)
        self.caller_copies += 1

    def _output(self, index: int) -> Any:
        slot = self._slots.get(index)
        if slot is None:
            return self._objects[index]
        if slot.ptr is None:
            return self._tensors.host_tensor(slot.tensor).clone()
        result = torch.empty(self._tensors.sizes(slot.tensor), dtype=slot.spec.dtype)
        slot.allocator.copy_device_to_host(_host_bytes(result), slot.ptr, result.numel() * result.element_size(),
                                           slot.ptr.index)
        self.caller_copies += 1
        return result

    # ---- lifetime -------------------------------------------------------------------------------------------
    @property
    def arena_sizes(self) -> dict[str, int]:
        return self.program.memory_plan.arena_sizes()

    def close(self) -> None:
        """Free every buffer this method allocated; closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self._memory.free()

    def __enter__(self) -> "Method":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.device.type} {value.dtype} tensor of sizes {list(value.shape)}"
    return type(value).__name__


def _needs_device(program: Program) -> bool:
    return any(isinstance(v, TensorValue) and not v.spec.device.is_cpu for v in program.values)


def _linked(mode: str, libs: Sequence[Any] | None) -> list[Any]:
    """The libs to resolve against (KernelLibs or names; None -> the mode's default), all of `mode`."""
    linked = as_libs(DEFAULT_LIBS[mode] if libs is None else libs)
    wrong = [lib.name for lib in linked if lib.mode != mode]
    if wrong:
        raise ValueError(f"Libs {wrong} are not {mode}-mode libs; a {mode}-mode method links {mode} libs only "
                         f"(default: {', '.join(DEFAULT_LIBS[mode])}).")
    return linked


def load_program(program: Program, mode: str = "portable", libs: Sequence[Any] | None = None,
                 backend: str | None = None) -> Method:
    """Load an emitted `program` in `mode` with `libs` linked (default per mode).

    `backend` ('auto', 'cupy', 'simulated') registers a CUDA allocator of that backend when none is; None uses the
    registered one. Raises MissingOperatorError when an operator is in none of the libs, LoadError on memory."""
    if mode not in MODES:
        raise ValueError(f"Unknown mode {mode!r}. Valid: {', '.join(MODES)}")
    if program.memory_plan is None:
        plan_program(program)
    kernels = resolve_operators(program, _linked(mode, libs))
    if backend is not None and _needs_device(program):
        ensure_cuda_allocator(backend)
    return Method(program, mode, kernels)
