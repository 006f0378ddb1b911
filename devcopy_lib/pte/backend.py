"""devcopy as a real ExecuTorch backend: a partitioner and a backend for ExecuTorch 1.5.1's own
`to_edge_transform_and_lower(...).to_executorch()` (`pipeline.lower_in_executorch`, the pipeline the reference runs
too), and `executorch_pte`, which returns the `.pte` it writes.

The partitioner delegates `delegate_ops` (devcopy's spelling, as `export_and_lower` takes them) in torch.fx's
capability groups and gives each delegate the `target_device` compile spec, the one thing ExecuTorch's
`PropagateDevicePass` reads to insert `et_copy::_h2d_copy.out` / `_d2h_copy.out` around it (docs/semantics.md §6).
Unlike the reference's pass-through backend (`executorch_reference.py`), this backend's blob is executable: the
delegated subgraph as `torch.export.save` writes it (`torch.export.load` reads it back), so a program reader can run
a delegate without devcopy's lowering. ExecuTorch is imported only when called (the `reference` extra).
"""

from __future__ import annotations

import functools
import io
from collections.abc import Sequence
from typing import Any

import torch

from ..lowering.lower import DEFAULT_DELEGATE_OPS
from ..names import Partition
from .executorch_import import import_executorch
from .pipeline import ExecuTorchOptions, lower_in_executorch, partitioner_for

BACKEND_ID = "DevcopyExportBackend"  # the BackendDelegate.id ExecuTorch writes into the .pte: the backend's class name
BLOB_MAGIC = b"DEVCOPY-EXPORT-1\n"  # first bytes of this backend's blob, then torch.export.save's archive


def _to_aten(program: Any) -> Any:
    """The delegated subgraph with each edge-dialect op replaced by the ATen overload it wraps, so that
    `torch.export.save` (which knows ATen ops, not ExecuTorch's EdgeOpOverload) can serialize it; its verifier
    becomes torch's own, so `torch.export.load` checks it as the ATen program it now is (with ExecuTorch's edge
    verifier registered, a program saved as edge dialect fails to load)."""
    import_executorch()
    from executorch.exir.dialects.edge._ops import EdgeOpOverload
    from torch._export.verifier import Verifier

    for node in program.graph_module.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, EdgeOpOverload):
            node.target = node.target._op
    program.graph_module.recompile()
    program._verifiers = [Verifier]
    return program


def serialize_delegate(edge_program: Any) -> bytes:
    """A partition's ExportedProgram as this backend's blob: BLOB_MAGIC + `torch.export.save`'s bytes."""
    import copy

    buffer = io.BytesIO()
    torch.export.save(_to_aten(copy.deepcopy(edge_program)), buffer)
    return BLOB_MAGIC + buffer.getvalue()


def load_delegate(blob: bytes) -> torch.export.ExportedProgram:
    """This backend's blob back as an ExportedProgram (ValueError when the blob is not one of this backend's)."""
    if not blob.startswith(BLOB_MAGIC):
        raise ValueError(f"not a {BACKEND_ID} blob: it starts with {bytes(blob[: len(BLOB_MAGIC)])!r}")
    return torch.export.load(io.BytesIO(bytes(blob[len(BLOB_MAGIC) :])))


@functools.lru_cache(maxsize=1)
def backend() -> type:
    """devcopy's ExecuTorch backend class (ExecuTorch finds a backend by its class name, BACKEND_ID)."""
    import_executorch()
    from executorch.exir.backend.backend_details import BackendDetails, PreprocessResult

    class DevcopyExportBackend(BackendDetails):  # type: ignore[misc]
        """Compiles a partition to `torch.export`'s own serialization of it (see `serialize_delegate`)."""

        @staticmethod
        def preprocess(edge_program: Any, compile_specs: Any) -> Any:
            return PreprocessResult(processed_bytes=serialize_delegate(edge_program))

    assert DevcopyExportBackend.__name__ == BACKEND_ID
    return DevcopyExportBackend


def partitioner(
    delegate_ops: Sequence[str] | None = None,
    target_device: str | None = "cuda:0",
    partition: str = Partition.CAPABILITY,
) -> Any:
    """An ExecuTorch `Partitioner` delegating `delegate_ops` (devcopy's spelling; None: DEFAULT_DELEGATE_OPS) to
    devcopy's backend, each partition with the compile spec `target_device` (None: none, so the delegate stays on the
    CPU and ExecuTorch inserts no copies). Constants a delegate reads are tagged to it (`tag_constant_data`).
    The graph must carry devcopy's op names (`executorch_pte` tags them); untagged nodes match by their edge name."""
    ops = DEFAULT_DELEGATE_OPS if delegate_ops is None else delegate_ops
    return partitioner_for(backend().__name__, ops, target_device, partition, tag="devcopy")


def executorch_manager(
    model: torch.nn.Module,
    example_inputs: Sequence[Any],
    delegate_ops: Sequence[str] | None = None,
    target_device: str | None = "cuda:0",
    partition: str = Partition.CAPABILITY,
    skip_h2d_for_method_inputs: bool = False,
    skip_d2h_for_method_outputs: bool = False,
) -> Any:
    """ExecuTorch's `ExecutorchProgramManager` for `model`: exported, decomposed, then ExecuTorch's own
    `to_edge_transform_and_lower(partitioner=[devcopy's])` and `to_executorch()` (its device pass, with the two skip
    options of its PropagateDeviceConfig, and its non-CPU memory planning inside). Raises ExecuTorchRefusal, naming
    the stage, when ExecuTorch refuses."""
    options = ExecuTorchOptions(skip_h2d_for_method_inputs, skip_d2h_for_method_outputs)
    return lower_in_executorch(model, example_inputs, partitioner(delegate_ops, target_device, partition), options)


def executorch_pte(
    model: torch.nn.Module,
    example_inputs: Sequence[Any],
    delegate_ops: Sequence[str] | None = None,
    target_device: str | None = "cuda:0",
    partition: str = Partition.CAPABILITY,
    skip_h2d_for_method_inputs: bool = False,
    skip_d2h_for_method_outputs: bool = False,
) -> bytes:
    """The `.pte` bytes ExecuTorch writes for `model` lowered with devcopy's partitioner and backend (the options
    as `executorch_manager` takes them)."""
    manager = executorch_manager(
        model,
        example_inputs,
        delegate_ops,
        target_device,
        partition,
        skip_h2d_for_method_inputs,
        skip_d2h_for_method_outputs,
    )
    return bytes(manager.buffer)


__all__ = [
    "BACKEND_ID",
    "BLOB_MAGIC",
    "backend",
    "executorch_manager",
    "executorch_pte",
    "load_delegate",
    "partitioner",
    "serialize_delegate",
]
