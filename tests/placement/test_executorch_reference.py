"""Differential: devcopy's `executorch` strategy against ExecuTorch 1.5.1's own pipeline (same model, same ops through
devcopy's accept-all pass-through backend, same partitioning and targets): counts, node order, each delegate's
device and ops must be equal wherever ExecuTorch lowers; where it refuses, devcopy refuses too."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_helpers import Fn, inputs
from random_dags import OVERLOADS, random_dags

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, models, place_devices
from devcopy_lib.lowering.delegate import delegate_of
from devcopy_lib.lowering.nodes import node_kind
from devcopy_lib.names import device_string
from devcopy_lib.placement.place import PlacementError

pytestmark = pytest.mark.reference
SKIPS = [{}, {"skip_h2d_for_method_inputs": True}, {"skip_d2h_for_method_outputs": True}]
# Compared in graph order; inputs are left out: ExecuTorch keeps a placeholder for a buffer nothing reads (Llama's
# rotary `original_inv_freq`), devcopy drops it, and neither copies it.
ORDERED = ("output", "delegate", "h2d", "d2h")
MATRIX = ("mm.default", "addmm.default", "bmm.default")
# Each sample refused by both, under skip-H2D: a graph input read twice (by two delegates, or a delegate and a CPU op)
EXPECTED_REFUSALS = {
    ("cpu_between", "capability"),
    ("cpu_between", "per_node"),
    ("residual", "per_node"),
    ("shared_input", "per_node"),
    ("transformer_block", "capability"),
    ("transformer_block", "per_node"),
}


def ours(module, example, ops, target_device="cuda:0", partition="capability", **options):
    """devcopy's answer in the shape of `executorch_counts`."""
    gm = place_devices(
        export_and_lower(module, example, ops, target_device, partition=partition), **options
    ).graph_module
    order = [kind for kind in map(node_kind, gm.graph.nodes) if kind in ORDERED]
    delegates = [delegate_of(n) for n in gm.graph.nodes if delegate_of(n) is not None]
    return {
        "delegates": len(delegates),
        "h2d": order.count("h2d"),
        "d2h": order.count("d2h"),
        "order": order,
        "delegate_devices": [None if d.target_device is None else str(d.target_device) for d in delegates],
        "delegate_ops": [sorted(d.ops) for d in delegates],
    }


def per_delegate(answer):
    """Order-free form for one-node partitions, whose independent delegates both sides may schedule differently
    (ExecuTorch's fusion re-sorts the graph after each partition): per delegate, its ops, its device, the H2Ds right
    before it and the D2Hs right after it, sorted."""
    segments, devices, ops, h2d = [], iter(answer["delegate_devices"]), iter(answer["delegate_ops"]), 0
    for kind in answer["order"]:
        if kind == "h2d":
            h2d += 1
        elif kind == "delegate":
            segments.append([next(ops), next(devices), h2d, 0])
            h2d = 0
        elif kind == "d2h" and segments:
            segments[-1][3] += 1
    counts = {k: answer[k] for k in ("delegates", "h2d", "d2h")}
    return {**counts, "per_delegate": sorted(map(str, segments)), "unplaced_h2d": h2d}


def both(module, example, ops, target_device="cuda:0", partition="capability", **options):
    """(devcopy's answer or its PlacementError, ExecuTorch's answer or its ExecuTorchRefusal)."""
    from devcopy_lib.pte.executorch_reference import ExecuTorchRefusal, executorch_counts

    try:
        mine = ours(module, example, ops, target_device, partition, **options)
    except PlacementError as exc:
        mine = exc
    try:
        theirs = executorch_counts(module, example, ops, target_device, partition, **options)
        theirs["delegate_ops"] = [sorted(o) for o in theirs["delegate_ops"]]
        theirs["order"] = [kind for kind in theirs["order"] if kind in ORDERED]
    except ExecuTorchRefusal as exc:
        theirs = exc
    if partition == "per_node":
        mine, theirs = (a if isinstance(a, Exception) else per_delegate(a) for a in (mine, theirs))
    return mine, theirs


