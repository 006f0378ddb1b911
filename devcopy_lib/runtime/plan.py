"""The precompiled execution plan: `build_plan` turns a loaded method's instructions into a `Plan` once, at load.

Each instruction becomes a `Step` whose run its kernel prepared (kernels/prepared.py): et_copy kernels on the
allocator's pre-validated copies, CPU ops as torch callables bound to their views, delegates as their GraphModule on
planned views (runtime/delegates.py). The plan holds no kernel rules of its own: a kernel registered by the user
(no prepare step) runs boxed, `kernel(ctx, args)`, at every call. `Plan.run(inputs, on_step)` sets the inputs,
runs the steps, writes mutated inputs back and reads the outputs; every failure names the instruction (index, op).
The plan owns its counters: `copies` (et_copy kernel runs by direction) and `caller_copies` (the caller side's moves).

Control flow (docs/semantics.md §5c): a program with jumps runs by a program counter instead of a straight loop. A
jump step's `goto()` says where to go on (ExecuTorch's JumpFalseCall: its destination when the condition is false),
a move copies one value into another (MoveCall), a free does nothing (FreeCall: every tensor is planned). Such a
plan counts what ran: the et_copy runs by direction and each step's visits in the last call (`visits`), which say
the branch a `torch.cond` took and how many times a loop ran.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..devices.allocator import DeviceAllocator
from ..devices.registry import scoped_allocators
from ..kernels.prepared import KernelFailure, PreparedKernel, Run
from ..kernels.prim_ops import SymBox, current, is_symbolic
from ..names import COPY_DIRECTIONS, Direction
from ..tensors.context import KernelRuntimeContext
from ..tensors.error import Error
from .capture import CONTROL_FLOW_REASON, HOST_OP_REASON, DeviceWork, copy_work, delegate_work
from .delegates import prepare_delegate
from .failures import ExecutionError, LoadError
from .program import CONTROL_KIND, DelegateCall, FreeCall, JumpFalseCall, MoveCall, Program, TensorSpec
from .resolve import PRIM_LIB
from .slots import Slot, code_view

OnStep = Callable[["Step"], None]


@dataclass(frozen=True, slots=True, eq=False)
class Step:
    """A prepared instruction: `run()` executes it. `kind` (copy / delegate / kernel), `op`, `moved` (bytes of
    the last copy) and `host` (a copy's host buffer) are what a profile reports; `allocator` is set for device work
    (timed on the device clock). `work` is the step's device work alone, which a CUDA graph can record
    (runtime/capture.py), or None with `no_capture` saying why."""

    index: int
    kind: str
    op: str
    run: Run
    allocator: DeviceAllocator | None = None
    direction: str | None = None
    host: np.ndarray | None = None
    out: Callable[[], tuple[int, ...]] | None = None  # a copy's out sizes, read only when `moved` is asked
    itemsize: int = 0
    work: DeviceWork | None = None
    no_capture: str = HOST_OP_REASON
    goto: Callable[[], int] | None = None  # a jump: the position to run next (in the plan's steps)

    @property
    def moved(self) -> int:
        """Bytes the last run of this copy moved (the sizes its out took); 0 for other steps."""
        out = self.out
        return math.prod(out()) * self.itemsize if out is not None else 0


# ---- steps ----------------------------------------------------------------------------------------------------
def _nothing() -> None:
    return None


def _jump_step(
    position: int, ins: JumpFalseCall, objects: list[Any], slots: dict[int, Slot], tensors: Any, base: int, end: int
) -> Step:
    """A JumpFalseCall: on to the next step when the condition holds, else to `destination` (positions are the
    program's; `base` is where the call's steps start). A bool tensor holds when every element is true, as in
    ExecuTorch's runtime (method.cpp, parse_cond_value); a scalar by its truth."""
    where = f"instruction {position} (jump)"
    if not base <= ins.destination <= end:
        raise LoadError(
            Error.InvalidProgram,
            f"{where}: destination {ins.destination} is outside the instructions a call runs ({base}..{end})",
        )
    after, destination = position + 1 - base, ins.destination - base
    slot, cond = slots.get(ins.cond), objects[ins.cond]
    taken: Callable[[], bool]
    if slot is not None:
        if slot.spec.dtype != torch.bool:
            raise LoadError(
                Error.InvalidProgram,
                f"{where}: its condition (value {ins.cond}) is a {slot.spec.dtype} tensor, not bool",
            )
        if slot.ptr is not None:
            raise LoadError(
                Error.NotSupported,
                f"{where}: its condition (value {ins.cond}) lives on {slot.spec.device}; a jump reads host memory",
            )
        view = code_view(slot, tensors)

        def taken() -> bool:
            return bool(view().all())

    elif isinstance(cond, SymBox):

        def taken() -> bool:
            return bool(cond.value)

    elif isinstance(cond, (bool, int)):
        constant = bool(cond)

        def taken() -> bool:
            return constant

    else:
        raise LoadError(
            Error.InvalidProgram,
            f"{where}: its condition (value {ins.cond}) is {cond!r}, neither a bool tensor nor a bool",
        )

    def goto() -> int:
        return after if taken() else destination

    return Step(position, CONTROL_KIND[JumpFalseCall], "jump", _nothing, no_capture=CONTROL_FLOW_REASON, goto=goto)


def _move_step(position: int, ins: MoveCall, objects: list[Any], slots: dict[int, Slot], tensors: Any) -> Step:
    """A MoveCall: `move_to` takes `move_from`'s sizes and contents (a tensor) or value (a run-time scalar)."""
    where = f"instruction {position} (move [{ins.move_from}] -> [{ins.move_to}])"
    source, target = slots.get(ins.move_from), slots.get(ins.move_to)
    run: Run
    if source is not None and target is not None:
        if source.spec.dtype != target.spec.dtype:
            raise LoadError(
                Error.InvalidProgram, f"{where}: moves a {source.spec.dtype} tensor into a {target.spec.dtype} one"
            )
        if source.ptr is not None or target.ptr is not None:
            raise LoadError(Error.NotSupported, f"{where}: moves device memory; devcopy moves host values only")
        src, dst = code_view(source, tensors), code_view(target, tensors)
        resize, sizes, tensor, spec = tensors.resize, tensors.sizes, target.tensor, target.spec

        def run() -> None:
            resize(tensor, spec, sizes(source.tensor), where)
            dst().copy_(src())

    elif source is None and target is None and isinstance(objects[ins.move_to], SymBox):
        box, value = objects[ins.move_to], objects[ins.move_from]

        def run() -> None:
            box.value = current(value)

    else:
        raise LoadError(
            Error.NotSupported,
            f"{where}: devcopy moves a tensor into a tensor or a value into a run-time scalar, not "
            f"{type(objects[ins.move_from]).__name__} into {type(objects[ins.move_to]).__name__}",
        )
    return Step(position, CONTROL_KIND[MoveCall], "move", run, no_capture=CONTROL_FLOW_REASON)


def _allocator_scope(allocators: Sequence[DeviceAllocator]) -> contextlib.AbstractContextManager[None]:
    """The method's own allocators registered for a kernel that looks its allocator up (whatever the registry
    holds later)."""
    return scoped_allocators(*allocators) if allocators else contextlib.nullcontext()


def _boxed_run(kernel: Any, args: list[Any], allocators: Sequence[DeviceAllocator]) -> Run:
    """A kernel with no prepare step (registered by the user), boxed at every call; a portable failure on the
    context becomes the same KernelFailure a prepared kernel raises."""

    def run() -> None:
        ctx = KernelRuntimeContext()
        with _allocator_scope(allocators):
            kernel(ctx, args)
        if not ctx.ok:
            raise KernelFailure(ctx.failure_state(), ctx.message)

    return run


def _kernel_run(kernel: Any, args: list[Any], slots: list[Slot | None], allocators: Sequence[DeviceAllocator]) -> Run:
    """The kernel's prepared run (prepared once, under the method's allocators), or its boxed call."""
    if not isinstance(kernel.fn, PreparedKernel):
        return _boxed_run(kernel, args, allocators)
    dynamic = frozenset(i for i, slot in enumerate(slots) if slot is not None and not slot.static)
    with _allocator_scope(allocators):
        return kernel.fn.prepare(args, dynamic)


def _symbolic_run(kernel: Any, args: list[Any], slots: list[Slot | None], allocators: Sequence[DeviceAllocator]) -> Run:
    """A kernel with a size computed at run time among its arguments (`view_copy(x, [s0, 16])`): prepared again at
    every call with the sizes' current values."""

    def run() -> None:
        _kernel_run(kernel, [current(arg) for arg in args], slots, allocators)()

    return run


def _copy_step(position: int, name: str, run: Run, src: Slot, out: Slot, tensors: Any, kernel: Any) -> Step:
    """An et_copy instruction: what a profile reports beside its run (device allocator, host buffer, bytes), and
    its device work for a graph."""
    direction = COPY_DIRECTIONS[name]
    device = out if direction != Direction.D2H else src
    host = src if direction == Direction.H2D else out if direction == Direction.D2H else None
    sizes, tensor = tensors.sizes, out.tensor
    work, no_capture = copy_work(kernel, direction, src, out)
    return Step(
        position,
        "copy",
        name,
        run,
        device.allocator,
        direction,
        host.storage if host is not None else None,
        lambda: sizes(tensor),
        out.spec.dtype.itemsize,
        work,
        no_capture,
    )


def _step(
    position: int,
    instruction: Any,
    program: Program,
    kernels: Sequence[Any],
    slots: dict[int, Slot],
    objects: list[Any],
    tensors: Any,
    allocators: Sequence[DeviceAllocator],
) -> Step:
    """One instruction, prepared."""
    if isinstance(instruction, JumpFalseCall):
        return _jump_step(
            position, instruction, objects, slots, tensors, program.load_instructions, len(program.instructions)
        )
    if isinstance(instruction, MoveCall):
        return _move_step(position, instruction, objects, slots, tensors)
    if isinstance(instruction, FreeCall):
        return Step(position, CONTROL_KIND[FreeCall], "free", _nothing, no_capture=CONTROL_FLOW_REASON)
    if isinstance(instruction, DelegateCall):
        delegate = program.delegates[instruction.delegate]
        op = f"delegate {delegate.name} on {delegate.device}"
        inputs = [slots.get(i, objects[i]) for i in (*instruction.args, *delegate.constants)]
        outputs = [slots[i] for i in instruction.outputs]
        run, compute = prepare_delegate(f"instruction {position} ({op})", delegate, inputs, outputs, tensors)
        allocator = next((s.allocator for s in (*inputs, *outputs) if isinstance(s, Slot) and s.allocator), None)
        work, no_capture = delegate_work(allocator, compute)
        return Step(position, "delegate", op, run, allocator, work=work, no_capture=no_capture)
    name = program.operators[instruction.op]
    arg_slots = [slots.get(i) for i in instruction.args]
    kernel, args = kernels[instruction.op], [objects[i] for i in instruction.args]
    symbolic = getattr(kernel, "lib", None) != PRIM_LIB and any(is_symbolic(arg) for arg in args)
    run = (_symbolic_run if symbolic else _kernel_run)(kernel, args, arg_slots, allocators)
    src, out = arg_slots[0], arg_slots[-1]
    if name in COPY_DIRECTIONS and src is not None and out is not None:
        return _copy_step(position, name, run, src, out, tensors, kernel)
    why = HOST_OP_REASON if isinstance(kernel.fn, PreparedKernel) else "a user-registered kernel on the host"
    return Step(position, "kernel", name, run, no_capture=why)


# ---- inputs and outputs ---------------------------------------------------------------------------------------
def host_bytes(tensor: torch.Tensor) -> np.ndarray:
    """The bytes of a contiguous CPU tensor as a uint8 array (zero-copy)."""
    return tensor.reshape(-1).view(torch.uint8).numpy()


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.device.type} {value.dtype} tensor of sizes {list(value.shape)}"
    return type(value).__name__


