"""`devcopy run`: place, load and run in a mode, compare with eager; missing operators exit 1 with the fix."""

import json
import re

import pytest

from devcopy_lib.cli import main

SIM = ["--backend", "simulated"]


def _run(capsys, *argv):
    code = main(["run", *argv, *SIM, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_run_add_matches_eager_in_each_mode(capsys, mode):
    code, result, _ = _run(capsys, "add", "--mode", mode)
    assert code == 0
    assert result["ok"] is True and result["mode"] == mode and result["backend"] == "simulated"
    assert result["max_abs_err"] == 0.0
    assert result["copies_executed"] == {"h2d": 2, "d2h": 1} and result["caller_copies"] == 0


@pytest.mark.parametrize(
    ("option", "named"),
    [
        (["--libs", "native"], "--libs"),
        (["--aten-libs", "native"], "--libs"),
        (["--aten-libs", ""], "--libs"),
        (["--aten-device-rule", "tensor"], "--aten-device-rule"),
    ],
)
def test_aten_options_in_portable_mode_are_argument_errors(capsys, option, named):
    code, result, _ = _run(capsys, "add", *option)
    assert code == 2 and result["error"]["kind"] == "usage"
    assert re.search(f"{named} only apply in ATen mode", result["error"]["message"])


@pytest.mark.parametrize("flag", ["--libs", "--aten-libs"])
def test_run_takes_the_libs_flag_of_every_subcommand_and_its_older_name(capsys, flag):
    """`--libs` links libs on `run` as on `registry`; `--aten-libs` stays an alias; the fix names `--libs`."""
    code, result, err = _run(capsys, "add", "--mode", "aten", flag, "native")
    assert code == 1 and "(--libs native,device_copy_ops_aten_lib)" in err
    code, result, _ = _run(capsys, "add", "--mode", "aten", flag, "native,device_copy_ops_aten_lib")
    assert code == 0 and result["ok"] is True
    assert main(["registry", "--mode", "aten", "--libs", "native", "--json"]) in (0, 1)


def test_aten_mode_with_only_native_lists_each_missing_operator_and_the_fix(capsys):
    code, result, err = _run(capsys, "add", "--mode", "aten", "--aten-libs", "native")
    assert code == 1 and result["ok"] is False
    assert "Missing operator: [0] et_copy::_h2d_copy.out" in err
    assert "Missing operator: [1] et_copy::_d2h_copy.out" in err
    assert "device_copy_ops_aten_lib" in err
    assert result["error"]["missing"] == [
        {"index": 0, "name": "et_copy::_h2d_copy.out"},
        {"index": 1, "name": "et_copy::_d2h_copy.out"},
    ]


@pytest.mark.parametrize("rule", ["seed", "tensor"])
def test_aten_mode_with_the_device_copy_lib_runs_under_either_device_rule(capsys, rule):
    code, result, _ = _run(
        capsys,
        "mlp",
        "--mode",
        "aten",
        "--aten-libs",
        "native,device_copy_ops_aten_lib",
        "--aten-device-rule",
        rule,
        "--strategy",
        "dedupe",
    )
    assert code == 0 and result["ok"] is True


def test_skip_switches_count_the_callers_copies(capsys):
    code, result, _ = _run(capsys, "add", "--skip-h2d-inputs", "--skip-d2h-outputs")
    assert code == 0 and result["copies_executed"] == {"h2d": 0, "d2h": 0} and result["caller_copies"] == 3


def test_an_unknown_lib_is_an_argument_error(capsys):
    code, result, err = _run(capsys, "add", "--mode", "aten", "--aten-libs", "natve")
    assert code == 2 and result["ok"] is False and "native" in err


def test_text_output_names_mode_backend_and_copies(capsys):
    assert main(["run", "cpu_between", *SIM]) == 0
    out = capsys.readouterr().out
    assert "ok (portable mode, simulated backend" in out and "4 H2D, 2 D2H" in out


def test_run_text_gives_bytes_and_times_with_units(capsys):
    assert main(["run", "transformer_block", "--backend", "simulated", "--profile", "2"]) == 0
    text = capsys.readouterr().out
    arenas = next(line for line in text.splitlines() if line.strip().startswith("arenas:"))
    assert "KiB" in arenas and not any(
        part.isdigit() and int(part) >= 1024 for part in arenas.replace(",", " ").split()
    )
    total = next(line for line in text.splitlines() if line.startswith("| total"))
    assert total.split("|")[5].strip().endswith((" us", " ms"))  # the call's time, not 24915.9us


def test_run_reports_graph_replay_and_no_capture_turns_it_off(capsys):
    code, result, _ = _run(capsys, "add")
    assert code == 0 and result["capture"]["option"] == "auto" and result["capture"]["on"] is False
    assert result["capture"]["line"] == (
        "graph replay: 0 graph(s) covering 0/4 steps; uncaptured: the simulated backend has no CUDA graphs"
    )
    code, result, _ = _run(capsys, "add", "--no-capture")
    assert code == 0 and result["capture"]["option"] is False
    assert result["capture"]["line"] == "graph replay: off (--no-capture)"


def test_run_with_capture_required_where_impossible_exits_1_naming_why_in_flag_terms(capsys):
    code, result, _ = _run(capsys, "add", "--capture")
    assert code == 1 and result["error"]["kind"] == "load"
    message = result["error"]["message"]
    assert "--capture, but no step can be recorded: the simulated backend has no CUDA graphs" in message
    assert "--no-capture" in message and "capture=" not in message


def test_a_resident_kv_cache_decodes_equal_to_eager_over_several_steps(capsys):
    """The decode step fed its own next token and position: five calls of one method beside five eager steps."""
    code, result, _ = _run(capsys, "llama_decode_step", "--resident-buffers", "--mode", "aten", "--steps", "5")
    assert code == 0 and result["ok"] is True and result["resident_buffers"] is True
    assert result["steps"] == 5 and len(result["step_errors"]) == 5 and max(result["step_errors"]) < 1e-4
    code, placed = main(["place", "llama_decode_step", "--resident-buffers", "--json"]), capsys.readouterr()
    assert code == 0 and json.loads(placed.out)["copy_bytes_by_role"]["cache"] == {"h2d": 0, "d2h": 0}


INPLACE_MODEL = """
import torch


class WritesItsInput(torch.nn.Module):
    def forward(self, a, b):
        a.mul_(2)
        return a + b


def factory():
    return WritesItsInput(), (torch.randn(4), torch.randn(4))
"""


def test_a_model_that_writes_its_input_in_place_compares_ok(capsys, tmp_path):
    """Eager runs on the inputs as they were before the method ran, not on what the method wrote into them."""
    path = tmp_path / "inplace.py"
    path.write_text(INPLACE_MODEL)
    code, result, _ = _run(capsys, f"{path}:factory")
    assert code == 0 and result["ok"] is True and result["max_abs_err"] == 0.0
