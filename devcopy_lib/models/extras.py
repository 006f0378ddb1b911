"""Imports of the `models` extra (torchvision, transformers): a clear error when it is missing, no network, and
a loud fallback for a torchvision whose compiled ops cannot load (docs/real_models.md, "torchvision on a CPU torch").

The torchvision wheels published for torch 2.13 on PyPI are CUDA builds: their `_C.so` links libtorch_cuda.so, so
beside the CPU torch it does not load and `import torchvision` stops with `operator torchvision::nms does not exist`
(its fake-tensor registrations need the op schemas that `_C.so` would have defined). torchvision's models are pure
Python and need none of those ops, so when, and only when, the compiled ops failed to load, `import_torchvision`
defines the two schemas the import needs, without kernels, and warns once: calling `torchvision.ops.nms` (or any
detection op) still raises.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from types import ModuleType
from typing import Literal, overload

import torch

INSTALL_HINT = "pip install 'devcopy[models]'  (from a checkout: pip install -c constraints.txt -e '.[models]')"

# The schemas `torchvision/_meta_registrations.py` registers fake kernels for at import (as torchvision's C++ defines
# them); every other torchvision op is registered there only when the compiled ops loaded.
_IMPORT_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_unwarned_fallback: list[str] = []  # why torchvision's compiled ops failed, until a model that needs them is told
_schema_library: list[torch.library.Library] = []  # kept alive: dropping the Library would undefine the schemas


class ModelsExtraMissing(ModuleNotFoundError):
    """A real model was asked for without the `models` extra installed."""


def require(package: str, model: str) -> ModuleType:
    """Import `package` for `model`, or raise ModelsExtraMissing naming the install command."""
    if package == "torchvision":
        return import_torchvision(model)
    if package == "transformers":  # models are built from config: never reach the Hub
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import_torchvision(model, required=False)  # transformers imports torchvision when it is installed
    try:
        return importlib.import_module(package)
    except ModuleNotFoundError as exc:
        raise ModelsExtraMissing(
            f"Model {model!r} needs {package}, which is not installed ({exc}). Install the models extra: {INSTALL_HINT}"
        ) from exc


@overload
def import_torchvision(model: str, required: Literal[True] = ...) -> ModuleType: ...
@overload
def import_torchvision(model: str, required: bool) -> ModuleType | None: ...
def import_torchvision(model: str, required: bool = True) -> ModuleType | None:
    """`import torchvision`; if its compiled ops failed to load, define the schemas its import needs. The warning
    about the missing ops is given once, and only for a model that uses torchvision itself (`required`): a
    transformers model, whose import merely drags torchvision in, says nothing about it."""
    try:
        module = importlib.import_module("torchvision")
    except ModuleNotFoundError as exc:
        if not required:
            return None
        raise ModelsExtraMissing(
            f"Model {model!r} needs torchvision, which is not installed ({exc}). "
            f"Install the models extra: {INSTALL_HINT}"
        ) from exc
    except RuntimeError as exc:
        extension = sys.modules.get("torchvision.extension")
        if "torchvision::" not in str(exc) or extension is None or extension._has_ops():
            raise  # a failure this fallback does not explain: never hide it
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]  # the half-finished import, to be redone with the schemas defined
        _define_import_schemas()
        _unwarned_fallback.append(str(exc))
        module = importlib.import_module("torchvision")
    if required and _unwarned_fallback:
        _warn_fallback(_unwarned_fallback.pop())
    return module


def _warn_fallback(reason: str) -> None:
    """Say once that torchvision runs without its compiled ops, and what that breaks."""
    warnings.warn(
        f"torchvision's compiled ops did not load ({reason}): this torchvision wheel is built for another torch "
        f"(the PyPI wheels for torch {torch.__version__.split('+')[0]} are CUDA builds needing libtorch_cuda.so). "
        f"devcopy defined the schemas of {', '.join(f'torchvision::{n}' for n in _IMPORT_SCHEMAS)} without kernels "
        f"so that the pure-Python models import; detection ops such as torchvision.ops.nms raise. See "
        f"docs/real_models.md for a matching wheel.",
        RuntimeWarning,
        stacklevel=4,
    )


def _define_import_schemas() -> None:
    """Define torchvision's import-time op schemas (no kernels) that are not defined yet."""
    library = torch.library.Library("torchvision", "FRAGMENT")  # type: ignore[no-untyped-call]  # unannotated in torch
    for name, schema in _IMPORT_SCHEMAS.items():
        if not hasattr(torch.ops.torchvision, name):
            library.define(schema)  # type: ignore[no-untyped-call]  # unannotated in torch
    _schema_library.append(library)
