"""Sample models: deterministic factories, each delegating at least one default op; load_model's errors."""
import pytest
import torch

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, models

NAMES = ["add", "mlp", "residual", "shared_input", "back_to_back", "cpu_between", "output_and_cpu_user",
         "transformer_block"]


def test_the_design_names_every_sample():
    assert list(models.MODELS) == NAMES


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


@pytest.mark.parametrize("spec,message", [("nope", "Give a sample name"), ("missing.py:f", "not found"),
                                          ("{file}:absent", "has no callable 'absent'")])
def test_load_model_errors_say_how_to_fix(tmp_path, spec, message):
    path = tmp_path / "m.py"
    path.write_text("def build():\n    return 1\n")
    with pytest.raises(ValueError, match=message):
        models.load_model(spec.format(file=path))