def assert_agree(mine, theirs, case) -> bool:
    """Equal answers, or both refusing a shared input under skip-H2D; True when they refused."""
    if isinstance(mine, Exception) or isinstance(theirs, Exception):
        assert isinstance(mine, PlacementError) and isinstance(theirs, Exception), (case, mine, theirs)
        assert "skip_h2d_for_method_inputs" in str(mine) and "skip_h2d_for_method_inputs" in str(theirs), case
        return True
    assert mine == theirs, case
    return False


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_sample_models_match_executorch(name):
    refused = set()
    for partition in ("capability", "per_node"):
        for options in SKIPS:
            if assert_agree(
                *both(*models.MODELS[name](), DEFAULT_DELEGATE_OPS, partition=partition, **options),
                (partition, options),
            ):
                assert options == {"skip_h2d_for_method_inputs": True}
                refused.add((name, partition))
    assert refused == {case for case in EXPECTED_REFUSALS if case[0] == name}


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(dag=random_dags(), data=st.data())
def test_random_dags_match_executorch(dag, data):
    ops = data.draw(st.lists(st.sampled_from(sorted(OVERLOADS.values())), min_size=1, unique=True))
    partition = data.draw(st.sampled_from(["capability", "per_node"]))
    targets = data.draw(st.sampled_from(["cuda:0", {op: device_string(i % 2) for i, op in enumerate(sorted(ops))}]))
    if isinstance(targets, dict):
        partition = "per_node"  # one device per delegate: an op-keyed map may not split a mixed group
    assert_agree(*both(*dag, ops, targets, partition, **data.draw(st.sampled_from(SKIPS))), (ops, partition))


@pytest.mark.parametrize(
    "targets", [{"delegate_0": "cuda:1", "delegate_1": "cuda:0"}, {"add.Tensor": "cuda:1", "mul.Tensor": "cuda:0"}]
)
def test_per_delegate_targets_match_executorch(targets):
    module = Fn(lambda a, b, c: (a + b) * c + a)  # per node: three delegates, one value crossing devices
    mine, theirs = both(module, inputs(3), ["add.Tensor", "mul.Tensor"], targets, "per_node")
    assert_agree(mine, theirs, targets)
    assert "'cuda:0'" in str(mine["per_delegate"]) and "'cuda:1'" in str(mine["per_delegate"])


