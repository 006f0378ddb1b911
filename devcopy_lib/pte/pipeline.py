"""ExecuTorch 1.5.1's lowering pipeline, one way in for devcopy: `lower_in_executorch` exports and decomposes a
model, marks each node with the devcopy op it is (`tag_origins`), runs ExecuTorch's own
`to_edge_transform_and_lower` with one partitioner and then `to_executorch`, whose `PropagateDevicePass` inserts
the copies around each delegate with a `target_device` compile spec (docs/semantics.md §6). Every option devcopy
passes to ExecuTorch lives in `ExecuTorchOptions`; the reference (`executorch_reference.py`: a pass-through backend,
counts) and devcopy's ExecuTorch backend (`backend.py`: an executable blob, a `.pte`) differ only in the backend
their partitioner names.

Ops are matched in devcopy's spelling (ATen overloads after `run_decompositions()`), translated to the edge
dialect's (`view.default` -> `view_copy.default`, `clone.default` -> `dim_order_ops::_clone_dim_order.default`,
...), so ExecuTorch and devcopy partition the same nodes (`partition_groups`). ExecuTorch is imported only when
called (the `reference` extra); whatever it raises while lowering comes back as an `ExecuTorchRefusal`.
"""

from __future__ import annotations

import importlib.util
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.export import ExportedProgram

from ..lowering.lower import TargetDevice, resolve_device
from ..lowering.ops import overload_name
from ..names import ErrorKind, Partition
from ..ops.aot import EXECUTORCH_PACKAGE
from .executorch_import import import_executorch

# The device of partition `index` with devcopy op names `names`: a device string, or None for no device
PartitionDevice = Callable[[int, tuple[str, ...]], str | None]

ORIGIN = "devcopy_op"  # node.meta["custom"] key: the devcopy op a node came from (torch keeps "custom" when tracing)
# Ops to_edge respells other than as a view's `_copy` variant.
_EDGE_RESPELLED = {
    "_unsafe_view.default": "view_copy.default",
    "clone.default": "dim_order_ops::_clone_dim_order.default",
    "_to_copy.default": "dim_order_ops::_to_dim_order_copy.default",
    "empty.memory_format": "dim_order_ops::_empty_dim_order.default",
}
_FROM_EDGE = {edge: ours for ours, edge in _EDGE_RESPELLED.items() if ours != "_unsafe_view.default"}


class ExecuTorchRefusal(RuntimeError):
    """ExecuTorch 1.5.1 itself refused to lower the program (not a devcopy error); the message is ExecuTorch's."""

    kind = ErrorKind.EXECUTORCH_REFUSED

    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"ExecuTorch 1.5.1 refused the program in {stage}: {type(error).__name__}: {error}")
        self.stage = stage
        self.error = error


def available() -> bool:
    """Whether ExecuTorch (the `reference` extra) is installed."""
    return importlib.util.find_spec(EXECUTORCH_PACKAGE) is not None


def edge_spelling(op: str) -> str:
    """How `to_edge` spells devcopy's op `op` (an ATen overload after run_decompositions): views become their
    `_copy` variant, clone and `_to_copy` their dim-order ops; every other op keeps its name."""
    if op in _EDGE_RESPELLED:
        return _EDGE_RESPELLED[op]
    name, _, overload = op.partition(".")
    packet = getattr(torch.ops.aten, name, None)
    # OpOverloadPacket.overloads is unannotated in torch
    if isinstance(packet, torch._ops.OpOverloadPacket) and overload in packet.overloads():  # type: ignore[no-untyped-call]
        arguments = getattr(packet, overload)._schema.arguments
        alias = arguments[0].alias_info if arguments else None
        if alias is not None and not alias.is_write and hasattr(torch.ops.aten, f"{name}_copy"):
            return f"{name}_copy.{overload}"
    return op


def devcopy_spelling(node: torch.fx.Node) -> str | None:
    """The devcopy op name of an edge-dialect node: the op it came from when to_edge only respelled it, else the
    edge name translated back (a cast that scalar lifting inserted is `_to_copy.default`)."""
    if node.op != "call_function":
        return None
    edge = overload_name(getattr(node.target, "_op", node.target))
    origin = node.meta.get("custom", {}).get(ORIGIN)
    if isinstance(origin, str) and edge_spelling(origin) == edge:
        return origin
    if edge in _FROM_EDGE:
        return _FROM_EDGE[edge]
    name, _, overload = (edge or "").partition(".")
    if name.endswith("_copy") and edge_spelling(base := f"{name[: -len('_copy')]}.{overload}") == edge:
        return base
    return edge


def tag_origins(exported: ExportedProgram) -> None:
    """Mark every node with the devcopy op it is, so the edge graph can be matched in devcopy's spelling."""
    for node in exported.graph.nodes:
        name = overload_name(node.target) if node.op == "call_function" else None
        if name is not None:
            node.meta.setdefault("custom", {})[ORIGIN] = name


def partition_groups(gm: torch.fx.GraphModule, wanted: frozenset[str], partition: str) -> list[list[torch.fx.Node]]:
    """The supported nodes grouped as ExecuTorch's pattern-op partitioner (or one node each, with its getitems)
    groups them, in graph order of each group's first node."""
    import_executorch()
    from executorch.exir.backend.canonical_partitioners.pattern_op_partitioner import generate_pattern_op_partitions
    from torch.fx.passes.operator_support import OperatorSupportBase

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: torch.fx.Node) -> bool:
            return devcopy_spelling(node) in wanted

    # a multi-output op keeps its getitems, as lowering and the capability groups do
    if partition == Partition.PER_NODE:
        return [
            [n, *(u for u in n.users if u.target is operator.getitem)]
            for n in gm.graph.nodes
            if Support().is_node_supported({}, n)
        ]
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    groups = [sorted(p.nodes, key=order.__getitem__) for p in generate_pattern_op_partitions(gm, op_support=Support())]
    return sorted(groups, key=lambda g: order[g[0]])


