"""Where a program's constants come from in the model: each parameter, buffer and tensor constant as a
`ConstantSource` (its name in the model, its tensor and the mapping that holds it), so that a loaded method can
take its snapshot at load and tell when the model changed under it (runtime/constants.py, docs/reliability.md).

`export_program` notes (weakly) which module each exported program came from; without it (a program exported by
the caller) a source still has its name and tensor, and only a tensor replaced in the module goes unseen.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ..runtime.program import ConstantSource

_MODELS: weakref.WeakKeyDictionary[ExportedProgram, weakref.ReferenceType[torch.nn.Module]] = (
    weakref.WeakKeyDictionary()
)
_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def note_model(exported: ExportedProgram, model: torch.nn.Module) -> None:
    """Remember that `exported` was exported from `model` (a weak reference: the program keeps no model alive)."""
    _MODELS[exported] = weakref.ref(model)


def _holder(model: torch.nn.Module | None, name: str, tensor: torch.Tensor) -> Mapping[str, Any] | None:
    """The mapping of `model` that holds `tensor` under `name` (a submodule's parameters, buffers or attributes)."""
    if model is None:
        return None
    prefix, _, key = name.rpartition(".")
    try:
        module = model.get_submodule(prefix)
    except AttributeError:  # the model's structure changed since export
        return None
    return next((h for h in (module._parameters, module._buffers, vars(module)) if h.get(key) is tensor), None)


def constant_sources(placed: Any) -> dict[str, ConstantSource]:
    """Placeholder name -> source, for the parameters, buffers and tensor constants of `placed`'s exported program
    (empty for a bare graph module)."""
    exported = getattr(placed, "exported_program", None)
    if not isinstance(exported, ExportedProgram):
        return {}
    ref = _MODELS.get(exported)
    model = ref() if ref is not None else None
    sources = {}
    for spec in exported.graph_signature.input_specs:
        if spec.kind not in _CONSTANT_KINDS or spec.target is None:
            continue
        tensor = exported.state_dict.get(spec.target, exported.constants.get(spec.target))
        if isinstance(tensor, torch.Tensor):
            holder = _holder(model, spec.target, tensor)
            sources[spec.arg.name] = ConstantSource(spec.target, tensor, holder, spec.target.rpartition(".")[2])
    return sources
