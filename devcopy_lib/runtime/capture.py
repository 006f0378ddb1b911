"""Graph replay of a loaded method's device work (docs/design.md "Graph replay"): which steps a CUDA graph can
record, how consecutive ones group, and the replay that stands in for each group.

At load every step says whether its device work can be recorded (`Step.work`) or why not (`Step.no_capture`):
a CPU op, dynamic shapes, a user-registered kernel, a pageable host buffer, a backend without CUDA graphs.
`group_steps` joins each run of consecutive recordable steps into one group. The first successful call is the
warm-up a capture needs (cuBLAS handles, torch's allocator); right after it, `Capture.record` records each group
as one `torch.cuda.CUDAGraph` (torch kernels and CuPy's memcpyAsync on the one capture stream, no host sync inside)
and swaps the group's steps for one replay that synchronises once. A group that fails to record runs uncaptured,
with the reason kept (a host synchronisation inside a delegate, for one).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch

from ..devices.allocator import CopyRecord, DeviceAllocator
from ..devices.graph_copy import StreamCopy, stream_copy
from ..errors import InvalidArgumentError
from ..kernels.device_copy import is_device_copy_kernel
from ..kernels.prepared import Run
from ..names import Direction
from ..tensors.error import Error
from .failures import ExecutionError, LoadError
from .slots import Slot

CaptureOption = bool | Literal["auto"]
AUTO: Literal["auto"] = "auto"
OFF_REASON = "capture is off (capture=False)"
DYNAMIC_REASON = "dynamic shapes (sizes known only at the call)"
HOST_OP_REASON = "runs on the host (a CPU op)"
PENDING_REASON = "recorded after the first call"
CONTROL_FLOW_REASON = "the method has control flow (jumps): what runs depends on the data"


class CaptureStep(Protocol):
    """What capture reads of a plan's step (`plan.Step` is one): declared here, so capture does not import the plan
    that imports it."""

    @property
    def index(self) -> int: ...
    @property
    def op(self) -> str: ...
    @property
    def run(self) -> Run: ...
    @property
    def allocator(self) -> DeviceAllocator | None: ...
    @property
    def work(self) -> DeviceWork | None: ...
    @property
    def no_capture(self) -> str: ...


class CapturePlan(Protocol):
    """What capture hands its replays to (`plan.Plan` is one)."""

    def use_groups(self, groups: Sequence[tuple[int, int, Run]]) -> None: ...


@dataclass(frozen=True, slots=True)
class DeviceWork:
    """A step's device work alone, with no host synchronisation: what a CUDA graph records for it. `count`, for a
    copy, keeps the allocator's statistics for one replay as the uncaptured copy would."""

    record: Run
    count: Run | None = None


def check_option(capture: object) -> CaptureOption:
    """`capture` as given when it is "auto", True or False; otherwise an InvalidArgumentError naming it."""
    if capture is True or capture is False:
        return capture
    if capture == AUTO:
        return AUTO
    raise InvalidArgumentError(
        f"capture must be 'auto' (graphs where safe), True (required) or False (off), got {capture!r}"
    )


def graph_problem(allocator: DeviceAllocator | None) -> str:
    """Why device work on `allocator` cannot be recorded as a CUDA graph; empty when it can."""
    if allocator is None:
        return HOST_OP_REASON
    if not allocator.capabilities.graphs:
        return f"the {allocator.backend} backend has no CUDA graphs"
    if not torch.cuda.is_available():
        return "torch was built without CUDA (torch.cuda.is_available() is False)"
    devices = allocator.device_count()
    if devices != 1:
        return f"{devices} GPUs: graphs are recorded on one-GPU machines only"
    return ""


def _on_current_stream(copy: StreamCopy) -> Run:
    """`copy` on torch's current stream: the capture stream while a graph records, so torch's kernels and the
    copies land in one graph in program order."""

    def record() -> None:
        copy(torch.cuda.current_stream().cuda_stream)

    return record