def exported_dims_problem(spec: TensorSpec, sizes: tuple[int, ...]) -> str:
    """Why a graph input planned as `spec` cannot take `sizes` under the limits torch.export set for its dimensions
    (a dimension without a torch.export.Dim keeps its size, one with a Dim stays within its min and max); empty
    when it can. The tensor's own resize rule
    (element count within capacity) is checked apart, by the mode's tensors."""
    for dim, (size, bound) in enumerate(zip(sizes, spec.sizes, strict=False)):
        if size != bound and not spec.may_vary(dim):
            return (
                f"dimension {dim} is static in the plan (size {bound}) and cannot take {size} (sizes {sizes}, "
                f"plan {spec.sizes}); export with a torch.export.Dim for it to vary"
            )
        limits = spec.ranges[dim] if dim < len(spec.ranges) else None
        if limits is not None and not limits[1] <= size <= limits[2]:
            name, low, high = limits
            return (
                f"dimension {dim} ({name}) was exported for sizes {low}..{high} and cannot take {size} (sizes "
                f"{sizes}); export with a wider torch.export.Dim({name!r}, min=..., max=...) for it"
            )
    return ""


def _input_setter(position: int, slot: Slot, tensors: Any, memory: Any) -> Callable[[torch.Tensor], None]:
    """Input `position` -> its planned memory: checks what a call can change (type, dtype, sizes)."""
    spec, resize, what = slot.spec, tensors.resize, f"input {position}"
    planned = (
        None
        if slot.ptr is None or slot.allocator is None
        else slot.allocator.planned_copy(Direction.H2D, slot.ptr, memory.host(spec.nbytes), spec.nbytes, slot.ptr.index)
    )
    sizes = torch.Size(spec.sizes)
    target = code_view(slot, tensors) if planned is None else None

    def set_input(tensor: torch.Tensor) -> None:
        if (
            not isinstance(tensor, torch.Tensor)
            or tensor.device.type != "cpu"
            or tensor.dtype != spec.dtype
            or tensor.layout != torch.strided
        ):
            layout = getattr(tensor, "layout", torch.strided)
            dense = "" if layout == torch.strided else f" ({layout}: pass tensor.to_dense())"
            raise ExecutionError(
                Error.InvalidArgument,
                f"input {position}: expected a CPU {spec.dtype} tensor, got {_describe(tensor)}{dense}",
            )
        if tensor.shape != sizes or spec.dynamic:
            shape = tuple(tensor.shape)
            problem = exported_dims_problem(spec, shape)
            if problem:
                raise ExecutionError(Error.InvalidArgument, f"{what}: {problem}")
            resize(slot.tensor, spec, shape, what)
        if planned is None:  # a host value: copied in place
            assert target is not None  # built above for exactly these slots
            target().copy_(tensor)
            return
        nbytes = tensor.numel() * tensor.element_size()
        planned.host[:nbytes] = host_bytes(tensor.detach().contiguous())
        planned(nbytes)

    return set_input


