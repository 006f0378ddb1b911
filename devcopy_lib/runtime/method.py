"""`load_method` and `Method`: load a placed program in one runtime mode and execute it.

Loading resolves every operator in the linked libs (a missing one fails here, not at execution), allocates the
planned arenas through the allocators registered at load (the method keeps using them, whatever the registry holds
later), copies delegate-owned constants to their device once and builds the precompiled plan (runtime/plan.py): one
prepared step per instruction. A call sets the inputs, runs the steps and reads the outputs. Calls are serialized:
one method shared by threads runs one call at a time (a lock), so every caller gets its own inputs' outputs.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ..devices.backend import ensure_cuda_allocator
from ..names import COPY_DIRECTIONS
from ..tensors.error import Error
from .failures import ExecutionError, LoadError
from .libs import libs_of_mode
from .memory import OwnedMemory, allocator_for
from .memory_plan import plan_program
from .mode_tensors import MODES
from .plan import Slot, Step, code_view, copy_step, delegate_step, kernel_step, torch_op_step
from .program import DelegateCall, Program, ScalarValue, TensorListValue, TensorValue
from .resolve import resolve_operators


def _host_bytes(tensor: torch.Tensor) -> np.ndarray:
    """The bytes of a contiguous CPU tensor as a uint8 array (zero-copy)."""
    return tensor.reshape(-1).view(torch.uint8).numpy()


class Method:
    """A loaded program: `method(*inputs)` returns the outputs as CPU tensors. Close it (or use `with`) to free its
    arenas; a method dropped without `close()` frees them when collected. `copies_executed` counts et_copy kernel
    runs, `caller_copies` the moves the caller side made. Thread-safe: concurrent calls run one at a time."""

    def __init__(self, program: Program, mode: str, kernels: Sequence[Any]) -> None:
        self.program = program
        self.mode = mode
        self.kernels = list(kernels)
        self.copies_executed = {"h2d": 0, "d2h": 0}
        if "et_copy::_d2d_copy.out" in program.operators:  # devcopy's peer copies, counted when the program has them
            self.copies_executed["d2d"] = 0
        self._caller = [0]  # caller-side moves; a list so that steps need no reference to the method
        self._tensors = MODES[mode]()
        self._memory = OwnedMemory()
        self._release = weakref.finalize(self, self._memory.free)  # a dropped method frees its device memory
        self._release.atexit = False  # at exit the process returns it; allocators may already be closed by then
        self._closed = False
        self._interrupted: str | None = None
        self._lock = threading.Lock()
        try:
            self._slots: dict[int, Slot] = {}
            self._objects: list[Any] = []
            arenas = self._allocate_arenas()
            for index, value in enumerate(program.values):
                self._objects.append(self._build(index, value, arenas))
            steps = [self._step(position, ins) for position, ins in enumerate(program.instructions)]
            self.load_copies = self._run_load_part(steps[: program.load_instructions])
            self.steps = steps[program.load_instructions :]  # what every call runs
            self._runs = [step.run for step in self.steps]
            self._inputs = [
                self._input_setter(position, self._slots[index]) for position, index in enumerate(program.inputs)
            ]
            self._outputs = [self._output_getter(index) for index in program.outputs]
            self._write_back = [
                (position, self._output_getter(program.inputs[position])) for position in program.written_back_inputs
            ]
        except BaseException:
            self._release()
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

    def _tensor_slot(self, index: int, value: TensorValue, arenas: list[Any]) -> Slot:
        spec = value.spec
        if value.is_constant and spec.device.is_cpu:  # shared by every method of the program, unless written to
            return Slot(spec, self._tensors.constant(value.data.clone() if value.mutable else value.data))
        if value.planned and not value.is_constant:
            where = self.program.memory_plan.allocations[index]
            base = arenas[where.buffer]
            if spec.device.is_cpu:
                return self._host_slot(spec, base[where.offset : where.offset + spec.nbytes])
            return self._device_slot(spec, base + where.offset)
        if spec.device.is_cpu:  # a graph input/output the caller provides (skip switches)
            return self._host_slot(spec, self._memory.host(spec.nbytes))
        slot = self._device_slot(spec, self._memory.device(spec.device, spec.nbytes))
        if value.is_constant:
            self._load_constant(slot, value.data)
        return slot

    def _host_slot(self, spec, storage: np.ndarray) -> Slot:
        return Slot(spec, self._tensors.host(spec, storage), storage=storage)

    def _device_slot(self, spec, ptr) -> Slot:
        allocator = allocator_for(spec.device)
        return Slot(spec, self._tensors.device(spec, ptr, allocator), ptr, allocator)

    def _load_constant(self, slot: Slot, data: torch.Tensor) -> None:
        """A delegate-owned constant: one H2D at load (not counted in copies_executed)."""
        try:
            # .cpu(): a module moved to a GPU after lowering moved the parameters the program shares with it
            host = _host_bytes(data.detach().cpu().contiguous())
            slot.allocator.copy_host_to_device(slot.ptr, host, slot.spec.nbytes, slot.ptr.index)
        except Exception as exc:
            raise LoadError(
                Error.Internal, f"Copying a {list(data.shape)} constant to {slot.spec.device} at load failed: {exc}"
            ) from exc

    def _run_load_part(self, steps: list[Step]) -> dict[str, int]:
        """Run the program's load-time instructions (hoisted constants) once; the copies they made, counted apart."""
        for step in steps:
            step.run()
        made = dict(self.copies_executed)
        for direction in self.copies_executed:
            self.copies_executed[direction] = 0
        return made

    def _step(self, position: int, instruction: Any) -> Step:
        tensors, counters = self._tensors, self.copies_executed
        if isinstance(instruction, DelegateCall):
            delegate = self.program.delegates[instruction.delegate]
            step = Step(position, "delegate", f"delegate {delegate.name} on {delegate.device}")
            delegate_step(
                step,
                delegate,
                [self._slots[i] for i in (*instruction.args, *delegate.constants)],
                [self._slots[i] for i in instruction.outputs],
                tensors,
            )
            return step
        name, kernel = self.program.operators[instruction.op], self.kernels[instruction.op]
        args = [self._objects[i] for i in instruction.args]
        direction = COPY_DIRECTIONS.get(name)
        step = Step(position, "copy" if direction else "kernel", name, direction=direction)
        if direction:
            if copy_step(
                step, kernel, self._slots[instruction.args[0]], self._slots[instruction.args[-1]], tensors, counters
            ):
                return step
        elif torch_op_step(step, kernel, args, [self._slots.get(i) for i in instruction.args], tensors):
            return step
        kernel_step(step, kernel, args, counters, self._allocators())
        return step

    def _allocators(self) -> tuple:
        """The allocators this method's device memory came from, one per device type (what its kernels use)."""
        found = {slot.allocator.device_type(): slot.allocator for slot in self._slots.values() if slot.allocator}
        return tuple(found.values())

    def _input_setter(self, position: int, slot: Slot) -> Callable[[torch.Tensor], None]:
        """Input `position` -> its planned memory: checks what a call can change (type, dtype, sizes)."""
        spec, tensors = slot.spec, self._tensors
        resize, what = tensors.resize, f"input {position}"
        planned = (
            None
            if slot.ptr is None
            else slot.allocator.planned_copy(
                "h2d", slot.ptr, self._memory.host(spec.nbytes), spec.nbytes, slot.ptr.index
            )
        )
        target = code_view(slot, tensors) if slot.ptr is None else None
        caller = self._caller
        sizes = torch.Size(spec.sizes)

        def set_input(tensor: torch.Tensor) -> None:
            if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu" or tensor.dtype != spec.dtype:
                raise ExecutionError(
                    Error.InvalidArgument,
                    f"input {position}: expected a CPU {spec.dtype} tensor, got {_describe(tensor)}",
                )
            if tensor.shape != sizes or spec.dynamic:
                resize(slot.tensor, spec, tuple(tensor.shape), what)
            if planned is None:
                target().copy_(tensor)
                return
            host = planned.host
            host[: tensor.numel() * tensor.element_size()] = _host_bytes(tensor.detach().contiguous())
            planned(tensor.numel() * tensor.element_size())
            caller[0] += 1

        return set_input

    def _output_getter(self, index: int) -> Callable[[], Any]:
        slot = self._slots.get(index)
        if slot is None:
            value = self._objects[index]
            return lambda: value
        if slot.ptr is None:
            view = code_view(slot, self._tensors)
            return lambda: view().clone()
        tensors, spec, caller = self._tensors, slot.spec, self._caller
        planned = slot.allocator.planned_copy(
            "d2h", slot.ptr, self._memory.host(spec.nbytes), spec.nbytes, slot.ptr.index
        )

        def read() -> torch.Tensor:
            sizes = tensors.sizes(slot.tensor)
            nbytes = math.prod(sizes) * spec.dtype.itemsize
            planned(nbytes)
            caller[0] += 1
            return torch.from_numpy(planned.host[:nbytes].copy()).view(spec.dtype).view(sizes)

        return read

    # ---- execute --------------------------------------------------------------------------------------------
    def __call__(self, *inputs: torch.Tensor) -> tuple[Any, ...]:
        """Run once: inputs (CPU tensors) in, outputs as new CPU tensors out."""
        with self._lock:
            self._start(inputs)
            try:
                for run in self._runs:
                    run()
            except BaseException as exc:
                self._note_interrupt(exc)
                raise
            for position, read in self._write_back:  # a mutated input: the caller sees it, as in eager
                inputs[position].copy_(read())
            return tuple(read() for read in self._outputs)

    def _start(self, inputs: tuple) -> None:
        """Refuse a closed method or a wrong input count, settle an interrupted call, then set the inputs."""
        if self._closed:
            raise ExecutionError(Error.InvalidState, "This method was closed; load it again to run it.")
        if len(inputs) != len(self._inputs):
            raise ExecutionError(
                Error.InvalidArgument, f"The method takes {len(self._inputs)} inputs, got {len(inputs)}."
            )
        if self._interrupted is not None:
            self._settle()
        for set_input, tensor in zip(self._inputs, inputs):
            set_input(tensor)

    def _note_interrupt(self, exc: BaseException) -> None:
        """An interrupt (Ctrl-C) mid-call: the next call first waits for device work already enqueued; it then
        rewrites every planned buffer before reading it, so the method stays usable."""
        if not isinstance(exc, Exception):
            self._interrupted = type(exc).__name__

    def _settle(self) -> None:
        if any(slot.allocator is not None and slot.allocator.backend == "cupy" for slot in self._slots.values()):
            torch.cuda.synchronize()
        self._interrupted = None

    def profile(self, *inputs: torch.Tensor, repeat: int = 10, cost_model: Any = None) -> list[dict]:
        """Run `repeat` times, timing each instruction: `[{"index", "kind", "op", "bytes", "measured_s",
        "predicted_s", "wall_s", "device_s"}]` (medians). `measured_s` is the device clock (CUDA events) for device
        work on real CUDA, else wall; `predicted_s` is `cost_model.predict(direction, bytes, memory)` for copies
        (None for other steps or without a model). See runtime/profile.py."""
        from .profile import profile_method

        return profile_method(self, inputs, repeat, cost_model)

    # ---- lifetime -------------------------------------------------------------------------------------------
    @property
    def caller_copies(self) -> int:
        return self._caller[0]

    @property
    def arena_sizes(self) -> dict[str, int]:
        return self.program.memory_plan.arena_sizes()

    def close(self) -> None:
        """Free every buffer this method allocated; closing twice is harmless."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._release()

    def __enter__(self) -> Method:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.device.type} {value.dtype} tensor of sizes {list(value.shape)}"
    return type(value).__name__


def _needs_device(program: Program) -> bool:
    return any(isinstance(v, TensorValue) and not v.spec.device.is_cpu for v in program.values)


def load_program(
    program: Program, mode: str = "portable", libs: Sequence[Any] | None = None, backend: str | None = None
) -> Method:
    """Load an emitted `program` in `mode` with `libs` linked (default per mode).

    `backend` ('auto', 'cupy', 'simulated') registers a CUDA allocator of that backend when none is; None uses the
    registered one. Raises MissingOperatorError when an operator is in none of the libs, LoadError on memory."""
    if mode not in MODES:
        raise ValueError(f"Unknown mode {mode!r}. Valid: {', '.join(MODES)}")
    if program.memory_plan is None:
        plan_program(program)
    kernels = resolve_operators(program, libs_of_mode(mode, libs))
    if backend is not None and _needs_device(program):
        ensure_cuda_allocator(backend)
    return Method(program, mode, kernels)