def copy_work(kernel: Any, direction: str, src: Slot, out: Slot) -> tuple[DeviceWork | None, str]:
    """An et_copy step's device work (a copy between a planned pinned host buffer and device memory) or why it
    cannot be recorded."""
    device, host = (out, src) if direction == Direction.H2D else (src, out)
    allocator, ptr, storage = device.allocator, device.ptr, host.storage
    problem = graph_problem(allocator)
    if problem:
        return None, problem
    if direction == Direction.D2D:
        return None, "a device-to-device copy (its route, peer or host hop, is decided per call)"
    if not is_device_copy_kernel(getattr(kernel, "fn", None)):
        return None, "a user-registered kernel (it may do anything at a call)"
    if not (src.static and out.static) or src.spec.sizes != out.spec.sizes:
        return None, DYNAMIC_REASON
    assert allocator is not None and ptr is not None  # graph_problem refused a host-only copy
    nbytes = src.spec.nbytes
    if storage is None or not allocator.is_pinned(storage, nbytes):
        return None, "a pageable host buffer (only the method's pinned arenas are recorded)"
    address = int(storage.ctypes.data)
    dst, source = (ptr.address, address) if direction == Direction.H2D else (address, ptr.address)
    record = (
        CopyRecord(ptr, storage, nbytes, ptr.index)
        if direction == Direction.H2D
        else CopyRecord(storage, ptr, nbytes, ptr.index)
    )
    count = functools.partial(allocator.count_copy, direction, record)
    return DeviceWork(_on_current_stream(stream_copy(dst, source, nbytes)), count), ""


def delegate_work(allocator: DeviceAllocator | None, compute: Run | None) -> tuple[DeviceWork | None, str]:
    """A delegate step's device work (its kernels and the writes into planned outputs, `compute`: None when its
    shapes are dynamic) or why it cannot be recorded."""
    problem = graph_problem(allocator)
    if problem:
        return None, problem
    if compute is None:
        return None, DYNAMIC_REASON
    return DeviceWork(compute), ""


def group_steps(steps: Sequence[CaptureStep]) -> list[tuple[int, int]]:
    """Each maximal run of consecutive recordable steps (`work` set) as (start, stop) positions in `steps`."""
    groups: list[tuple[int, int]] = []
    start = None
    for position, step in enumerate((*steps, None)):
        recordable = step is not None and step.work is not None
        if recordable and start is None:
            start = position
        elif not recordable and start is not None:
            groups.append((start, position))
            start = None
    return groups


