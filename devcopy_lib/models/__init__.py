"""Models to place and run, each a no-argument factory returning `(module, example_inputs)`.

`MODELS`: the small samples (samples.py) that notebooks, docs and tests loop over. `REAL_MODELS`: torchvision and
transformers models built from code/config with random weights (real.py, and the more architecture families of
families.py), which need the `models` extra (all but `lstm_tagger`);
`DELEGATE_SETS`: the op sets a user would delegate (matrix ops, + views, a CNN set, the defaults).
`QUANTIZED_MODELS`: PT2E-quantized ones (quantized.py, `pt2e_quantize`) and an ExecuTorch-quantized embedding, which
need the `reference` extra.
`load_model` resolves a name of either, or `path/to/file.py:factory`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import types

import torch
from torch import nn

from ..lowering.user_model import example_tuple
from .decode import DECODE_MODELS, LlamaDecodeStep, llama_decode_step, llama_decode_step_functional
from .extras import INSTALL_HINT, ModelsExtraMissing
from .families import (
    FAMILY_MODELS,
    convnext_micro,
    distilbert_tiny,
    gpt_neox_tiny,
    lstm_tagger,
    mistral_tiny,
    mixtral_tiny,
    phi_tiny,
    qwen2_tiny,
    t5_encoder_tiny,
    vit_tiny,
    whisper_encoder_tiny,
)
from .quantized import (
    QUANTIZED_MODELS,
    conv_quantized,
    embedding_quantized,
    linear_quantized,
    llama_tiny_embedding_quantized,
    llama_tiny_quantized,
    pt2e_quantize,
)
from .real import CORE_MODELS, DELEGATE_SETS, bert_small, gpt2_2l, gpt2_12l, llama_tiny, mobilenet_v3_small, resnet18
from .samples import (
    MODELS,
    Sample,
    add,
    back_to_back,
    cpu_between,
    mlp,
    output_and_cpu_user,
    residual,
    shared_input,
    transformer_block,
)

__all__ = [
    "MODELS",
    "REAL_MODELS",
    "FAMILY_MODELS",
    "DELEGATE_SETS",
    "QUANTIZED_MODELS",
    "pt2e_quantize",
    "load_model",
    "ModelsExtraMissing",
    "INSTALL_HINT",
    # the factories of MODELS and REAL_MODELS (tests/test_models.py checks that every one is listed)
    "add",
    "mlp",
    "residual",
    "shared_input",
    "back_to_back",
    "cpu_between",
    "output_and_cpu_user",
    "transformer_block",
    "resnet18",
    "mobilenet_v3_small",
    "gpt2_2l",
    "gpt2_12l",
    "bert_small",
    "llama_tiny",
    "llama_decode_step",
    "llama_decode_step_functional",
    "LlamaDecodeStep",
    "mistral_tiny",
    "qwen2_tiny",
    "phi_tiny",
    "gpt_neox_tiny",
    "mixtral_tiny",
    "t5_encoder_tiny",
    "distilbert_tiny",
    "vit_tiny",
    "whisper_encoder_tiny",
    "lstm_tagger",
    "convnext_micro",
    "linear_quantized",
    "conv_quantized",
    "llama_tiny_quantized",
    "embedding_quantized",
    "llama_tiny_embedding_quantized",
]

REAL_MODELS = {**CORE_MODELS, **DECODE_MODELS, **FAMILY_MODELS}


def _import_file(path: str) -> types.ModuleType:
    """Import the user's file as a module registered in `sys.modules`, as a normal import would be: dataclasses,
    pickling and torch.export's tracing of `torch.cond` look the module up there."""
    name = f"devcopy_user_model_{hashlib.sha1(os.fsencode(os.path.abspath(path))).hexdigest()[:16]}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None  # a .py path always has a source loader
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def load_model(spec: str) -> Sample:
    """A sample or real model name (`mlp`, `resnet18`) or `path/to/file.py:factory`; returns the factory's
    `(module, example_inputs)`. A real model without the `models` extra raises ModelsExtraMissing (an ImportError)."""
    factory = MODELS.get(spec) or REAL_MODELS.get(spec)
    if factory is not None:
        return factory()
    path, sep, name = spec.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise ValueError(
            f"Unknown model {spec!r}. Give a sample name ({', '.join(MODELS)}), a real model "
            f"({', '.join(REAL_MODELS)}; needs the models extra) or "
            f"'path/to/file.py:factory' where factory() returns (module, example_inputs)."
        )
    if not os.path.isfile(path):
        raise ValueError(f"Model file {path!r} not found (from {spec!r}). Check the path, relative to {os.getcwd()!r}.")
    try:
        os.path.abspath(path).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(
            f"Model file {path!r} has a path that is not UTF-8 (escaped here); torch.export cannot trace code from "
            "such a file. Rename the file (or its folder) to a UTF-8 name."
        ) from None
    module = _import_file(path)
    factory = getattr(module, name, None)
    if not callable(factory):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ValueError(f"{path!r} has no callable {name!r}. Callables there: {', '.join(found) or 'none'}.")
    result = factory()
    if not (
        isinstance(result, tuple)
        and len(result) == 2
        and isinstance(result[0], nn.Module)
        and isinstance(result[1], (tuple, list, torch.Tensor))
    ):
        raise ValueError(
            f"{spec!r} returned {type(result).__name__}; a factory returns (module, example_inputs), "
            f"e.g. `return MyModel(), (torch.randn(2, 8),)` (one bare tensor is one input)."
        )
    module_, inputs = result
    return module_, example_tuple(inputs)