def device_rule(target_device: TargetDevice) -> str | PartitionDevice | None:
    """devcopy's `target_device` forms as a partitioner's rule: one device string, None, or - for a mapping from
    delegate name (`delegate_0`, in devcopy's numbering: graph order of each partition's first node) or op name to a
    device - a callable (group index, its devcopy op names) -> device string or None, resolved as lowering does."""
    if not isinstance(target_device, Mapping):
        return None if target_device is None else str(target_device)

    def rule(index: int, names: tuple[str, ...]) -> str | None:
        device = resolve_device(target_device, f"delegate_{index}", names)
        return None if device is None else str(device)

    return rule


def partitioner_for(
    backend: str, ops: Sequence[str], target_device: str | PartitionDevice | None, partition: str, tag: str
) -> Any:
    """An ExecuTorch `Partitioner` delegating `ops` (devcopy's spelling; capability groups or one node each) to the
    backend class named `backend`, each group tagged `<tag><index>` with the `target_device` compile spec of its
    device (`target_device`: one device string for every group, None for none, or a `PartitionDevice` rule).
    Constants a delegate reads are tagged to it (`tag_constant_data`)."""
    import_executorch()
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
    from executorch.exir.backend.utils import tag_constant_data
    from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY

    wanted = frozenset(ops)
    device_of: PartitionDevice = target_device if callable(target_device) else (lambda index, names: target_device)

    def spec(device: str | None) -> Any:
        specs = [] if device is None else [CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, str(device).encode("utf-8"))]
        return DelegationSpec(backend, specs)

    class DevcopyPartitioner(Partitioner):  # type: ignore[misc]  # executorch has no type information
        """Capability groups (or single nodes) of devcopy's delegate ops, each delegated on its device."""

        def __init__(self) -> None:
            super().__init__()
            self.delegate_ops = wanted
            self.target_device = target_device
            self.delegation_spec = spec(None if callable(target_device) else target_device)

        def partition(self, exported_program: ExportedProgram) -> Any:
            tags = {}
            for index, nodes in enumerate(partition_groups(exported_program.graph_module, wanted, partition)):
                for node in nodes:
                    node.meta["delegation_tag"] = f"{tag}{index}"
                names = tuple(name for n in nodes if (name := devcopy_spelling(n)) is not None)  # getitems have none
                tags[f"{tag}{index}"] = spec(device_of(index, names))
            tag_constant_data(exported_program)
            return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    return DevcopyPartitioner()


@dataclass(frozen=True)
class ExecuTorchOptions:
    """Every option devcopy passes to ExecuTorch's pipeline. The two skip options go to its device pass
    (`PropagateDeviceConfig`) and, as unplanned graph inputs / outputs, to its memory planning;
    `non_cpu_memory_planning` is `enable_non_cpu_memory_planning`; `dynamic_shapes` as torch.export takes them."""

    skip_h2d_for_method_inputs: bool = False
    skip_d2h_for_method_outputs: bool = False
    non_cpu_memory_planning: bool = True
    dynamic_shapes: Any = None

    def backend_config(self) -> Any:
        """ExecuTorch's `to_executorch` config for a device-placed program."""
        import_executorch()
        from executorch.exir import ExecutorchBackendConfig
        from executorch.exir.passes import MemoryPlanningPass
        from executorch.exir.passes.propagate_device_pass import PropagateDeviceConfig

        skip_h2d, skip_d2h = self.skip_h2d_for_method_inputs, self.skip_d2h_for_method_outputs
        return ExecutorchBackendConfig(
            emit_stacktrace=False,
            enable_non_cpu_memory_planning=self.non_cpu_memory_planning,
            propagate_device_config=PropagateDeviceConfig(
                skip_h2d_for_method_inputs=skip_h2d, skip_d2h_for_method_outputs=skip_d2h
            ),
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=not skip_h2d, alloc_graph_output=not skip_d2h),
        )


def lower_in_executorch(
    model: torch.nn.Module, example_inputs: Sequence[Any], partitioner: Any, options: ExecuTorchOptions
) -> Any:  # executorch's ExecutorchProgramManager
    """ExecuTorch's `ExecutorchProgramManager` for `model`: exported, decomposed, tagged with devcopy's op names,
    then `to_edge_transform_and_lower(partitioner=[partitioner])` and `to_executorch(options.backend_config())`.
    Raises ExecuTorchRefusal, naming the stage, when ExecuTorch refuses."""
    import_executorch()
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    exported = torch.export.export(
        model, tuple(example_inputs), dynamic_shapes=options.dynamic_shapes
    ).run_decompositions()
    tag_origins(exported)
    stage = "to_edge_transform_and_lower"
    try:
        lowered = to_edge_transform_and_lower(
            exported, partitioner=[partitioner], compile_config=EdgeCompileConfig(_check_ir_validity=False)
        )
        stage = "to_executorch"
        return lowered.to_executorch(options.backend_config())
    except Exception as exc:  # ExecuTorch's own refusal, told apart from a devcopy error by its type
        raise ExecuTorchRefusal(stage, exc) from exc


__all__ = [
    "ORIGIN",
    "ExecuTorchOptions",
    "ExecuTorchRefusal",
    "PartitionDevice",
    "available",
    "device_rule",
    "devcopy_spelling",
    "edge_spelling",
    "lower_in_executorch",
    "partition_groups",
    "partitioner_for",
    "tag_origins",
]