def _output_getter(slot: Slot | None, value: Any, tensors: Any, memory: Any) -> Callable[[], Any]:
    """Output -> a new CPU tensor (a D2H copy for a device value); a scalar output as it is."""
    if slot is None:
        return lambda: value
    if slot.ptr is None or slot.allocator is None:
        view = code_view(slot, tensors)
        return lambda: view().clone()
    spec, sizes_of, tensor = slot.spec, tensors.sizes, slot.tensor
    planned = slot.allocator.planned_copy(
        Direction.D2H, slot.ptr, memory.host(spec.nbytes), spec.nbytes, slot.ptr.index
    )

    def read() -> torch.Tensor:
        sizes = sizes_of(tensor)
        nbytes = math.prod(sizes) * spec.dtype.itemsize
        planned(nbytes)
        if not nbytes:  # an empty output: no bytes to reinterpret (numpy's empty view has stride 0)
            return torch.empty(sizes, dtype=spec.dtype)
        return torch.from_numpy(planned.host[:nbytes].copy()).view(spec.dtype).view(sizes)

    return read


# ---- the plan -------------------------------------------------------------------------------------------------
def _failure(step: Step, exc: Exception) -> ExecutionError:
    """A step's failure as the call's ExecutionError, naming the instruction (index, op)."""
    if isinstance(exc, ExecutionError):  # already names what failed (a delegate's output resize)
        return exc
    if isinstance(exc, KernelFailure):
        return ExecutionError(exc.error, f"instruction {step.index} ({step.op}) failed with {exc.error.name}: {exc}")
    return ExecutionError(Error.Internal, f"instruction {step.index} ({step.op}) raised: {exc}")


