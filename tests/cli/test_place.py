"""`devcopy place`: the JSON contract, exit codes, and ExecuTorch's counts beside devcopy's."""

import json

import pytest

from devcopy_lib.cli import main


def run_json(capsys, *argv):
    code = main(["place", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_place_json_has_the_contract_fields(capsys):
    code, result = run_json(capsys, "add")
    assert code == 0
    assert (result["delegates"], result["copies"], result["copy_bytes"]) == (
        1,
        {"h2d": 2, "d2h": 1},
        {"h2d": 128, "d2h": 64},
    )
    assert result["constant_bytes"] == 0 and "add.Tensor" in result["delegate_ops"]
    assert [(n["kind"], n["device"]) for n in result["nodes"]] == [
        ("input", "cpu"),
        ("input", "cpu"),
        ("h2d", "cuda:0"),
        ("h2d", "cuda:0"),
        ("delegate", "cuda:0"),
        ("getitem", "cuda:0"),
        ("d2h", "cpu"),
        ("output", "cpu"),
    ]


def test_strategy_and_skip_switches(capsys):
    _, result = run_json(
        capsys, "shared_input", "--partition", "per_node", "--strategy", "dedupe", "--skip-d2h-outputs"
    )
    assert result["copies"] == {"h2d": 2, "d2h": 0}
    assert result["comparison"][0]["copies_saved"] == {"h2d": 2, "d2h": 0}


def test_refused_skip_is_exit_1_with_the_error_object(capsys):
    code, result = run_json(capsys, "shared_input", "--partition", "per_node", "--skip-h2d-inputs")
    assert code == 1 and result["ok"] is False and result["error"]["kind"] == "placement"


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["add", "--delegate", "add.tensor"], "Close matches: add.Tensor"),
        (["add", "--target", "tpu:0"], "Valid types: CPU, CUDA"),
        (["nope"], "Give a sample name"),
    ],
)
def test_argument_errors_exit_2(capsys, argv, fragment):
    code, result = run_json(capsys, *argv)
    assert code == 2 and fragment in result["error"]["message"]


def test_text_output_lists_nodes_and_copies(capsys):
    assert main(["place", "cpu_between"]) == 0
    out = capsys.readouterr().out
    assert "cumsum.default is not delegated" in out and "copies: 4 H2D" in out


@pytest.mark.reference
def test_compare_executorch_adds_its_counts(capsys):
    _, result = run_json(
        capsys, "back_to_back", "--delegate", "add.Tensor", "--partition", "per_node", "--compare-executorch"
    )
    assert result["executorch"]["copies"] == result["copies"] == {"h2d": 3, "d2h": 1}
    assert result["executorch"]["delegates"] == result["delegates"] == 2


def test_the_text_has_units_and_the_models_own_delegated_ops(capsys):
    from devcopy_lib.lowering.lower import DEFAULT_DELEGATE_OPS

    assert main(["place", "residual", "--backend", "simulated"]) == 0
    text = capsys.readouterr().out
    assert "delegated ops of this model: permute.default, addmm.default, relu.default, add.Tensor (4 of the " in text
    assert "mm.default" not in text.splitlines()[0].replace("addmm.default", "")  # not every default op
    assert "constants 288 B loaded once" in text and "(64 B) per call" in text
    assert "x_h2d       h2d      cuda:0        64 B   10.9 us  x to cuda:0" in text  # bytes and price with units
    assert main(["place", "transformer_block"]) == 0
    assert "constants 8.7 KiB loaded once" in capsys.readouterr().out  # not 8960 B
    _, result = run_json(capsys, "residual")
    assert result["model_delegate_ops"] == ["permute.default", "addmm.default", "relu.default", "add.Tensor"]
    assert result["delegate_ops"] == list(DEFAULT_DELEGATE_OPS) and result["constant_bytes"] == 288  # JSON stays raw


def test_model_help_lists_the_samples_and_the_real_models(capsys):
    from devcopy_lib import models
    from devcopy_lib.cli import place

    assert place.SAMPLE_MODELS == tuple(models.MODELS) and place.REAL_MODELS == tuple(models.REAL_MODELS)
    assert main(["place", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert all(name in help_text for name in (*models.MODELS, *models.REAL_MODELS))


def test_the_bytes_of_a_call_are_split_by_role_in_json_and_text(capsys):
    """addmm alone: the weight's transpose is made on the CPU and copied every call (weights), x is an activation."""
    _, result = run_json(capsys, "residual", "--delegate", "addmm.default")
    split = result["copy_bytes_by_role"]
    assert split["weights"]["h2d"] > 0 and split["cache"] == {"h2d": 0, "d2h": 0}
    assert {d: sum(role[d] for role in split.values()) for d in ("h2d", "d2h")} == result["copy_bytes"]
    assert main(["place", "residual", "--delegate", "addmm.default"]) == 0
    weights = split["weights"]["h2d"]
    assert f"bytes by role per call: cache 0 B H2D, 0 B D2H · weights {weights} B H2D" in capsys.readouterr().out


def test_mutable_buffers_are_program_state_not_constants_loaded_once(capsys):
    """A KV cache is read and updated on every call (its CPU copy is moved per call): the text counts it apart from
    the constants, where it lives, resident or not."""
    assert main(["place", "llama_decode_step"]) == 0
    out = capsys.readouterr().out
    line = next(li for li in out.splitlines() if li.startswith("copies:"))
    assert (
        "constants 873.3 KiB loaded once; mutable buffers 64 KiB (program state, read and updated every call) on cpu"
        in line
    )
    assert "constant read on CPU" not in out
    assert main(["place", "llama_decode_step", "--resident-buffers"]) == 0
    assert "mutable buffers 64 KiB (program state, read and updated every call) on cuda:0 (resident)" in (
        capsys.readouterr().out
    )


def test_the_hoisting_suggestion_gives_the_saving_exactly_where_rounding_hides_it(capsys):
    assert main(["place", "gpt2_2l"]) == 0
    suggestion = next(li for li in capsys.readouterr().out.splitlines() if li.startswith("suggestion: "))
    assert suggestion.endswith("(6.3 MiB -> 6.3 MiB per call, 776 B less).")
