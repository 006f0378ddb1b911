"""A profiled call as a Chrome / Perfetto trace (the Trace Event Format's JSON: open it in ui.perfetto.dev or
chrome://tracing), as torch.profiler's `export_chrome_trace` writes one.

Built from `Method.profile` rows (runtime/profile.py): each instruction is one complete event (`ph: "X"`) named by
its operator (`et_copy::_h2d_copy.out`, `aten::cumsum.out`) or delegate, lasting its measured time (the median over
the profiled calls). The runtime runs one instruction at a time, so the events are laid end to end in program order:
each starts where the one before ended on the host (its wall time, or its measured time when longer); profiled
calls run uncaptured, and each event's `capture` says which graph replays it on a plain call, or why none does.
Each device is a process (pid) with a `compute` track and, on devices, a `copies` track (tids): a copy sits on the
track of the device it reaches or leaves, a delegate on its device's compute track, CPU kernels on the CPU's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..devices.device import CPU, Device
from ..names import COPY_DIRECTIONS, Direction
from .files import write_text
from .program import DelegateCall, KernelCall, Program, TensorValue

if TYPE_CHECKING:
    from .method import Method

COMPUTE_TID, COPIES_TID = 1, 2
TRACK_NAMES = {COMPUTE_TID: "compute", COPIES_TID: "copies"}


def instruction_device(program: Program, index: int) -> Device:
    """The device instruction `index` works on: a delegate's device; for a copy the device side (where an H2D or
    D2D writes, where a D2H reads); the CPU for every other kernel."""
    instruction = program.instructions[index]
    if isinstance(instruction, DelegateCall):
        return program.delegates[instruction.delegate].device
    if not isinstance(instruction, KernelCall):  # a jump, move or free: the host's control flow
        return CPU
    direction = COPY_DIRECTIONS.get(program.operator_of(instruction))
    if direction is None:
        return CPU
    value = instruction.args[0] if direction == Direction.D2H else instruction.args[-1]
    return program.tensor(value).spec.device


def _tensor_bytes(program: Program, indices: Sequence[int]) -> int:
    return sum(v.spec.nbytes for i in indices if isinstance(v := program.values[i], TensorValue))


def _name_and_args(program: Program, row: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """An event's name and its `args`: bytes moved (copies), read and written (delegates), written (kernels)."""
    instruction = program.instructions[row["index"]]
    moved: dict[str, Any]
    if isinstance(instruction, DelegateCall):
        name = program.delegates[instruction.delegate].name
        moved = {"input_bytes": _tensor_bytes(program, instruction.args)}
        moved["output_bytes"] = _tensor_bytes(program, instruction.outputs)
    elif row["kind"] == "copy":
        name, moved = row["op"], {"bytes": row["bytes"], "direction": COPY_DIRECTIONS[row["op"]]}
    elif isinstance(instruction, KernelCall):
        name, moved = row["op"], {"output_bytes": _tensor_bytes(program, instruction.args[-1:])}
    else:  # a jump, move or free
        name, moved = program.instruction_name(row["index"]), {}
    predicted = row.get("predicted_s")
    timing = {
        "clock": row["clock"],
        "wall_us": row["wall_s"] * 1e6,
        **({"predicted_us": predicted * 1e6} if predicted is not None else {}),
        **({"memory": row["memory"]} if row.get("memory") else {}),
        **({"capture": row["capture"]} if row.get("capture") else {}),  # its graph on a plain call, or why none
        **({"branch": branch} if (branch := program.branch_of(row["index"])) else {}),  # control flow: where it ran
        **({"runs": row["runs"]} if row.get("runs", 1) != 1 else {}),  # a loop body's runs per call
    }
    return name, {"index": row["index"], **moved, **timing}


def _metadata(pid: int, device: Device, tids: Sequence[int]) -> list[dict[str, Any]]:
    """Name a device's process and its tracks (ts 0, like every event, so a strict reader finds them ordered)."""
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0, "args": {"name": str(device)}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "ts": 0, "args": {"sort_index": pid}},
    ]
    events += [
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0, "args": {"name": TRACK_NAMES[tid]}}
        for tid in tids
    ]
    return events


def chrome_trace(
    rows: Sequence[dict[str, Any]],
    program: Program,
    repeat: int | None = None,
    backend: str | None = None,
    cost_model: Any = None,
    capture: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The trace of `Method.profile` rows of `program` (`method.program`): `{"traceEvents", "displayTimeUnit",
    "otherData"}`; `repeat`, `backend`, `cost_model` (its `source`, or that dict) and `capture` (`Method.capture`)
    are recorded in `otherData`."""
    devices = sorted({instruction_device(program, r["index"]) for r in rows}, key=lambda d: (not d.is_cpu, str(d)))
    pids = {device: pid for pid, device in enumerate(devices, start=1)}
    events: list[dict[str, Any]] = []
    for device, pid in pids.items():
        events += _metadata(pid, device, [COMPUTE_TID] if device.is_cpu else [COMPUTE_TID, COPIES_TID])
    clock_us = 0.0
    for row in rows:
        if row.get("runs", 1) == 0:  # a branch the profiled calls did not take: no event
            continue
        name, args = _name_and_args(program, row)
        copy = row["kind"] == "copy"
        events.append(
            {
                "name": name,
                "cat": row["kind"],
                "ph": "X",
                "ts": clock_us,
                "dur": row["measured_s"] * 1e6,
                "pid": pids[instruction_device(program, row["index"])],
                "tid": COPIES_TID if copy else COMPUTE_TID,
                "args": args,
            }
        )
        clock_us += max(row["wall_s"], row["measured_s"]) * 1e6
    source = cost_model if isinstance(cost_model, Mapping) else getattr(cost_model, "source", None)
    other = {
        "generator": "devcopy",
        "backend": backend,
        "profiled_calls": repeat,
        "durations": "the median of each instruction over the profiled calls; events laid end to end in order",
        "cost_model": dict(source) if source else None,
        **({"capture": dict(capture)} if capture is not None else {}),
    }
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def profile_trace(method: Method, *inputs: Any, repeat: int = 10, cost_model: Any = None) -> dict[str, Any]:
    """Profile `repeat` calls of a loaded `method` (`Method.profile`) and return them as a Chrome trace."""
    rows = method.profile(*inputs, repeat=repeat, cost_model=cost_model)
    backend = next((step.allocator.backend for step in method.steps if step.allocator is not None), None)
    return chrome_trace(rows, method.program, repeat, backend, cost_model, method.capture)


def write_trace(trace: dict[str, Any], path: str) -> str:
    """Write a trace as JSON (whole or not at all); returns the absolute path. Strict JSON: no NaN."""
    return write_text(path, json.dumps(trace, allow_nan=False))
