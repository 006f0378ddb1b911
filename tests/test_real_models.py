"""Real models (the `models` extra) place and run equal to eager in both runtime modes, with every delegate set of
`models.DELEGATE_SETS`: small inputs on the simulated backend here, full sizes with CuPy on a GPU (`pytest -m gpu`).
GPT-2 with 12 layers runs only in the GPU test and in benchmarks/real_models.py."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.utils._pytree as pytree

from devcopy_lib import compare_outputs, export_program, load_method, lower, models, place_devices
from devcopy_lib.devices import scoped_allocators

pytestmark = pytest.mark.filterwarnings("ignore:torchvision's compiled ops did not load:RuntimeWarning")

# Small inputs for the 2-core CI machine: the factories' own defaults (224 px, 32 tokens) run in the GPU test.
SMALL = {
    "resnet18": {"image_size": 32},
    "mobilenet_v3_small": {"image_size": 32},
    "gpt2_2l": {"seq_len": 8},
    "bert_small": {"seq_len": 16},
    "llama_tiny": {"seq_len": 16},
    "llama_decode_step": {"max_cache_len": 16, "prompt_len": 5},
    "llama_decode_step_functional": {"max_cache_len": 16, "prompt_len": 5},
    # the architecture families (models/families.py): tiny already, at their shortest useful inputs
    **{name: {"seq_len": 8} for name in ("mistral_tiny", "qwen2_tiny", "phi_tiny", "gpt_neox_tiny", "mixtral_tiny")},
    **{name: {"seq_len": 8} for name in ("t5_encoder_tiny", "distilbert_tiny", "lstm_tagger")},
    "vit_tiny": {"image_size": 32},
    "whisper_encoder_tiny": {"frames": 16},
    "convnext_micro": {"image_size": 32},
}


@functools.cache
def _exported(name: str):
    """(module, inputs, eager outputs, exported program): each model exported once for every delegate set."""
    try:
        module, inputs = models.REAL_MODELS[name](**SMALL[name])
    except models.ModelsExtraMissing as exc:
        pytest.skip(f"the models extra is not installed: {exc}")
    with torch.no_grad():
        expected = pytree.tree_leaves(module(*inputs))
    return module, inputs, expected, export_program(module, inputs)


def _runs_equal_to_eager(placed, inputs, expected) -> None:
    for mode in ("portable", "aten"):
        with load_method(placed, mode) as method:
            outputs = method(*inputs)
            executed = method.copies_executed
        ok, err = compare_outputs(outputs, expected)
        assert ok, f"{mode} mode: max |devcopy - eager| = {err}"
        assert executed["h2d"] == placed.report.copies["h2d"] and executed["d2h"] == placed.report.copies["d2h"]


@pytest.mark.parametrize("ops", sorted(models.DELEGATE_SETS))
@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_real_model_runs_equal_to_eager_with_each_delegate_set(sim, name, ops):
    _, inputs, expected, exported = _exported(name)
    lowered = lower(exported, models.DELEGATE_SETS[ops])
    delegated = {op for d in lowered.delegates.values() for op in d.ops}
    assert delegated and delegated <= set(models.DELEGATE_SETS[ops])
    _runs_equal_to_eager(place_devices(lowered), inputs, expected)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_a_real_model_runs_equal_to_eager_per_node_with_dedupe_and_outputs_left_on_the_device(sim, name):
    _, inputs, expected, exported = _exported(name)
    placed = place_devices(lower(exported, partition="per_node"), strategy="dedupe", skip_d2h_for_method_outputs=True)
    _runs_equal_to_eager(placed, inputs, expected)


def test_the_default_ops_keep_a_cnn_on_the_device_end_to_end():
    """With the defaults ResNet-18 crosses the boundary once each way: every op it computes is delegated."""
    _, _, _, exported = _exported("resnet18")
    report = place_devices(lower(exported)).report
    assert report.copies == {"h2d": 1, "d2h": 1}
    assert {r.kind for r in report.rows} == {"input", "delegate", "getitem", "h2d", "d2h", "output"}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(models.REAL_MODELS))
def test_every_real_model_runs_equal_to_eager_on_cuda_with_cupy(exact_float32, replays_equal_uncaptured, name):
    """Full sizes on the GPU; TF32 off, so the device computes in float32 like eager on the CPU; graph replay
    (capture) gives the uncaptured run's outputs exactly."""
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    try:
        module, inputs = models.REAL_MODELS[name]()
    except models.ModelsExtraMissing as exc:
        pytest.skip(f"the models extra is not installed: {exc}")
    with torch.no_grad():
        expected = pytree.tree_leaves(module(*inputs))
    exported = export_program(module, inputs)
    with scoped_allocators(CupyCudaAllocator()):
        for ops in models.DELEGATE_SETS.values():
            placed = place_devices(lower(exported, ops))
            _runs_equal_to_eager(placed, inputs, expected)
            assert replays_equal_uncaptured(placed, inputs)["on"]
