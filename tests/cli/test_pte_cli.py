"""`devcopy place|run|registry PATH.pte` and `devcopy place MODEL --save-pte PATH`: ExecuTorch's own program read,
run in both modes and checked for registration, through the CLI contract (one JSON object, the shared kinds and
exit codes); a corrupted .pte is a `load` error, never a crash (a fuzz over flipped and cut bytes)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devcopy_lib.cli import main
from devcopy_lib.names import ERROR_KINDS

pytestmark = pytest.mark.reference


def run_json(capsys, *argv):
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # exactly one JSON object
    return code, json.loads(out)


def test_place_reads_the_program_executorch_placed(capsys, sin_path):
    code, result = run_json(capsys, "place", sin_path)
    assert code == 0 and result["ok"] and result["model"] == sin_path
    assert result["delegates"] == 1 and result["delegate_devices"] == {"delegate_0": "cuda:0"}
    assert result["copies"] == {"h2d": 2, "d2h": 1, "d2d": 0}
    assert result["copy_bytes"] == {"h2d": 48, "d2h": 24, "d2d": 0}
    program = result["program"]
    assert program["operators"] == [
        "et_copy::_h2d_copy.out",
        "et_copy::_d2h_copy.out",
        "aten::sin.out",
        "aten::mul.out",
    ]
    assert [i["kind"] for i in program["instructions"]] == ["kernel"] * 2 + ["delegate"] + ["kernel"] * 3
    assert program["buffers"] == [
        {"index": 0, "bytes": 0, "device": "cpu"},
        {"index": 1, "bytes": 96, "device": "cpu"},
        {"index": 2, "bytes": 96, "device": "cuda:0"},
    ]
    assert program["delegates"][0]["backend_id"] == "DevcopyExportBackend"


def test_place_text_lists_the_instructions_and_buffers(capsys, sin_path):
    assert main(["place", sin_path]) == 0
    text = capsys.readouterr().out
    assert "2: delegate DevcopyExportBackend[2, 3, 4]" in text and "2: cuda:0 96 B" in text
    assert "copies: 2 H2D (48 B), 1 D2H (24 B) per run" in text


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_run_in_both_modes_equals_the_program_run_eagerly(capsys, sin_path, mode):
    code, result = run_json(capsys, "run", sin_path, "--mode", mode, "--backend", "simulated")
    assert code == 0 and result["ok"] and result["max_abs_err"] == 0.0
    assert result["mode"] == mode and result["backend"] == "simulated"
    assert result["copies_executed"] == {"h2d": 2, "d2h": 1}
    assert result["arena_bytes"] == {"cpu": 96, "cuda:0": 96}


def test_run_shows_executorchs_runtime_refusing_the_same_bytes(capsys, sin_path):
    code, result = run_json(capsys, "run", sin_path)
    theirs = result["executorch"]
    assert code == 0 and theirs["available"] and not theirs["ran"] and theirs["max_abs_err"] is None
    assert "error: 0x20" in theirs["summary"] and "No device allocator registered" in theirs["summary"]
    assert main(["run", sin_path]) == 0
    assert "the first call failed" in capsys.readouterr().out


def test_run_of_a_cpu_only_program_equals_executorchs_runtime(capsys, tmp_path, sin_model):
    from devcopy_lib import executorch_pte

    path = tmp_path / "cpu.pte"
    path.write_bytes(executorch_pte(*sin_model, [], None))
    code, result = run_json(capsys, "run", str(path), "--mode", "aten")
    assert code == 0 and result["ok"] and result["executorch"]["ran"]
    assert result["executorch"]["max_abs_err"] == 0.0 and "loaded and ran" in result["executorch"]["summary"]


def test_run_in_aten_mode_without_the_device_copy_lib_is_the_seeds_missing_operator(capsys, sin_path):
    code, result = run_json(capsys, "run", sin_path, "--mode", "aten", "--aten-libs", "native")
    assert code == 1 and result["error"]["kind"] == "missing_operator"
    assert result["error"]["missing"] == [
        {"index": 0, "name": "et_copy::_h2d_copy.out"},
        {"index": 1, "name": "et_copy::_d2h_copy.out"},
    ]


def test_run_profiles_a_pte(capsys, sin_path):
    code, result = run_json(capsys, "run", sin_path, "--profile", "2")
    assert code == 0 and [row["op"] for row in result["profile"]][:2] == ["et_copy::_h2d_copy.out"] * 2


def test_registry_gives_each_mode_and_lib_set(capsys, sin_path):
    code, result = run_json(capsys, "registry", sin_path)
    assert code == 0 and result["ok"] and result["plan"] == "forward"
    sets = {(s["mode"], tuple(s["libs"])): s for s in result["sets"]}
    assert list(sets) == [
        ("portable", ("portable", "quantized")),
        ("aten", ("native", "device_copy_ops_aten_lib", "quantized_ops_aten_lib")),
        ("aten", ("native",)),
    ]
    aten = ("native", "device_copy_ops_aten_lib", "quantized_ops_aten_lib")
    assert sets["portable", ("portable", "quantized")]["ok"] and sets["aten", aten]["ok"]
    seed = sets["aten", ("native",)]
    assert not seed["ok"] and seed["resolved"] == ["aten::sin.out", "aten::mul.out"]
    assert seed["message"].splitlines()[:2] == [
        "Missing operator: [0] et_copy::_h2d_copy.out",
        "Missing operator: [1] et_copy::_d2h_copy.out",
    ]
    assert "To fix: link device_copy_ops_aten_lib" in seed["message"]
    # portable_lib's 240 and the 19 of the quantized lib devcopy loads (ops/quantized.py)
    assert result["executorch"] == {"available": True, "registered": 240 + 19, "missing": []}


def test_registry_with_a_mode_or_libs_gives_that_set(capsys, sin_path):
    _, result = run_json(capsys, "registry", sin_path, "--mode", "aten")
    assert [s["libs"] for s in result["sets"]] == [
        ["native", "device_copy_ops_aten_lib", "quantized_ops_aten_lib"],
        ["native"],
    ]
    _, result = run_json(capsys, "registry", sin_path, "--mode", "aten", "--libs", "native")
    assert [s["libs"] for s in result["sets"]] == [["native"]]
    assert main(["registry", sin_path, "--mode", "aten", "--libs", "native"]) == 0
    assert "Missing operator: [0] et_copy::_h2d_copy.out" in capsys.readouterr().out


def test_save_pte_writes_executorchs_program_of_the_model(capsys, tmp_path):
    from devcopy_lib import open_pte

    path = tmp_path / "mlp.pte"
    code, result = run_json(capsys, "place", "mlp", "--save-pte", str(path))
    assert code == 0 and result["saved_pte"]["path"] == str(path)
    program = open_pte(path)
    assert result["saved_pte"]["bytes"] == path.stat().st_size == program.size
    assert result["saved_pte"]["copies"]["h2d"] == result["copies"]["h2d"] == program.copies()["h2d"][0]
    assert [d.device for d in program.delegates] and all(str(d.device) == "cuda:0" for d in program.delegates)
    assert [p.name for p in tmp_path.iterdir()] == ["mlp.pte"]  # no temporary left beside it
    assert path.stat().st_mode & 0o777 == 0o644  # readable like a report, not mkstemp's 0600


@pytest.mark.parametrize(
    "argv, message",
    [
        (["place", "mlp", "--save-pte", "{tmp}/no/such/x.pte"], "is in a folder that does not exist"),
        (["place", "mlp", "--save-pte", "{tmp}/x.bin"], "must end in .pte"),
        (["place", "mlp", "--save-pte", "{tmp}"], "is a directory"),
        (["place", "mlp", "--target", "add.Tensor=cuda:1", "--save-pte", "{tmp}/x.pte"], "one target device"),
        (["place", "{tmp}/none.pte"], "does not exist"),
        (["run", "{tmp}/none.pte"], "does not exist"),
        (["registry", "{tmp}/none.pte"], "does not exist"),
        (["registry", "{tmp}/x.py"], "is not a .pte path"),
        (["place", "{sin}", "--strategy", "dedupe"], "--strategy does not apply"),
        (["run", "{sin}", "--delegate", "add.Tensor", "--hoist-constants"], "--delegate, --hoist-constants do not"),
        (["place", "{sin}", "--save-pte", "{tmp}/x.pte"], "--save-pte does not apply"),
        (["registry", "{sin}", "--ops", "aten::*"], "--ops does not apply"),
        (["registry", "{sin}", "--libs", "native"], "not portable-mode"),
    ],
)
def test_argument_errors_are_usage_errors_and_write_nothing(capsys, tmp_path, sin_path, argv, message):
    argv = [a.format(tmp=tmp_path, sin=sin_path) for a in argv]
    code, result = run_json(capsys, *argv)
    assert code == 2 and result["error"]["kind"] == "usage" and message in result["error"]["message"]
    assert list(tmp_path.iterdir()) == []


def test_executorchs_refusal_of_the_model_is_its_kind_and_writes_nothing(capsys, tmp_path, monkeypatch):
    from devcopy_lib.pte import backend as pte_backend
    from devcopy_lib.pte.executorch_reference import ExecuTorchRefusal

    def refuse(*args, **kwargs):
        raise ExecuTorchRefusal("to_executorch", RuntimeError("no"))

    monkeypatch.setattr(pte_backend, "executorch_manager", refuse)
    code, result = run_json(capsys, "place", "add", "--save-pte", str(tmp_path / "add.pte"))
    assert code == 1 and result["error"]["kind"] == "executorch_refused"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["place", "run", "registry"])
def test_a_truncated_pte_is_a_load_error(capsys, tmp_path, sin_path, command):
    path = tmp_path / "cut.pte"
    path.write_bytes(open(sin_path, "rb").read()[:1000])
    code, result = run_json(capsys, command, str(path))
    assert code == 1 and result["error"]["kind"] == "load" and result["error"]["error_code"] == "InvalidProgram"
    assert "truncated or corrupted" in result["error"]["message"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flips=st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(1, 255)), min_size=1, max_size=3),
    cut=st.one_of(st.none(), st.integers(0, 1 << 30)),
    command=st.sampled_from(["place", "run"]),
)
def test_a_corrupted_pte_gives_one_json_object_of_a_devcopy_kind(capsys, tmp_path, sin_path, flips, cut, command):
    """Flipped and cut bytes of a real .pte: the command reads it whole or refuses it with a kind that names a
    bad program (load, unsupported_model, missing_operator) - never `internal`, never a second object."""
    data = bytearray(open(sin_path, "rb").read())
    for where, mask in flips:
        data[where % len(data)] ^= mask
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    path = tmp_path / "bad.pte"
    path.write_bytes(bytes(data))
    code, result = run_json(capsys, command, str(path), *(["--backend", "simulated"] if command == "run" else []))
    if result["ok"] is False and "error" in result:
        assert result["error"]["kind"] in ERROR_KINDS
        assert result["error"]["kind"] != "internal", result["error"]["message"]
        assert code == 1
    else:
        assert code in (0, 1)  # read whole (run: a flipped constant or op may change the numbers)


def test_another_backends_program_opens_but_does_not_run(capsys, tmp_path, pass_through_bytes):
    """The reference's pass-through backend writes a blob no one can execute: place and registry read it, run
    refuses it naming the backend (unsupported_model, exit 1)."""
    path = tmp_path / "pass_through.pte"
    path.write_bytes(pass_through_bytes)
    code, result = run_json(capsys, "place", str(path))
    assert code == 0 and result["program"]["delegates"][0]["backend_id"] == "DevcopyPassThroughBackend"
    assert run_json(capsys, "registry", str(path))[0] == 0
    code, result = run_json(capsys, "run", str(path))
    assert code == 1 and result["error"]["kind"] == "unsupported_model"
    assert "0: DevcopyPassThroughBackend" in result["error"]["message"]
