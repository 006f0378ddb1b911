"""A model placed (`place_model`: what `devcopy place MODEL` reports) and a model run beside its eager module
(`run_model`: what `devcopy run MODEL` reports), from plain options to the JSON-ready result.

Stages that run the model's own code (its export, ExecuTorch's second trace, the eager run) run inside
`user_code(stage)`, a caller's context manager: the CLI's turns a failure there into a `user_code` error naming the
model file, so that the user's faults are told apart from devcopy's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..bench.cost_model import copy_pricer
from ..compare import compare_outputs
from ..devices.allocator import DeviceAllocator
from ..errors import InvalidArgumentError
from ..lowering.lower import DEFAULT_DELEGATE_OPS, LoweredProgram, export_program, lower
from ..lowering.user_model import check_exported
from ..names import Direction, Partition, Strategy
from ..placement.diff import placement_diff
from ..placement.place import PlacedProgram, place_devices
from ..placement.report_export import export_report
from ..runtime.files import write_bytes
from .trial import RunOptions, run_trial

UserCode = Callable[[str], contextlib.AbstractContextManager[None]]  # a stage's name -> its guard
EXECUTORCH_FIELD = "executorch"  # names: the result's field of ExecuTorch's own counts (compare_executorch)
SAVED_PTE_FIELD = "saved_pte"  # the result's field of the .pte save_pte wrote


def trusted(stage: str) -> contextlib.AbstractContextManager[None]:
    """The default guard: the model's code is the caller's own, so what it raises passes unchanged."""
    return contextlib.nullcontext()


@dataclass(frozen=True)
class PlacementOptions:
    """What decides delegates and copies: the delegated ops (None: DEFAULT_DELEGATE_OPS), the delegates' device
    `target` with `targets` for some of them (by op overload or delegate name), `lower`'s partitioning and
    `place_devices`' strategy and switches."""

    delegate_ops: tuple[str, ...] | None = None
    target: str = "cuda:0"
    targets: dict[str, str] = field(default_factory=dict)
    partition: str = Partition.CAPABILITY
    strategy: str = Strategy.EXECUTORCH
    skip_h2d_for_method_inputs: bool = False
    skip_d2h_for_method_outputs: bool = False
    hoist_constants: bool = False
    resident_buffers: bool = False

    @property
    def target_device(self) -> str | dict[str, str]:
        """`lower`'s target_device: the one device, or every delegated op mapped (to `target` unless `targets`
        names it) with the delegate names `targets` gives."""
        if not self.targets:
            return self.target
        ops = DEFAULT_DELEGATE_OPS if self.delegate_ops is None else self.delegate_ops
        return {**{op: self.target for op in ops}, **self.targets}

    @property
    def executorch_only(self) -> bool:
        """Whether ExecuTorch's own placement does all these options ask (no dedupe, peer, hoisting or residency)."""
        return self.strategy == Strategy.EXECUTORCH and not self.hoist_constants and not self.resident_buffers


def lower_and_place(
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    options: PlacementOptions,
    backend: str,
    name: str,
    user_code: UserCode = trusted,
) -> PlacedProgram:
    """The model `name` exported, checked, lowered and placed by `options`, copies priced for `backend` by the one
    pricer (bench.cost_model.copy_pricer). A target naming no delegate the lowering made is NoSuchDelegate."""
    with user_code("torch.export"):
        exported = export_program(module, inputs)
    check_exported(name, exported)
    lowered = lower(exported, options.delegate_ops, options.target_device, options.partition)
    _check_delegate_targets(options.targets, lowered)
    return place_devices(
        lowered,
        strategy=options.strategy,
        skip_h2d_for_method_inputs=options.skip_h2d_for_method_inputs,
        skip_d2h_for_method_outputs=options.skip_d2h_for_method_outputs,
        hoist_constants=options.hoist_constants,
        resident_buffers=options.resident_buffers,
        cost_model=copy_pricer(backend),
    )


class NoSuchDelegate(InvalidArgumentError):
    """Targets name delegates (`names`) the lowering did not make; `made` lists the ones it did."""

    def __init__(self, names: list[str], made: list[str]) -> None:
        super().__init__(f"targets {', '.join(names)}: no such delegate; the lowering made {', '.join(made) or 'none'}")
        self.names, self.made = names, made


