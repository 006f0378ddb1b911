"""ExecuTorch 1.5.1 as the reference: lower the same model with the same delegated ops through ExecuTorch's own
pipeline (`to_edge`, pattern-op partitions + `tag_constant_data`, a pass-through backend with a `target_device`
compile spec, `PropagateDevicePass` inside `to_executorch`) and count what it produced.

The backend is devcopy's own and accepts every op: ExecuTorch's device pass reads only the `target_device` compile
spec, so what the backend could compile does not change a copy. Ops are matched in devcopy's spelling (ATen overloads
after `run_decompositions()`), translated to the edge dialect's (`view.default` -> `view_copy.default`, `clone.default`
-> `dim_order_ops::_clone_dim_order.default`, ...), so both partition the same nodes. ExecuTorch is imported only
when called; whatever it raises while lowering comes back as an `ExecuTorchRefusal`.
"""

from __future__ import annotations

import functools
import importlib.util
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch.export import ExportedProgram

from ..names import Direction, ErrorKind, Partition
from ..ops.aot import EXECUTORCH_PACKAGE
from .ops import overload_name

if TYPE_CHECKING:
    from .lower import TargetDevice

# The device of partition `index` with devcopy op names `names`: a device string, or None for no device
PartitionDevice = Callable[[int, tuple[str, ...]], str | None]

_ORIGIN = "devcopy_op"  # node.meta["custom"] key: the devcopy op a node came from (torch keeps "custom" when tracing)
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
    origin = node.meta.get("custom", {}).get(_ORIGIN)
    if isinstance(origin, str) and edge_spelling(origin) == edge:
        return origin
    if edge in _FROM_EDGE:
        return _FROM_EDGE[edge]
    name, _, overload = (edge or "").partition(".")
    if name.endswith("_copy") and edge_spelling(base := f"{name[: -len('_copy')]}.{overload}") == edge:
        return base
    return edge


@functools.lru_cache(maxsize=1)
def _backend() -> type:
    """devcopy's pass-through ExecuTorch backend (found by ExecuTorch by its class name): accepts every op."""
    from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult

    class DevcopyPassThroughBackend(BackendDetails):  # type: ignore[misc]  # executorch has no type information
        """Compiles nothing: the partition's device placement is all the reference measures."""

        @staticmethod
        def preprocess(edge_program: ExportedProgram, compile_specs: list[Any]) -> PreprocessResult:
            return PreprocessResult(processed_bytes=b"devcopy-pass-through")

    return DevcopyPassThroughBackend


def _groups(gm: torch.fx.GraphModule, wanted: frozenset[str], partition: str) -> list[list[torch.fx.Node]]:
    """The supported nodes grouped as ExecuTorch's pattern-op partitioner (or one node each, with its getitems)
    groups them, in graph order of each group's first node."""
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


def partitioner(ops: Sequence[str], target_device: str | PartitionDevice | None, partition: str) -> Any:
    """An ExecuTorch Partitioner delegating `ops` (capability groups or one node each) to the pass-through backend.
    `target_device`: one device string for every partition, None for none, or a callable (group index, its devcopy
    op names) -> device string or None."""
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
    from executorch.exir.backend.utils import tag_constant_data
    from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY

    wanted, backend = frozenset(ops), _backend().__name__
    device_of: PartitionDevice = target_device if callable(target_device) else (lambda index, names: target_device)

    def spec(device: str | None) -> DelegationSpec:
        specs = [] if device is None else [CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, str(device).encode("utf-8"))]
        return DelegationSpec(backend, specs)

    class DevcopyReferencePartitioner(Partitioner):  # type: ignore[misc]  # executorch has no type information
        def partition(self, exported_program: ExportedProgram) -> PartitionResult:
            tags = {}
            for index, nodes in enumerate(_groups(exported_program.graph_module, wanted, partition)):
                for node in nodes:
                    node.meta["delegation_tag"] = f"tag{index}"
                names = tuple(name for n in nodes if (name := devcopy_spelling(n)) is not None)  # getitems have none
                tags[f"tag{index}"] = spec(device_of(index, names))
            tag_constant_data(exported_program)
            return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    return DevcopyReferencePartitioner()


def _device_rule(target_device: TargetDevice) -> str | PartitionDevice | None:
    """devcopy's `target_device` forms as the partitioner's rule: a mapping from delegate name (`delegate_0`, in
    devcopy's numbering: graph order of each partition's first node) or op name to a device string."""
    if not isinstance(target_device, Mapping):
        return None if target_device is None else str(target_device)
    from .lower import _resolve_device

    def rule(index: int, names: tuple[str, ...]) -> str | None:
        device = _resolve_device(target_device, f"delegate_{index}", names)
        return None if device is None else str(device)

    return rule


def _tag_origins(exported: ExportedProgram) -> None:
    """Mark every node with the devcopy op it is, so the edge graph can be matched in devcopy's spelling."""
    for node in exported.graph.nodes:
        name = overload_name(node.target) if node.op == "call_function" else None
        if name is not None:
            node.meta.setdefault("custom", {})[_ORIGIN] = name


def backend_config(skip_h2d: bool = False, skip_d2h: bool = False, non_cpu_memory_planning: bool = True) -> Any:
    """ExecuTorch's `to_executorch` config for a device-placed program: the two skip options go to its device pass
    and, as unplanned graph inputs / outputs, to its memory planning."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.propagate_device_pass import PropagateDeviceConfig

    return ExecutorchBackendConfig(
        emit_stacktrace=False,
        enable_non_cpu_memory_planning=non_cpu_memory_planning,
        propagate_device_config=PropagateDeviceConfig(
            skip_h2d_for_method_inputs=skip_h2d, skip_d2h_for_method_outputs=skip_d2h
        ),
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=not skip_h2d, alloc_graph_output=not skip_d2h),
    )


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
    from executorch.exir import EdgeCompileConfig, to_edge

    exported = torch.export.export(model, tuple(example_inputs), dynamic_shapes=dynamic_shapes).run_decompositions()
    _tag_origins(exported)
    stage = "to_edge"
    try:
        edge = to_edge(exported, compile_config=EdgeCompileConfig(_check_ir_validity=False))
        stage = "to_backend"
        lowered = edge.to_backend(partitioner(delegate_ops, _device_rule(target_device), partition))
        stage = "to_executorch"
        config = backend_config(skip_h2d_for_method_inputs, skip_d2h_for_method_outputs, non_cpu_memory_planning)
        return lowered.to_executorch(config)
    except Exception as exc:  # ExecuTorch's own refusal, told apart from a devcopy error by its type
        raise ExecuTorchRefusal(stage, exc) from exc


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
