"""Sample and real models: deterministic factories, each delegating at least one default op; load_model's errors;
the models extra's import errors and torchvision fallback."""

import os
import pathlib
import subprocess
import sys

import pytest
import torch

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, models

NAMES = [
    "add",
    "mlp",
    "residual",
    "shared_input",
    "back_to_back",
    "cpu_between",
    "output_and_cpu_user",
    "transformer_block",
]


def test_the_design_names_every_sample():
    assert list(models.MODELS) == NAMES


def test_every_factory_is_exported_by_name():
    assert set(models.MODELS) | set(models.REAL_MODELS) <= set(models.__all__)
    assert all(getattr(models, name) is factory for name, factory in {**models.MODELS, **models.REAL_MODELS}.items())


@pytest.mark.parametrize("name", NAMES)
def test_each_sample_is_deterministic_and_delegates_a_default_op(name):
    (m1, x1), (m2, x2) = models.MODELS[name](), models.MODELS[name]()
    torch.testing.assert_close(m1(*x1), m2(*x2), rtol=0, atol=0)
    lowered = export_and_lower(m1, x1, DEFAULT_DELEGATE_OPS)
    assert lowered.delegates
    torch.testing.assert_close(lowered(*x1), m1(*x1))


def test_load_model_by_name_and_by_file(tmp_path):
    assert isinstance(models.load_model("add")[0], torch.nn.Module)
    path = tmp_path / "mine.py"
    path.write_text("import torch\ndef build():\n    return torch.nn.ReLU(), (torch.ones(2),)\n")
    module, inputs = models.load_model(f"{path}:build")
    assert isinstance(module, torch.nn.ReLU) and inputs[0].shape == (2,)


def test_a_model_file_is_imported_as_a_module_in_sys_modules(tmp_path):
    """A dataclass with postponed annotations finds its module in sys.modules (so does dynamo, for torch.cond)."""
    path = tmp_path / "dc.py"
    path.write_text(
        "from __future__ import annotations\nimport dataclasses, sys, torch\n"
        "@dataclasses.dataclass\nclass Config:\n    width: int = 2\n"
        "def build():\n    assert sys.modules[__name__].Config is Config\n"
        "    return torch.nn.Linear(Config().width, 1), (torch.ones(1, 2),)\n"
    )
    module, _ = models.load_model(f"{path}:build")
    assert isinstance(module, torch.nn.Linear)