class NoSuchDevice(InvalidArgumentError):
    """Delegates target `devices` the `backend` lacks: it sees `count` device(s)."""

    def __init__(self, devices: list[str], backend: str, count: int) -> None:
        super().__init__(f"devices {', '.join(devices)}: the {backend} backend sees {count} device(s)")
        self.devices, self.backend, self.count = devices, backend, count


def _check_delegate_targets(targets: dict[str, str], lowered: LoweredProgram) -> None:
    """Every target that is not an op (no '.') must name a delegate the lowering made (else NoSuchDelegate)."""
    unknown = [key for key in targets if "." not in key and key not in lowered.delegates]
    if unknown:
        raise NoSuchDelegate(unknown, list(lowered.delegates))


def place_model(
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    options: PlacementOptions,
    backend: str,
    name: str,
    user_code: UserCode = trusted,
    compare_executorch: bool = False,
    save_pte: str | None = None,
    diff: PlacementOptions | None = None,
    report: str | None = None,
) -> dict[str, Any]:
    """The model placed by `options` (copies priced for `backend`): its PlacementReport's dict with the delegates'
    devices and the model's own delegated ops; with `compare_executorch` ExecuTorch's own counts, with `save_pte` the
    .pte ExecuTorch's pipeline makes written there, with `diff` the difference to the placement by those options,
    with `report` the report file written there (.html or .json)."""
    placed = lower_and_place(module, inputs, options, backend, name, user_code)
    assert placed.report is not None  # place_devices always reports
    result = {
        "ok": True,
        "model": name,
        "target": options.target,
        "targets": options.targets,
        "delegate_devices": {n: str(d.target_device or "cpu") for n, d in placed.delegates.items()},
        # the delegated ops this model has (delegate_ops: every op that may be delegated)
        "model_delegate_ops": list(dict.fromkeys(op for d in placed.delegates.values() for op in d.ops)),
        **placed.report.to_dict(),
    }
    if compare_executorch:
        result[EXECUTORCH_FIELD] = _executorch_counts(module, inputs, placed, options, user_code)
    if save_pte is not None:
        result[SAVED_PTE_FIELD] = _save_pte(save_pte, module, inputs, placed, options, user_code)
    if diff is not None:  # the other placement: the model is exported again for it
        result["diff"] = placement_diff(placed, lower_and_place(module, inputs, diff, backend, name, user_code))
    if report is not None:
        result["report_file"] = _write_report(result, report, name)
    return result


def _executorch_counts(
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    placed: PlacedProgram,
    options: PlacementOptions,
    user_code: UserCode = trusted,
) -> dict[str, Any]:
    """ExecuTorch's own counts for the same ops, partitioning and targets, or ExecuTorch's refusal."""
    from ..pte import executorch_reference

    if not executorch_reference.available():
        return {"available": False, "error": "ExecuTorch is not installed: pip install -e '.[reference]'"}
    note = (
        None
        if options.executorch_only
        else (
            "ExecuTorch has only its own placement (no dedupe, peer, hoisting or resident buffers): "
            "these are PropagateDevicePass's counts"
        )
    )
    # ExecuTorch exports the model again, running its forward: what the user's code raises or exits there is theirs
    with user_code("ExecuTorch's torch.export (--compare-executorch traces the model again)"):
        try:
            counts = executorch_reference.executorch_counts(
                module,
                inputs,
                placed.delegate_ops,
                target_device=options.target_device,
                partition=options.partition,
                skip_h2d_for_method_inputs=options.skip_h2d_for_method_inputs,
                skip_d2h_for_method_outputs=options.skip_d2h_for_method_outputs,
            )
        except executorch_reference.ExecuTorchRefusal as exc:  # ExecuTorch's own verdict: a result, not an error
            return {"available": True, "refused": True, "error": str(exc)}
    return {
        "available": True,
        "delegates": counts["delegates"],
        "copies": {Direction.H2D: counts[Direction.H2D], Direction.D2H: counts[Direction.D2H]},
        **({"note": note} if note else {}),
    }