def _record_graph(steps: Sequence[CaptureStep], pool: Any) -> torch.cuda.CUDAGraph:
    """The steps' device work recorded as one CUDA graph (the caller settled the device before)."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
        for step in steps:
            assert step.work is not None  # grouped for it
            step.work.record()
    return graph


def _replay(graph: torch.cuda.CUDAGraph, steps: Sequence[CaptureStep]) -> Run:
    """One call of the group: launch the graph, wait for it once, count its copies. When an allocator was closed
    under the method, the steps run uncaptured instead (they refuse the freed memory with the allocator's error)."""
    replay, current_stream = graph.replay, torch.cuda.current_stream
    counts = tuple(step.work.count for step in steps if step.work is not None and step.work.count is not None)
    allocators = tuple({id(s.allocator): s.allocator for s in steps if s.allocator is not None}.values())
    runs = tuple(step.run for step in steps)

    def run() -> None:
        for allocator in allocators:
            if allocator.closed:
                for step_run in runs:
                    step_run()
                return
        replay()
        current_stream().synchronize()
        for count in counts:
            count()

    return run


# How a caller of load_method gets past a refused capture=True; the CLI says the same in its flags' terms.
FALLBACK_HINT = "load with capture='auto' to fall back, or capture=False"


class Capture:
    """A method's graphs: the groups and every other step's reason, decided at load; recorded after the first
    successful call (`pending` until then); `summary()` and `reason(step)` say what runs as a graph and why not."""

    def __init__(self, steps: Sequence[CaptureStep], option: CaptureOption) -> None:
        self.option = option
        self._steps = tuple(steps)
        # with jumps a group's steps need not run together: every step runs on its own
        self._control = any(getattr(step, "goto", None) is not None for step in self._steps)
        self._groups = group_steps(steps) if option is not False and not self._control else []
        self._failed: dict[int, str] = {}  # step position -> why its recording failed
        self._recorded: list[tuple[int, int]] = []
        self.pending = bool(self._groups)
        if option is True and not self._groups:
            raise LoadError(Error.NotSupported, f"capture=True, but no step can be recorded: {self._why_none()}")

    def _settle(self) -> None:
        """Wait for the device work enqueued so far (a capture starts on a settled device)."""
        for allocator in {id(s.allocator): s.allocator for s in self._steps if s.allocator is not None}.values():
            allocator.synchronize()

    def _why_none(self) -> str:
        reasons = sorted({step.no_capture for step in self._steps if step.no_capture}) or ["the method has no steps"]
        if self._control:
            reasons = [CONTROL_FLOW_REASON]
        return "; ".join(reasons) + f" ({FALLBACK_HINT})"

    def reason(self, position: int) -> str:
        """What step `position` runs as: its graph, or why it runs uncaptured."""
        for number, (start, stop) in enumerate(self._recorded):
            if start <= position < stop:
                return f"graph {number} (steps {start}..{stop - 1})"
        if self.option is False:
            return OFF_REASON
        if position in self._failed:
            return self._failed[position]
        if self._control:
            return CONTROL_FLOW_REASON
        step = self._steps[position]
        return step.no_capture or PENDING_REASON

    def summary(self) -> dict[str, Any]:
        """The capture report: the option, the graphs, each uncaptured step with its reason, and all that in a
        `line` for a report."""
        captured = sum(stop - start for start, stop in self._recorded)
        fallbacks = [
            {"index": step.index, "op": step.op, "reason": self.reason(position)}
            for position, step in enumerate(self._steps)
            if not any(start <= position < stop for start, stop in self._recorded)
        ]
        summary = {
            "option": self.option,
            "on": bool(self._recorded),
            "pending": self.pending,
            "graphs": len(self._recorded),
            "captured_steps": captured,
            "steps": len(self._steps),
            "fallbacks": fallbacks,
        }
        return {**summary, "line": _line(summary)}

    def record(self, plan: CapturePlan) -> None:
        """Record every group (a group that fails is tried step by step; what still fails keeps its reason) and
        hand the plan the replays. With capture=True a failure is an ExecutionError naming the step and why."""
        self.pending = False
        self._settle()
        pool = torch.cuda.graph_pool_handle()  # one private pool: the graphs replay in the order recorded
        graphs: list[tuple[int, int, torch.cuda.CUDAGraph]] = []
        for start, stop in self._groups:
            graphs += self._record_group(start, stop, pool)
        if self.option is True and self._failed:
            position, why = next(iter(self._failed.items()))
            step = self._steps[position]
            raise ExecutionError(Error.NotSupported, f"capture=True: instruction {step.index} ({step.op}): {why}")
        self._recorded = [(start, stop) for start, stop, _ in graphs]
        plan.use_groups([(start, stop, _replay(graph, self._steps[start:stop])) for start, stop, graph in graphs])

    def _record_group(self, start: int, stop: int, pool: Any) -> list[tuple[int, int, torch.cuda.CUDAGraph]]:
        try:
            return [(start, stop, _record_graph(self._steps[start:stop], pool))]
        except Exception as exc:
            if stop - start == 1:
                self._failed[start] = f"recording failed ({type(exc).__name__}: {exc}); a host sync inside?"
                return []
        self._settle()  # a failed capture may leave work enqueued before it
        return [g for position in range(start, stop) for g in self._record_group(position, position + 1, pool)]


def _line(summary: dict[str, Any]) -> str:
    """A summary in one line: the graphs replaying the device work, and why the other steps run uncaptured."""
    if summary["option"] is False:
        return "graph replay: off (capture=False)"
    if summary["pending"]:
        waiting = sum(f["reason"] == PENDING_REASON for f in summary["fallbacks"])
        head = f"graph replay: {waiting} step(s) to record after the first call"
    else:
        head = (
            f"graph replay: {summary['graphs']} graph(s) covering {summary['captured_steps']}/{summary['steps']} steps"
        )
    reasons = sorted({f["reason"] for f in summary["fallbacks"] if f["reason"] != PENDING_REASON})
    return head + (f"; uncaptured: {'; '.join(reasons)}" if reasons else "")
