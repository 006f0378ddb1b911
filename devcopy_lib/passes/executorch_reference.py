"""ExecuTorch 1.5.1 as the reference: lower the same model with the same delegated ops through ExecuTorch's own
pipeline (pattern-op partitions + tag_constant_data, BackendWithCompilerDemo with a `target_device` compile spec,
PropagateDevicePass inside `to_executorch`) and count what it produced. ExecuTorch is imported only when called.
"""
from __future__ import annotations

import importlib.util
from typing import Any, Sequence

import torch

from .ops import overload_name


def available() -> bool:
    """Whether ExecuTorch (the `reference` extra) is installed."""
    return importlib.util.find_spec("executorch") is not None


def partitioner(ops: Sequence[str], target_device: str | None, partition: str):
    """An ExecuTorch Partitioner delegating `ops` (capability groups or one node each) to the demo backend."""
    from executorch.exir.backend.canonical_partitioners.pattern_op_partitioner import generate_pattern_op_partitions
    from executorch.exir.backend.compile_spec_schema import CompileSpec
    from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult
    from executorch.exir.backend.test.backend_with_compiler_demo import BackendWithCompilerDemo
    from executorch.exir.backend.utils import tag_constant_data
    from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY
    from torch.fx.passes.operator_support import OperatorSupportBase

    wanted = frozenset(ops)

    class Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            return node.op == "call_function" and overload_name(getattr(node.target, "_op", node.target)) in wanted

    specs = [CompileSpec("max_value", bytes([4]))]
    if target_device is not None:
        specs.append(CompileSpec(TARGET_DEVICE_COMPILE_SPEC_KEY, target_device.encode("utf-8")))
    delegation = DelegationSpec(BackendWithCompilerDemo.__name__, specs)

    class DevcopyReferencePartitioner(Partitioner):
        def partition(self, exported_program) -> PartitionResult:
            gm = exported_program.graph_module
            if partition == "per_node":
                groups = [[n] for n in gm.graph.nodes if Support().is_node_supported(None, n)]
            else:
                groups = [list(p.nodes) for p in generate_pattern_op_partitions(gm, op_support=Support())]
            tags = {}
            for index, nodes in enumerate(groups):
                for node in nodes:
                    node.meta["delegation_tag"] = f"tag{index}"
                tags[f"tag{index}"] = delegation
            tag_constant_data(exported_program)
            return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)

    return DevcopyReferencePartitioner()


def executorch_counts(model: torch.nn.Module, example_inputs: Sequence[Any], delegate_ops: Sequence[str],
                      target_device: str | None = "cuda:0", partition: str = "capability",
                      skip_h2d_for_method_inputs: bool = False, skip_d2h_for_method_outputs: bool = False,
                      non_cpu_memory_planning: bool = True) -> dict[str, Any]:
    """ExecuTorch's own `{delegates, h2d, d2h, order}` after `to_executorch` (order: the kinds of the graph's
    input, delegate, getitem, copy and output nodes). Raises whatever ExecuTorch raises."""
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
    from executorch.exir.delegate import executorch_call_delegate
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.propagate_device_pass import PropagateDeviceConfig

    exported = torch.export.export(model, tuple(example_inputs))
    edge = to_edge(exported, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    lowered = edge.to_backend(partitioner(delegate_ops, target_device, partition))
    config = ExecutorchBackendConfig(
        emit_stacktrace=False,
        enable_non_cpu_memory_planning=non_cpu_memory_planning,
        propagate_device_config=PropagateDeviceConfig(
            skip_h2d_for_method_inputs=skip_h2d_for_method_inputs,
            skip_d2h_for_method_outputs=skip_d2h_for_method_outputs,
        ),
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=not skip_h2d_for_method_inputs,
                                                alloc_graph_output=not skip_d2h_for_method_outputs),
    )
    gm = lowered.to_executorch(config).exported_program().graph_module
    kinds = {torch.ops.et_copy._h2d_copy.out: "h2d", torch.ops.et_copy._d2h_copy.out: "d2h",
             executorch_call_delegate: "delegate"}
    order = []
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            order.append("input" if node.op == "placeholder" else "output")
        elif node.op == "call_function" and node.target in kinds:
            order.append(kinds[node.target])
    return {"delegates": order.count("delegate"), "h2d": order.count("h2d"), "d2h": order.count("d2h"),
            "order": order}