def _save_pte(
    path: str,
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    placed: PlacedProgram,
    options: PlacementOptions,
    user_code: UserCode = trusted,
) -> dict[str, Any]:
    """Write the `.pte` ExecuTorch's own pipeline makes of the model with devcopy's partitioner and backend (the
    same delegate ops, one `options.target` device, partitioning and skip options) to `path`, whole or not at all;
    what was written: its path, size, operators and copies."""
    from ..pte.backend import executorch_pte
    from ..pte.reader import open_pte

    # ExecuTorch exports the model again, running its forward: what the user's code raises or exits there is theirs
    with user_code("ExecuTorch's torch.export (--save-pte traces the model again)"):
        data = executorch_pte(
            module,
            inputs,
            placed.delegate_ops,
            options.target,
            options.partition,
            options.skip_h2d_for_method_inputs,
            options.skip_d2h_for_method_outputs,
        )
    write_bytes(path, data)  # whole or not at all, 0644 like a report
    program = open_pte(data)
    copies = program.copies()
    saved = {"path": path, "bytes": len(data), "operators": program.operators}
    saved["copies"] = {direction: calls for direction, (calls, _) in copies.items()}
    if not options.executorch_only:
        saved["note"] = "ExecuTorch places with its own PropagateDevicePass: the .pte has its copies, not --strategy's"
    return saved


def _write_report(result: dict[str, Any], path: str, name: str) -> str:
    """Write `place_model`'s result to `path` with the pricer that priced it (the one copy_pricer for the backend
    its `pricing` names), so the file's provenance is the result's own."""
    report = {key: value for key, value in result.items() if key != "ok"}
    backend = (result.get("pricing") or {}).get("backend")
    pricer = copy_pricer(backend) if backend else None
    return export_report(report, path, name, pricer, backend)


def run_model(
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    placement: PlacementOptions,
    run: RunOptions,
    backend: str,
    name: str,
    user_code: UserCode = trusted,
) -> dict[str, Any]:
    """The model placed by `placement`, loaded and called `run.steps` times on `backend` as `run` says, each call
    compared with the eager module on the same inputs (a decode step fed its next token by the module's own
    `next_inputs`); a delegate on a device the backend lacks is NoSuchDevice, found before loading."""
    placed = lower_and_place(module, inputs, placement, backend, name, user_code)
    errors: list[float | None] = []
    oks: list[bool] = []
    eager_inputs: list[Sequence[Any]] = []

    def keep_inputs(step: int, step_inputs: Sequence[Any]) -> None:
        """Before each call: a copy of its inputs for the eager module, since a model that writes its input in place
        would otherwise run eager on what the method already wrote."""
        eager_inputs[:] = [pytree.tree_map_only(torch.Tensor, torch.clone, tuple(step_inputs))]

    def check_step(step: int, step_inputs: Sequence[Any], outputs: Any) -> Sequence[Any]:
        """After each call: the eager module (which keeps its own state) on the same inputs, compared; the next
        step's inputs."""
        next_inputs = step_inputs
        with torch.no_grad(), user_code("the eager run"):
            expected = pytree.tree_leaves(module(*eager_inputs[0]))
            if step + 1 < run.steps:
                next_inputs = _next_inputs(module, tuple(step_inputs), expected)
        ok, max_abs_err = compare_outputs(outputs, expected)
        oks.append(ok)
        errors.append(max_abs_err)
        return next_inputs

    call, fields = run_trial(
        placed,
        inputs,
        run,
        backend,
        lambda allocator: _check_devices_exist(placed, allocator),
        keep_inputs,
        check_step,
    )
    return {
        "ok": all(oks),
        "model": name,
        "mode": run.mode,
        "backend": call.backend,
        "strategy": placement.strategy,
        "resident_buffers": placement.resident_buffers,
        "max_abs_err": None if None in errors else max(e for e in errors if e is not None),
        "steps": run.steps,
        **({"step_errors": errors} if run.steps > 1 else {}),  # one call: max_abs_err says it
        **fields,
    }


def _check_devices_exist(placed: PlacedProgram, allocator: DeviceAllocator) -> None:
    """Every delegate's device exists on the allocator's backend (a target `cuda:1` on a one-GPU machine is
    NoSuchDevice, found before loading)."""
    count = allocator.device_count()
    if count is None:  # any index exists (the simulated accelerator)
        return
    missing = sorted(
        {
            str(d.target_device)
            for d in placed.delegates.values()
            if d.target_device is not None and d.target_device.index >= count
        }
    )
    if missing:
        raise NoSuchDevice(missing, allocator.backend, count)


def _next_inputs(module: Any, inputs: tuple[Any, ...], outputs: list[Any]) -> tuple[Any, ...]:
    """The next step's inputs: the model's own `next_inputs(inputs, outputs)` where it has one (a decode step: the
    most likely token and the next position), else the same inputs again (the state still evolves)."""
    step = getattr(module, "next_inputs", None)
    return tuple(step(inputs, outputs)) if callable(step) else inputs