def test_to_edge_rewrites_match_executorch():
    """Scalar lifting, a dropped assertion, a mutated buffer and a mutated input, all in one program."""

    class Everything(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", torch.zeros(2, 2))

        def forward(self, x, y):
            self.state.add_(x)
            y.mul_(2.0)
            return (torch.sin(self.state).to(torch.float32) + 1).cos() * y

    ops = ["add.Tensor", "mul.Tensor", "sin.default", "cos.default"]
    for options in SKIPS:
        assert_agree(*both(Everything(), inputs(2), ops, **options), options)


def test_a_mutated_buffer_under_skip_h2d_is_refused_by_executorch_and_placed_by_devcopy():
    """docs/differences.md: the buffer is program state, not a method input, so skip-H2D leaves it alone."""
    from test_placement_fidelity import BufferUpdate

    from devcopy_lib.pte.executorch_reference import ExecuTorchRefusal

    mine, theirs = both(BufferUpdate(), inputs(1), ["add.Tensor", "sin.default"], skip_h2d_for_method_inputs=True)
    assert isinstance(theirs, ExecuTorchRefusal) and "'b_b' to have exactly one user" in str(theirs)
    assert (mine["delegates"], mine["h2d"], mine["d2h"]) == (1, 1, 2)  # the buffer's H2D; none for the input


def test_executorch_refusal_is_its_own_error_kind():
    from devcopy_lib.pte.executorch_reference import ExecuTorchRefusal, executorch_counts

    with pytest.raises(ExecuTorchRefusal, match="ExecuTorch 1.5.1 refused the program in to_executorch") as info:
        executorch_counts(Fn(lambda a: a.sin() + a), inputs(1), ["sin.default"], skip_h2d_for_method_inputs=True)
    assert info.value.kind == "executorch_refused" and "skip_h2d_for_method_inputs" in str(info.value.error)


REAL = {
    "llama_tiny": {"seq_len": 8},
    "gpt2_2l": {"seq_len": 8},
    "bert_small": {"seq_len": 8},
    "mobilenet_v3_small": {"image_size": 32},
    "resnet18": {"image_size": 32},
    # the architecture families (models/families.py)
    **{name: {"seq_len": 8} for name in ("mistral_tiny", "qwen2_tiny", "phi_tiny", "gpt_neox_tiny", "mixtral_tiny")},
    **{name: {"seq_len": 8} for name in ("t5_encoder_tiny", "distilbert_tiny", "lstm_tagger")},
    "vit_tiny": {"image_size": 32},
    "whisper_encoder_tiny": {"frames": 16},
    "convnext_micro": {"image_size": 32},
}
# The families compared live in `make test` (each 2-10 s of ExecuTorch lowering on 2 cores), chosen for what the
# first real models lack: experts, a conv front end, a patch embedding, relative position bias, ConvNeXt. All are
# compared with every op set under --deep, and docs/data/real_models.json holds each one's agreement at full size
# with every delegate set (tests/test_real_models_page.py).
FAMILIES_BY_DEFAULT = ("mixtral_tiny", "whisper_encoder_tiny", "vit_tiny", "t5_encoder_tiny", "convnext_micro")
CNN = (
    "convolution.default",
    "_native_batch_norm_legit_no_training.default",
    "relu.default",
    "add.Tensor",
    "max_pool2d_with_indices.default",
    "hardswish.default",
    "mean.dim",
    "addmm.default",
)


def _real(name):
    try:
        return models.REAL_MODELS[name](**REAL[name])
    except models.ModelsExtraMissing as exc:
        pytest.skip(f"needs the models extra: {exc}")


def test_a_real_model_matches_executorch():
    assert_agree(*both(*_real("gpt2_2l"), MATRIX), "gpt2_2l")  # the tied lm_head weight's transpose: 154 MB H2D


@pytest.mark.parametrize("name", FAMILIES_BY_DEFAULT)
def test_architecture_families_match_executorch_with_the_default_ops(name):
    assert_agree(*both(*_real(name), DEFAULT_DELEGATE_OPS), name)


@pytest.mark.parametrize("name", sorted(REAL))
@pytest.mark.parametrize("ops", [DEFAULT_DELEGATE_OPS, MATRIX, CNN], ids=["default", "matrix", "cnn"])
@pytest.mark.parametrize("options", SKIPS, ids=["", "skip_h2d", "skip_d2h"])
@pytest.mark.deep  # 144 slow ExecuTorch lowerings: `make test-deep` (pytest --deep)
def test_real_models_match_executorch(name, ops, options):
    assert_agree(*both(*_real(name), ops, **options), (name, options))


def test_the_cli_shows_executorchs_refusal_as_its_own_and_hoists(capsys):
    import json

    from devcopy_lib.cli import main

    argv = [
        "place",
        "shared_input",
        "--delegate",
        "add.Tensor",
        "--partition",
        "per_node",
        "--strategy",
        "dedupe",
        "--skip-h2d-inputs",
        "--hoist-constants",
        "--compare-executorch",
        "--json",
    ]
    assert main(argv) == 0  # dedupe re-tags an input read by delegates on one device; ExecuTorch refuses it
    result = json.loads(capsys.readouterr().out)
    assert result["executorch"]["refused"] is True and "exactly one user" in result["executorch"]["error"]
    assert result["options"]["hoist_constants"] is True and "per_call_bytes" in result
