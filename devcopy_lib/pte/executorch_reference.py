"""ExecuTorch 1.5.1 as the reference: lower the same model with the same delegated ops through ExecuTorch's own
pipeline (`pipeline.lower_in_executorch`: pattern-op partitions + `tag_constant_data`, a pass-through backend with a
`target_device` compile spec, `PropagateDevicePass` inside `to_executorch`) and count what it produced.

The backend is devcopy's own and accepts every op: ExecuTorch's device pass reads only the `target_device` compile
spec, so what the backend could compile does not change a copy. Ops are matched in devcopy's spelling
(`pipeline.devcopy_spelling`), so both partition the same nodes. ExecuTorch is imported only when called; whatever it
raises while lowering comes back as an `ExecuTorchRefusal`.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch.export import ExportedProgram

from ..lowering.lower import TargetDevice
from ..names import Direction, Partition
from .executorch_import import import_executorch
from .pipeline import (
    ExecuTorchOptions,
    ExecuTorchRefusal,
    PartitionDevice,
    available,
    devcopy_spelling,
    device_rule,
    edge_spelling,
    lower_in_executorch,
    partitioner_for,
)


@functools.lru_cache(maxsize=1)
def _backend() -> type:
    """devcopy's pass-through ExecuTorch backend (found by ExecuTorch by its class name): accepts every op."""
    import_executorch()
    from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult

    class DevcopyPassThroughBackend(BackendDetails):  # type: ignore[misc]  # executorch has no type information
        """Compiles nothing: the partition's device placement is all the reference measures."""

        @staticmethod
        def preprocess(edge_program: ExportedProgram, compile_specs: list[Any]) -> PreprocessResult:
            return PreprocessResult(processed_bytes=b"devcopy-pass-through")

    return DevcopyPassThroughBackend


def partitioner(ops: Sequence[str], target_device: str | PartitionDevice | None, partition: str) -> Any:
    """An ExecuTorch Partitioner delegating `ops` (capability groups or one node each) to the pass-through backend.
    `target_device`: one device string for every partition, None for none, or a callable (group index, its devcopy
    op names) -> device string or None."""
    return partitioner_for(_backend().__name__, ops, target_device, partition, tag="tag")


def executorch_program(
    model: torch.nn.Module,
    example_inputs: Sequence[Any],
    delegate_ops: Sequence[str],
    target_device: TargetDevice = "cuda:0",
    partition: str = Partition.CAPABILITY,
    skip_h2d_for_method_inputs: bool = False,
    skip_d2h_for_method_outputs: bool = False,
    non_cpu_memory_planning: bool = True,
    dynamic_shapes: Any = None,
) -> Any:  # executorch's ExecutorchProgramManager
    """ExecuTorch's ExecutorchProgramManager for the model lowered with `delegate_ops` on `target_device` (a device
    string, None, or devcopy's mapping by delegate or op name); `dynamic_shapes` as torch.export takes them. Raises
    ExecuTorchRefusal when ExecuTorch refuses."""
    options = ExecuTorchOptions(
        skip_h2d_for_method_inputs, skip_d2h_for_method_outputs, non_cpu_memory_planning, dynamic_shapes
    )
    return lower_in_executorch(
        model, example_inputs, partitioner(delegate_ops, device_rule(target_device), partition), options
    )


def executorch_counts(
    model: torch.nn.Module,
    example_inputs: Sequence[Any],
    delegate_ops: Sequence[str],
    target_device: TargetDevice = "cuda:0",
    partition: str = Partition.CAPABILITY,
    skip_h2d_for_method_inputs: bool = False,
    skip_d2h_for_method_outputs: bool = False,
    non_cpu_memory_planning: bool = True,
    dynamic_shapes: Any = None,
) -> dict[str, Any]:
    """ExecuTorch's own `{delegates, h2d, d2h, order, delegate_devices, delegate_ops}` after `to_executorch`.

    `order`: the kinds of the graph's input, delegate, copy and output nodes in graph order; `delegate_devices`:
    each delegate's `target_device` (None: none) and `delegate_ops` its ops in devcopy's spelling, both in graph
    order. Raises ExecuTorchRefusal when ExecuTorch refuses the program."""
    import_executorch()
    from executorch.exir.delegate import executorch_call_delegate
    from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY

    gm = (
        executorch_program(
            model,
            example_inputs,
            delegate_ops,
            target_device,
            partition,
            skip_h2d_for_method_inputs,
            skip_d2h_for_method_outputs,
            non_cpu_memory_planning,
            dynamic_shapes,
        )
        .exported_program()
        .graph_module
    )
    kinds = {
        torch.ops.et_copy._h2d_copy.out: Direction.H2D,
        torch.ops.et_copy._d2h_copy.out: Direction.D2H,
        executorch_call_delegate: "delegate",
    }
    order, devices, ops = [], [], []
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            order.append("input" if node.op == "placeholder" else "output")
        elif node.op == "call_function" and node.target in kinds:
            order.append(kinds[node.target])
            if node.target is executorch_call_delegate:
                lowered = getattr(gm, node.args[0].target)
                specs = {s.key: s.value for s in lowered.compile_specs}
                device = specs.get(TARGET_DEVICE_COMPILE_SPEC_KEY)
                devices.append(None if device is None else bytes(device).decode("utf-8"))
                inner = lowered.original_module.graph_module.graph.nodes
                ops.append(
                    [
                        name
                        for n in inner
                        if n.target is not operator.getitem and (name := devcopy_spelling(n)) is not None
                    ]
                )
    return {
        "delegates": order.count("delegate"),
        Direction.H2D: order.count(Direction.H2D),
        Direction.D2H: order.count(Direction.D2H),
        "order": order,
        "delegate_devices": devices,
        "delegate_ops": ops,
    }


__all__ = [
    "ExecuTorchRefusal",
    "available",
    "devcopy_spelling",
    "edge_spelling",
    "executorch_counts",
    "executorch_program",
    "partitioner",
]
