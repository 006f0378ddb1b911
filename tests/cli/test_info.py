"""`devcopy info`: backend, devices and versions; one JSON object; exit codes."""

import json

from devcopy_lib.cli import main


def test_info_json_names_backend_and_devices(capsys, monkeypatch):
    monkeypatch.setenv("DEVCOPY_BACKEND", "simulated")
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["backend"] == "simulated" and info["simulated"] is True
    assert info["devices"][0]["device"] == "cuda:0" and "torch" in info["versions"]


def test_info_text_says_simulated(capsys):
    assert main(["info", "--backend", "simulated"]) == 0
    assert "simulated accelerator" in capsys.readouterr().out


def test_bad_argument_exits_2_with_json_error(capsys):
    assert main(["info", "--backend", "tpu", "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ok"] is False and "invalid choice" in captured.err


def test_python_dash_m_is_the_same_command():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "devcopy_lib", "info", "--backend", "simulated", "--json"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and json.loads(done.stdout)["backend"] == "simulated"