def _prefix_sums(counts: Sequence[int]) -> tuple[int, ...]:
    """counts -> how many after the first k items, for k = 0..len."""
    return (0, *itertools.accumulate(counts))


class Plan:
    """The steps of one method with its input setters, output getters (mutated inputs written back) and counters.
    `run(inputs, on_step)` is the call; `on_step(step)`, when given, runs each step in place of the plan (it must
    call `step.run()`), so a profiler times exactly the loop a plain call runs."""

    def __init__(
        self,
        steps: Sequence[Step],
        directions: Sequence[str],
        setters: Sequence[tuple[Callable[[torch.Tensor], None], bool]] = (),
        outputs: Sequence[tuple[Callable[[], Any], bool]] = (),
        write_back: Sequence[tuple[int, Callable[[], Any], bool]] = (),
    ) -> None:
        self.steps = tuple(steps)
        self._runs = _distinct(step.run for step in self.steps)
        self._starts = tuple(range(len(self.steps)))  # run position -> the position of the first step it runs
        self._directions = tuple(directions)
        self._per_call = Counter(step.direction for step in self.steps if step.kind == "copy")
        self._calls = 0  # calls whose every step ran: each made `_per_call` copies
        self._partial: Counter[str | None] = Counter()  # the copies of calls that failed midway
        self.caller_copies = 0
        self._setters = tuple(setter for setter, _ in setters)
        self._setter_copies = _prefix_sums([int(device) for _, device in setters])
        self._write_back = tuple((position, read) for position, read, _ in write_back)
        self._outputs = tuple(read for read, _ in outputs)
        self._output_on_device = tuple(bool(device) for _, device in outputs)
        self._reads_copies = sum(device for _, device in outputs) + sum(device for _, _, device in write_back)
        self.jumps = any(step.goto is not None for step in self.steps)
        if self.jumps:  # what runs depends on the data: counted as it runs
            self._per_call = Counter()
        self._visits: list[int] = [0] * len(self.steps)
        self._failed_at = 0

    @property
    def visits(self) -> tuple[int, ...]:
        """How many times each step ran in the last call (a plan with jumps; zeros otherwise): 0 for a branch
        not taken, a loop's count for a loop body."""
        return tuple(self._visits)

    def _run_jumps(self, on_step: OnStep | None) -> None:
        """Run the steps by a program counter: a jump step's `goto()` picks the next one."""
        steps, counts, end = self.steps, self._partial, len(self.steps)
        visits = self._visits = [0] * end
        pc = 0
        try:
            while pc < end:
                step = steps[pc]
                if on_step is None:
                    step.run()
                else:
                    on_step(step)
                visits[pc] += 1
                if step.direction is not None:
                    counts[step.direction] += 1
                goto = step.goto
                pc = pc + 1 if goto is None else goto()
        except BaseException:
            self._failed_at = pc
            raise

    @property
    def copies(self) -> dict[str, int]:
        """et_copy kernel runs by direction over every call so far."""
        return {d: self._per_call[d] * self._calls + self._partial[d] for d in self._directions}

    def run(
        self,
        inputs: Sequence[Any],
        on_step: OnStep | None = None,
        given: frozenset[int] = frozenset(),
        keep: Callable[[int], Any] | None = None,
    ) -> tuple[Any, ...]:
        """Set the inputs, run every step (through `on_step` when given), write back, read the outputs. The
        caller-side copies and the et_copy runs are counted, also on a failure midway (found by the identity of the
        callable that raised, so the loops keep no counters). `given`: input positions already in place (a device
        value the caller fed back, runtime/method.py); `keep(position)`, when given, stands for each output left on
        the device instead of its read."""
        self._set_inputs(inputs, given)
        runs = self._runs
        try:
            if self.jumps:
                self._run_jumps(on_step)
            elif on_step is None:
                for run in runs:
                    run()
            else:
                for step in self.steps:
                    on_step(step)
        except BaseException as exc:
            if self.jumps:  # its copies were counted as they ran
                failed = self._failed_at
            else:
                failed = self._starts[runs.index(run)] if on_step is None else self.steps.index(step)
                self._partial.update(s.direction for s in self.steps[:failed] if s.kind == "copy")
            if not isinstance(exc, Exception):  # an interrupt: the method settles it (runtime/method.py)
                raise
            failure = _failure(self.steps[failed], exc)
            if failure is exc:
                raise
            raise failure from exc
        self._calls += 1
        for position, read in self._write_back:  # a mutated input: the caller sees it, as in eager
            inputs[position].copy_(read())
        return self._read_outputs(keep)

    def _set_inputs(self, inputs: Sequence[Any], given: frozenset[int]) -> None:
        """Each input by its setter, but those in `given` (already in place); the caller-side copies counted, also
        when a setter fails."""
        setters = self._setters
        if len(inputs) != len(setters):
            raise ExecutionError(Error.InvalidArgument, f"The method takes {len(setters)} inputs, got {len(inputs)}.")
        done = 0  # inputs set so far: an interrupt can arrive before the loop binds anything
        try:
            # lengths checked above; zip's strict keyword would cost ~0.1 us per call on this path
            for set_input, tensor in zip(setters, inputs):  # noqa: B905
                if given and done in given:
                    done += 1
                    continue
                set_input(tensor)
                done += 1
        except BaseException:
            self.caller_copies += self._setter_copies[done] - sum(1 for position in given if position < done)
            raise
        self.caller_copies += self._setter_copies[-1] - len(given)  # a device value fed back moved on the device

    def _read_outputs(self, keep: Callable[[int], Any] | None) -> tuple[Any, ...]:
        """The outputs read to the caller; with `keep`, each output left on the device kept there instead."""
        if keep is None:
            outputs = tuple(read() for read in self._outputs)
            self.caller_copies += self._reads_copies
            return outputs
        on_device = self._output_on_device
        outputs = tuple(keep(i) if on_device[i] else read() for i, read in enumerate(self._outputs))
        self.caller_copies += self._reads_copies - sum(on_device)
        return outputs

    def use_groups(self, groups: Sequence[tuple[int, int, Run]]) -> None:
        """Run `replay` in place of steps start..stop-1 for each (start, stop, replay) (a recorded graph,
        runtime/capture.py); calls through `on_step` still run every step."""
        runs: list[Run] = []
        starts: list[int] = []
        position = 0
        for start, stop, replay in sorted(groups, key=lambda group: group[0]):
            runs += [step.run for step in self.steps[position:start]] + [replay]
            starts += [*range(position, start), start]
            position = stop
        runs += [step.run for step in self.steps[position:]]
        starts += range(position, len(self.steps))
        self._runs, self._starts = _distinct(runs), tuple(starts)


