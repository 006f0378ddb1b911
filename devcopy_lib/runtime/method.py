"""`load_method` and `Method`: load a placed program in one runtime mode and execute it.

Loading resolves every operator in the linked libs (a missing one fails here, not at execution), allocates the
planned arenas through the allocators registered at load (the method keeps using them, whatever the registry holds
later), takes its own copy of every constant (delegate-owned ones on their device, the others on the host: a snapshot
of the model at load, runtime/constants.py) and builds the precompiled plan (runtime/plan.py): one prepared step per
instruction. A call checks that the model's tensors did not change since, sets the inputs, runs the steps and reads
the outputs. Calls are serialized: one method shared by threads runs one call at a time (a lock), so every caller
gets its own inputs' outputs.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import numpy as np
import torch

from ..devices.allocator import DeviceAllocator, DevicePtr
from ..devices.backend import ensure_cuda_allocator
from ..errors import InvalidArgumentError, InvalidArgumentTypeError
from ..kernels.prim_ops import SymBox, SymList
from ..names import COPY_OP, MODES, Direction, Mode
from ..tensors.error import Error
from .capture import AUTO, Capture, CaptureOption, check_option
from .constants import ConstantSnapshot, check_still_shared, shared_copies
from .failures import ExecutionError, LoadError
from .libs import libs_of_mode
from .memory import OwnedMemory, allocator_for
from .memory_plan import plan_program
from .mode_tensors import TENSORS_BY_MODE, ModeTensors
from .plan import OnStep, Step, build_plan, host_bytes, iter_allocators
from .profile import StepProfiler
from .program import Program, ScalarValue, SymListValue, SymValue, TensorListValue, TensorSpec, TensorValue
from .resolve import resolve_operators
from .slots import Slot


def _load_constant(allocator: DeviceAllocator, ptr: DevicePtr, spec: TensorSpec, data: torch.Tensor) -> None:
    """A delegate-owned constant: one H2D at load (not counted in copies_executed)."""
    try:
        # .cpu(): a module moved to a GPU after lowering moved the parameters the program shares with it
        host = host_bytes(data.detach().cpu().contiguous())
        allocator.copy_host_to_device(ptr, host, spec.nbytes, ptr.index)
    except Exception as exc:
        raise LoadError(
            Error.Internal, f"Copying a {list(data.shape)} constant to {spec.device} at load failed: {exc}"
        ) from exc


class DeviceValue:
    """An output the program leaves on its device (skip_d2h_for_method_outputs), handed to the caller without a copy
    by `method(..., keep_on_device=True)`: the method's own output memory, valid until the method's next call. Feed
    it to that call where the program takes an input on the device (skip_h2d_for_method_inputs): it is copied there
    on the device, nothing crosses. `.cpu()` reads it (one D2H, counted in the method's `caller_copies`). What an
    ExecuTorch caller does with a device output's pointer."""

    __slots__ = ("method", "index", "call", "_read", "shape", "dtype", "device")

    def __init__(
        self,
        method: Method,
        index: int,
        call: int,
        shape: tuple[int, ...],
        read: Callable[[DeviceValue], torch.Tensor],
    ) -> None:
        spec = method.program.tensor(index).spec
        # whose output it is: the method, the program value it lives in, the call that wrote it
        self.method, self.index, self.call = method, index, call
        self._read = read  # the method's D2H of it
        self.shape, self.dtype, self.device = torch.Size(shape), spec.dtype, spec.device

    def cpu(self) -> torch.Tensor:
        """The value as a new CPU tensor: one D2H."""
        return self._read(self)

    def __repr__(self) -> str:
        return f"DeviceValue({list(self.shape)}, {self.dtype}, on {self.device}, output of call {self.call})"


class Method:
    """A loaded program: `method(*inputs)` returns the outputs as CPU tensors. Close it (or use `with`) to free its
    arenas; a method dropped without `close()` frees them when collected. `copies_executed` counts et_copy kernel
    runs, `caller_copies` the moves the caller side made. Thread-safe: concurrent calls run one at a time.
    Its constants are a snapshot of the model at load: a call after the model's parameters or buffers changed raises
    ConstantsChangedError until `reload_constants()` (docs/reliability.md)."""

    def __init__(self, program: Program, mode: str, kernels: Sequence[Any], capture: CaptureOption = AUTO) -> None:
        self.program = program
        self.mode = mode
        self.kernels = list(kernels)
        directions = [Direction.H2D, Direction.D2H]
        if COPY_OP[Direction.D2D].name in program.operators:  # devcopy's peer copies, counted when a program has them
            directions.append(Direction.D2D)
        self._tensors: ModeTensors = TENSORS_BY_MODE[mode]()
        self._memory = OwnedMemory()
        self._release = weakref.finalize(self, self._memory.free)  # a dropped method frees its device memory
        self._release.atexit = False  # at exit the process returns it; allocators may already be closed by then
        self._closed = False
        self._interrupted: str | None = None
        self._lock = threading.Lock()
        self._calls = 0  # calls that completed: a DeviceValue is valid until the next one
        self._snapshot = ConstantSnapshot(program)
        self._host_constants: dict[int, torch.Tensor] = {}  # value index -> the method's own copy
        self._aliases: dict[int, int] = {}  # a tied constant's value index -> the one holding its copy
        try:
            self._slots: dict[int, Slot] = {}
            self._objects: list[Any] = []
            arenas = self._allocate_arenas()
            taken = self._snapshot.take()
            self._aliases = shared_copies(program, taken.tensors)
            for index, value in enumerate(program.values):
                self._objects.append(self._build(index, value, arenas, taken.tensors.get(index)))
            self._plan, self._at_load = build_plan(
                program, self.kernels, self._slots, self._objects, self._tensors, self._memory, directions
            )
            self._capture = Capture(self._plan.steps, check_option(capture))
            self._snapshot.commit(taken)
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

    def _build(self, index: int, value: Any, arenas: list[Any], live: torch.Tensor | None) -> Any:
        """Value `index` as the method holds it; `live` is the model's tensor a constant is taken from."""
        if isinstance(value, ScalarValue):
            return value.value
        if isinstance(value, TensorListValue):
            return [None if i is None else self._objects[i] for i in value.items]
        if isinstance(value, SymValue):  # written by a primitive instruction at every call
            return SymBox(value.hint)
        if isinstance(value, SymListValue):
            return SymList([self._objects[i] for i in value.items])
        slot = self._tensor_slot(index, value, arenas, value.data if live is None else live)
        self._slots[index] = slot
        return slot.tensor

    def _tensor_slot(self, index: int, value: TensorValue, arenas: list[Any], data: torch.Tensor | None) -> Slot:
        spec = value.spec
        if index in self._aliases:  # a tied constant: the copy an earlier value holds
            first = self._slots[self._aliases[index]]
            return Slot(spec, first.tensor, first.ptr, first.allocator, first.storage)
        if data is not None and spec.device.is_cpu:  # the method's own copy: the model's later changes never reach it
            own = self._host_constants[index] = data.detach().cpu().clone(memory_format=torch.contiguous_format)
            return Slot(spec, self._tensors.constant(own))
        if value.planned and (not value.is_constant or value.mutable):  # a resident buffer: filled at load
            where = self.program.memory_plan.allocations[index]
            base = arenas[where.buffer]
            if spec.device.is_cpu:
                return self._host_slot(spec, base[where.offset : where.offset + spec.nbytes])
            return self._device_slot(spec, base + where.offset, data)
        if spec.device.is_cpu:  # a graph input/output the caller provides (skip switches)
            return self._host_slot(spec, self._memory.host(spec.nbytes))
        return self._device_slot(spec, self._memory.device(spec.device, spec.nbytes), data)

    def _host_slot(self, spec: TensorSpec, storage: np.ndarray) -> Slot:
        return Slot(spec, self._tensors.host(spec, storage), storage=storage)

    def _device_slot(self, spec: TensorSpec, ptr: DevicePtr, constant: torch.Tensor | None = None) -> Slot:
        """A device value over `ptr`; a delegate-owned `constant` is copied there once, at load."""
        allocator = allocator_for(spec.device)
        if constant is not None:
            _load_constant(allocator, ptr, spec, constant)
        return Slot(spec, self._tensors.device(spec, ptr, allocator), ptr, allocator)

    def reload_constants(self) -> None:
        """Take the model's parameters and buffers again, as loading does (copied into this method's memory, hoisted
        values computed again), after the model changed. A tensor whose sizes or dtype changed needs a new program:
        LoadError, and the method keeps its previous snapshot."""
        with self._lock:
            self._ready()
            taken = self._snapshot.take()
            check_still_shared(self.program, self._aliases, taken.tensors)
            try:
                for index, tensor in taken.tensors.items():
                    if index in self._aliases:  # reloaded through the value holding the copy
                        continue
                    slot = self._slots[index]
                    if slot.ptr is None or slot.allocator is None:
                        self._host_constants[index].copy_(tensor.detach())
                    else:
                        _load_constant(slot.allocator, slot.ptr, slot.spec, tensor)
                self._at_load.run(())
            except BaseException as exc:
                self._snapshot.broken(f"reloading them failed midway ({type(exc).__name__}: {exc})")
                self._note_interrupt(exc)
                raise
            self._snapshot.commit(taken)

    def buffers(self) -> dict[str, torch.Tensor]:
        """The current value of every mutable buffer (program state such as a KV cache), by the model's name for
        it, as new CPU tensors: a buffer on the host is cloned, a resident one (placement/resident.py) is read with
        one D2H each, counted in `caller_copies`: reading the state crosses the link, running the method does not."""
        with self._lock:
            self._ready()
            values = {}
            for name, index in self.program.buffers.items():
                slot = self._slots[index]
                if slot.ptr is None or slot.allocator is None:
                    values[name] = self._host_constants[index].clone()
                    continue
                host = torch.empty(slot.spec.sizes, dtype=slot.spec.dtype)
                slot.allocator.copy_device_to_host(host_bytes(host), slot.ptr, slot.spec.nbytes, slot.ptr.index)
                self._plan.caller_copies += 1
                values[name] = host
            return values

    def reset_buffers(self) -> None:
        """Put every mutable buffer back to its value at load (the program's initial state, as a newly loaded method
        starts from): a host buffer in place, a resident one with one H2D each (counted like loading's, apart from
        `copies_executed`). The next call then computes as the first call after loading did."""
        with self._lock:
            self._ready()
            for index in self.program.buffers.values():
                value, slot = self.program.tensor(index), self._slots[index]
                assert value.data is not None  # a mutable buffer holds its initial value
                if slot.ptr is None or slot.allocator is None:
                    self._host_constants[index].copy_(value.data)
                else:
                    _load_constant(slot.allocator, slot.ptr, slot.spec, value.data)

    @property
    def load_copies(self) -> dict[str, int]:
        """et_copy kernel runs by direction of the load-time part (hoisted constants), reloads included."""
        return self._at_load.copies

    # ---- execute ----------------------------------------------------------------------------------------------
    @property
    def steps(self) -> tuple[Step, ...]:
        """The prepared steps every call runs, in order (runtime/plan.py)."""
        return self._plan.steps

    def __call__(
        self, *inputs: torch.Tensor | DeviceValue, on_step: OnStep | None = None, keep_on_device: bool = False
    ) -> tuple[Any, ...]:
        """Run once: inputs (CPU tensors) in, outputs as new CPU tensors out. `on_step(step)`, when given, runs each
        step (it must call `step.run()`), so a profiler or a test sees every step of the very loop a plain call
        runs, write-back included. `keep_on_device`: each output the program leaves on the device
        (skip_d2h_for_method_outputs) comes back as a `DeviceValue` instead of a CPU tensor; an input the program
        takes on the device (skip_h2d_for_method_inputs) may be such a value from the previous call (copied on the
        device). Together: a functional KV cache fed back without crossing (docs/real_models.md)."""
        with self._lock:
            self._ready()
            self._snapshot.check()
            try:
                given = self._device_inputs(inputs) if any(isinstance(x, DeviceValue) for x in inputs) else frozenset()
                keep = self._keeper(self._calls + 1) if keep_on_device else None
                outputs = self._plan.run(inputs, on_step, given, keep)
                self._calls += 1
                if self._capture.pending:  # the first call was the warm-up the graphs need
                    self._capture.record(self._plan)
            except BaseException as exc:
                self._note_interrupt(exc)
                raise
            return outputs

    def _device_inputs(self, inputs: Sequence[Any]) -> frozenset[int]:
        """Copy each DeviceValue input into its input's device memory (on the device); its positions. A value of
        another method, an older call, another form, or for an input taken on the host is refused, naming the fix."""
        given = []
        for position, value in enumerate(inputs):
            if not isinstance(value, DeviceValue):
                continue
            if position >= len(self.program.inputs):
                break  # the plan refuses the count
            slot = self._slots[self.program.inputs[position]]
            problem = self._device_value_problem(value)
            if not problem and (slot.ptr is None or slot.allocator is None):
                problem = (
                    "the program takes this input on the host: place with skip_h2d_for_method_inputs naming it, "
                    "or pass value.cpu()"
                )
            if not problem and (value.dtype != slot.spec.dtype or tuple(value.shape) != slot.spec.sizes):
                problem = (
                    f"it is a {value.dtype} {list(value.shape)}, the input a {slot.spec.dtype} {list(slot.spec.sizes)}"
                )
            if problem:
                raise ExecutionError(
                    Error.InvalidArgument, f"input {position}: a DeviceValue cannot be fed here: {problem}"
                )
            source = self._slots[value.index]
            assert slot.ptr is not None and slot.allocator is not None and source.ptr is not None  # checked above
            if source.ptr != slot.ptr:
                slot.allocator.copy_device_to_device(slot.ptr, source.ptr, slot.spec.nbytes)
            given.append(position)
        return frozenset(given)

    def _device_value_problem(self, value: DeviceValue) -> str:
        if value.method is not self:
            return "it is an output of another method"
        if value.call != self._calls:
            return (
                f"it is the output of call {value.call}, overwritten by call {self._calls}; feed each value to the "
                "next call, or keep value.cpu()"
            )
        return ""

    def _keeper(self, call: int) -> Any:
        """`keep(position)` for Plan.run: a DeviceValue over output `position`'s device memory, of call `call`."""
        sizes = self._tensors.sizes

        def keep(position: int) -> DeviceValue:
            index = self.program.outputs[position]
            return DeviceValue(self, index, call, tuple(sizes(self._slots[index].tensor)), self._read_device_value)

        return keep

    def _read_device_value(self, value: DeviceValue) -> torch.Tensor:
        with self._lock:
            self._ready()
            problem = self._device_value_problem(value)
            if problem:
                raise ExecutionError(Error.InvalidArgument, f"Cannot read this DeviceValue: {problem}")
            slot = self._slots[value.index]
            assert slot.ptr is not None and slot.allocator is not None  # a DeviceValue is device memory
            host = torch.empty(value.shape, dtype=value.dtype)
            nbytes = host.numel() * host.element_size()
            slot.allocator.copy_device_to_host(host_bytes(host), slot.ptr, nbytes, slot.ptr.index)
            self._plan.caller_copies += 1
            return host

    def _ready(self) -> None:
        """Refuse a closed method; settle an interrupted call's device work first."""
        if self._closed:
            raise ExecutionError(Error.InvalidState, "This method was closed; load it again to run it.")
        if self._interrupted is not None:
            self._settle()

    def _note_interrupt(self, exc: BaseException) -> None:
        """An interrupt (Ctrl-C) mid-call: the next call first waits for device work already enqueued; it then
        rewrites every planned buffer before reading it, so the method stays usable."""
        if not isinstance(exc, Exception):
            self._interrupted = type(exc).__name__

    def _settle(self) -> None:
        """Wait for the device work an interrupted call left enqueued (synchronous backends: nothing to wait for)."""
        for allocator in iter_allocators(self._slots):
            allocator.synchronize()
        self._interrupted = None

    def profile(self, *inputs: torch.Tensor, repeat: int = 10, cost_model: Any = None) -> list[dict[str, Any]]:
        """Run `repeat` times, timing each instruction: `[{"index", "kind", "op", "bytes", "measured_s",
        "predicted_s", "wall_s", "device_s"}]` (medians). `measured_s` is the device clock (CUDA events) for device
        work where the backend has one, else wall; `predicted_s` is `cost_model.predict(direction, bytes, memory)`
        for copies (None for other steps or without a model); `capture` says which graph replays the step on a plain
        call, or why none does. Profiled calls are real calls that run every step uncaptured, one at a time, so a
        captured step's time is its uncaptured cost. See runtime/profile.py."""
        profiler = StepProfiler(self.steps, repeat, cost_model)
        for _ in range(repeat):
            self(*inputs, on_step=profiler.on_step)
        rows = profiler.rows()
        for position, row in enumerate(rows):
            row["capture"] = self._capture.reason(position)
        return rows

    @property
    def capture(self) -> dict[str, Any]:
        """Graph replay (runtime/capture.py): the `capture` option, whether graphs replay the device work (`on`;
        `pending` until the first call records them), how many, and every uncaptured step with its reason."""
        return self._capture.summary()

    @property
    def control_flow(self) -> list[dict[str, Any]]:
        """What the last call did at each `torch.cond`, map and scan of the program, in program order: `{node,
        construct, branch, iterations}` - the branch a cond took (`true` / `false`), a loop's iteration count;
        `branch` None before the first call (docs/semantics.md §5c)."""
        visits = [0] * self.program.load_instructions + list(self._plan.visits)
        return [region.outcome(visits) for region in self.program.control_flow]

    @property
    def copies_executed(self) -> dict[str, int]:
        """et_copy kernel runs by direction over every call so far (the load-time part's are in `load_copies`)."""
        return dict(self._plan.copies)

    # ---- lifetime -------------------------------------------------------------------------------------------
    @property
    def caller_copies(self) -> int:
        """The moves the caller side made (inputs set into device memory, outputs read back)."""
        return self._plan.caller_copies

    @property
    def arena_sizes(self) -> dict[str, int]:
        sizes: dict[str, int] = self.program.memory_plan.arena_sizes()
        return sizes

    def close(self) -> None:
        """Free every buffer this method allocated; closing twice is harmless."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._release()

    def __enter__(self) -> Method:
        return self

    def __reduce__(self) -> NoReturn:
        """Refuse pickling: a Method holds device memory and prepared kernels that exist in this process only."""
        raise InvalidArgumentTypeError(
            "A loaded Method cannot be pickled: it holds device memory and kernels bound to this process. "
            "Pickle the Program it was loaded from (method.program) and load_method() it again where needed."
        )

    def __exit__(self, *exc: object) -> None:
        self.close()


def _needs_device(program: Program) -> bool:
    return any(isinstance(v, TensorValue) and not v.spec.device.is_cpu for v in program.values)


def load_program(
    program: Program,
    mode: str = Mode.PORTABLE,
    libs: Sequence[Any] | None = None,
    backend: str | None = None,
    capture: CaptureOption = AUTO,
) -> Method:
    """Load an emitted `program` in `mode` with `libs` linked (None: the mode's default, with the libs the
    program's operators need beyond it, `runtime.libs.default_libs`).

    `backend` ('auto', 'cupy', 'simulated') registers a CUDA allocator of that backend when none is; None uses the
    registered one. `capture` ('auto', True, False): replay runs of device-only steps as CUDA graphs where it is
    safe ('auto'), never (False), or require it (True: LoadError NotSupported naming why when no step can be
    recorded). Raises MissingOperatorError when an operator is in none of the libs, LoadError on memory."""
    if not isinstance(mode, str) or mode not in MODES:
        raise InvalidArgumentError(f"Unknown mode {mode!r}. Valid: {', '.join(MODES)}")
    check_option(capture)
    if program.memory_plan is None:
        plan_program(program)
    kernels = resolve_operators(program, libs_of_mode(mode, libs, program.operators), mode=mode)
    if backend is not None and _needs_device(program):
        ensure_cuda_allocator(backend)
    return Method(program, mode, kernels, capture)