def test_a_model_file_that_fails_leaves_no_half_imported_module(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import sys\nNAME = __name__\nraise RuntimeError('broken on purpose')\n")
    before = set(sys.modules)
    with pytest.raises(RuntimeError, match="broken on purpose"):
        models.load_model(f"{path}:build")
    assert set(sys.modules) == before


@pytest.mark.parametrize(
    "spec,message",
    [("nope", "Give a sample name"), ("missing.py:f", "not found"), ("{file}:absent", "has no callable 'absent'")],
)
def test_load_model_errors_say_how_to_fix(tmp_path, spec, message):
    path = tmp_path / "m.py"
    path.write_text("def build():\n    return 1\n")
    with pytest.raises(ValueError, match=message):
        models.load_model(spec.format(file=path))


# ---- real models (the models extra) ----------------------------------------------------------------------------
REAL = ["resnet18", "mobilenet_v3_small", "gpt2_2l", "gpt2_12l", "bert_small", "llama_tiny"]
REAL += ["llama_decode_step", "llama_decode_step_functional"]
FAMILIES = ["mistral_tiny", "qwen2_tiny", "phi_tiny", "gpt_neox_tiny", "mixtral_tiny", "t5_encoder_tiny"]
FAMILIES += ["distilbert_tiny", "vit_tiny", "whisper_encoder_tiny", "lstm_tagger", "convnext_micro"]


def test_the_design_names_every_real_model_and_keeps_them_out_of_the_sample_list():
    assert list(models.REAL_MODELS) == REAL + FAMILIES and list(models.FAMILY_MODELS) == FAMILIES
    assert not set(REAL) & set(models.MODELS)


def test_a_real_model_loads_by_name_seeded_in_eval_mode():
    pytest.importorskip("transformers", reason="the models extra is not installed")
    (m1, x1), (m2, x2) = models.load_model("llama_tiny"), models.llama_tiny()
    assert not m1.training and x1[0].dtype == torch.int64 and x1[0].shape == (1, 32)
    torch.testing.assert_close(m1(*x1), m2(*x2), rtol=0, atol=0)


@pytest.mark.parametrize("package,name", [("transformers", "gpt2_2l"), ("torchvision", "resnet18")])
def test_a_real_model_without_the_extra_names_the_install(monkeypatch, package, name):
    monkeypatch.setitem(sys.modules, package, None)  # `import package` now raises ModuleNotFoundError
    with pytest.raises(models.ModelsExtraMissing, match=rf"{name!r} needs {package}.*pip install 'devcopy\[models\]'"):
        models.load_model(name)


def _probe(source: str, timeout: int) -> str:
    """What `source` prints, run by a fresh interpreter on this checkout: the torchvision fallback acts at import, so
    only a process that has not imported torchvision yet shows it."""
    root = pathlib.Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


_FALLBACK_PROBE = """
import warnings, torch
from devcopy_lib.models import extras
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    tv = extras.import_torchvision("resnet18")
    extras.import_torchvision("resnet18")
print("warnings", sum("compiled ops did not load" in str(w.message) for w in caught))
print("resnet", tuple(tv.models.resnet18(weights=None).eval()(torch.randn(1, 3, 32, 32)).shape))
try:
    tv.ops.nms(torch.rand(3, 4), torch.rand(3), 0.5)
except Exception as exc:
    print("nms raised", type(exc).__name__)
"""


def test_torchvision_without_its_compiled_ops_imports_loudly_and_its_detection_ops_still_raise():
    """A fresh interpreter: the fallback runs only where torchvision's _C did not load (a CUDA wheel on CPU torch)."""
    from devcopy_lib.models import extras

    try:
        torchvision = extras.import_torchvision("resnet18")
    except models.ModelsExtraMissing:
        pytest.skip("the models extra is not installed")
    if torchvision.extension._has_ops():
        pytest.skip("torchvision's compiled ops load here: the fallback is not needed")
    assert "warnings 1\nresnet (1, 1000)\nnms raised RuntimeError" in _probe(_FALLBACK_PROBE, timeout=120)


_TRANSFORMERS_PROBE = """
import warnings
from devcopy_lib.models import extras
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    extras.require("transformers", "gpt2_2l").GPT2LMHeadModel
    print("after gpt2", sum("compiled ops did not load" in str(w.message) for w in caught))
    extras.import_torchvision("resnet18")
    print("after resnet18", sum("compiled ops did not load" in str(w.message) for w in caught))
"""


def test_a_transformers_model_says_nothing_about_torchvision_it_does_not_use():
    """transformers imports torchvision itself; the fallback's warning waits for a model that uses torchvision."""
    from devcopy_lib.models import extras

    pytest.importorskip("transformers", reason="the models extra is not installed")
    if extras.import_torchvision("resnet18").extension._has_ops():
        pytest.skip("torchvision's compiled ops load here: the fallback is not needed")
    assert "after gpt2 0\nafter resnet18 1" in _probe(_TRANSFORMERS_PROBE, timeout=240)


def test_an_unrelated_torchvision_import_failure_is_not_hidden(monkeypatch):
    from devcopy_lib.models import extras

    def broken(name):
        raise RuntimeError("torchvision::roi_align kernel crashed")

    monkeypatch.setattr(extras.importlib, "import_module", broken)
    monkeypatch.delitem(sys.modules, "torchvision.extension", raising=False)
    with pytest.raises(RuntimeError, match="roi_align kernel crashed"):
        extras.import_torchvision("resnet18")