def _distinct(runs: Iterable[Run]) -> tuple[Run, ...]:
    """The steps' runs, each a distinct object (a kernel may hand one callable to two steps), so the run that
    raised names its step."""
    seen: set[int] = set()
    distinct = []
    for run in runs:
        distinct.append(run if id(run) not in seen else functools.partial(run))
        seen.add(id(distinct[-1]))
    return tuple(distinct)


def build_plan(
    program: Program,
    kernels: Sequence[Any],
    slots: dict[int, Slot],
    objects: list[Any],
    tensors: Any,
    memory: Any,
    directions: Sequence[str],
) -> tuple[Plan, Plan]:
    """Prepare every instruction once, run the load-time ones (hoisted constants) and return the call's plan and the
    load-time part's (its copies counted apart; a method runs it again when it reloads its constants)."""
    allocators = tuple(iter_allocators(slots))
    steps = [
        _step(position, instruction, program, kernels, slots, objects, tensors, allocators)
        for position, instruction in enumerate(program.instructions)
    ]
    at_load = Plan(steps[: program.load_instructions], directions)
    at_load.run(())

    def device(index: int) -> bool:
        slot = slots.get(index)
        return slot is not None and slot.ptr is not None

    setters = [
        (_input_setter(position, slots[index], tensors, memory), device(index))
        for position, index in enumerate(program.inputs)
    ]

    def getter(index: int) -> Callable[[], Any]:
        return _output_getter(slots.get(index), objects[index], tensors, memory)

    outputs = [(getter(index), device(index)) for index in program.outputs]
    write_back = [
        (position, getter(program.inputs[position]), device(program.inputs[position]))
        for position in program.written_back_inputs
    ]
    plan = Plan(steps[program.load_instructions :], directions, setters, outputs, write_back)
    return plan, at_load


def iter_allocators(slots: dict[int, Slot]) -> Iterator[DeviceAllocator]:
    """The allocators a method's device memory came from, one per device type."""
    yield from {s.allocator.device_type(): s.allocator for s in slots.values() if s.allocator}.values()
