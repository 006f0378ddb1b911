"""Output paths and counts are checked before any work (docs/reliability.md, "Argument errors"): a path that cannot
take the output is a usage error naming it and the fix, refused before the sweep's first measurement (the sizes given
would take long); the JSON stream itself is refused under --json; count options are bounded."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devcopy_lib.bench import harness
from devcopy_lib.cli import main
from devcopy_lib.cli.common import JSON_STREAM, MAX_COUNT, JsonStream, UsageError, check_output_path

ROOT = pathlib.Path(__file__).resolve().parents[2]
LONG_SWEEP = ["bench", "--backend", "simulated", "--sizes", "4K..1G"]  # minutes of work, were it to start


@pytest.fixture
def no_sweep(monkeypatch):
    monkeypatch.setattr(harness, "measure", lambda *a: pytest.fail("a sweep row was measured before the path check"))


def _refused(capsys, argv):
    assert main([*argv, "--json"]) == 2
    captured = capsys.readouterr()
    error = json.loads(captured.out)["error"]
    assert error["kind"] == "usage" and "Traceback" not in captured.err
    return error["message"]


def _hostile(tmp_path, name, suffix):
    """A path of the kind `name` ending in `suffix` under tmp_path (or the system path it stands for)."""
    links = {"dangling": tmp_path / "missing" / "x", "loop": tmp_path / f"loop{suffix}"}
    if name in links:
        (tmp_path / f"{name}{suffix}").symlink_to(links[name])
        return str(tmp_path / f"{name}{suffix}")
    return {
        "a directory": str(tmp_path),
        "a trailing slash": f"{tmp_path}/new{suffix}/",
        "a missing folder": str(tmp_path / "missing" / f"x{suffix}"),
        "a 256-byte name": str(tmp_path / ("a" * 252 + suffix)),
        "/dev/full": "/dev/full",
        "/proc": f"/proc/self/devcopy{suffix}",
        "/sys": f"/sys/devcopy{suffix}",
    }[name]


@pytest.mark.parametrize(
    "name, problem",
    [
        ("a directory", "is a directory"),
        ("a trailing slash", "names a folder, not a file"),
        ("a missing folder", "is in a folder that does not exist"),
        ("dangling", "is a dangling symbolic link"),
        ("loop", "is a symbolic link loop"),
        ("a 256-byte name", "is too long (a name of 256 bytes"),
        ("/dev/full", "is not a regular file"),
        ("/proc", "is under /proc, a kernel interface"),
        ("/sys", "is under /sys, a kernel interface"),
    ],
)
@pytest.mark.parametrize("option", ["--csv", "--plot"])
def test_an_output_that_cannot_be_written_is_refused_before_the_sweep(
    tmp_path, capsys, no_sweep, name, problem, option
):
    path = _hostile(tmp_path, name, ".png" if option == "--plot" else ".csv")
    before = sorted(os.listdir(tmp_path))
    message = _refused(capsys, [*LONG_SWEEP, option, path])
    assert message.startswith(f"{option} {path!r} {problem}") and re.search(r"; (give|remove)", message)
    assert sorted(os.listdir(tmp_path)) == before  # nothing created


def test_a_plot_format_whose_writer_is_missing_is_refused_before_the_sweep(tmp_path, capsys, no_sweep, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no TeX system: matplotlib cannot write .pgf
    message = _refused(capsys, [*LONG_SWEEP, "--plot", str(tmp_path / "b.pgf")])
    assert "matplotlib writes .pgf with xelatex (a TeX system on PATH), which is not available here" in message


def test_a_write_failing_after_the_sweep_keeps_the_rows(tmp_path, capsys, monkeypatch):
    def full(self, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(harness.SweepResult, "write_csv", full)
    csv = str(tmp_path / "b.csv")
    argv = ["bench", "--backend", "simulated", "--sizes", "4K", "--direction", "h2d", "--quick", "--csv", csv, "--json"]
    assert main(argv) == 2
    result = json.loads(capsys.readouterr().out)
    assert result["rows"] and result["error"]["kind"] == "usage"
    assert result["error"]["message"].startswith(f"--csv {csv!r}: writing failed after the sweep (No space left")


@pytest.mark.parametrize("value", ["0", "-1", str(MAX_COUNT + 1), "99999999999999999999999", "1e3", "ten"])
def test_a_count_out_of_bounds_is_an_argument_error(capsys, value):
    message = _refused(capsys, ["run", "add", "--profile", value])
    assert f"--profile: takes a whole number in 1..{MAX_COUNT}, got {value!r}" in message


@pytest.mark.parametrize("path", ["/dev/stdout", "/proc/self/fd/1", "{stdout_file}"])
def test_the_json_stream_is_refused_as_an_output(tmp_path, path):
    stdout_file = tmp_path / "out.json"
    path = path.format(stdout_file=stdout_file)
    with open(stdout_file, "w") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "devcopy_lib", *LONG_SWEEP, "--csv", path, "--json"],
            cwd=ROOT,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    error = json.loads(stdout_file.read_text())["error"]
    assert (done.returncode, error["kind"]) == (2, "usage") and b"Traceback" not in done.stderr
    assert error["message"].startswith(f"--csv {path!r} is ") and "where the one JSON object goes" in error["message"]


def test_stdout_is_a_fine_output_without_json():
    done = subprocess.run(
        [sys.executable, "-m", "devcopy_lib", "bench", "--backend", "simulated", "--sizes", "4K", "--direction", "h2d"]
        + ["--quick", "--csv", "/dev/stdout"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.startswith("method,direction,memory,bytes"), done.stderr


# Hostile leaves for the fuzz: names, and things placed at the name before the check.
LEAVES = ["b.csv", "a" * 255, "a" * 256, "", "é.csv", os.fsdecode(b"\xff.csv")]
SETUPS = ["nothing", "file", "folder", "dangling link", "link loop", "link to a file", "link to /dev/full"]
FOLDERS = ["tmp", "tmp/missing", "/proc/self", "/sys/kernel", "/dev"]


@st.composite
def output_paths(draw, tmp):
    """(path, whether stdout's file is that path): a folder and a leaf, with something placed there or not."""
    folder = draw(st.sampled_from(FOLDERS)).replace("tmp", tmp)
    leaf = draw(st.sampled_from(LEAVES))
    setup = draw(st.sampled_from(SETUPS)) if folder == tmp and leaf not in ("", "a" * 256) else "nothing"
    if folder == "/dev":  # only what exists there: never create a file in /dev
        leaf = draw(st.sampled_from(["full", "null", "zero", "stdout", "stderr"]))
    path = os.path.join(folder, leaf)
    target = os.path.join(tmp, "target")
    open(target, "w").close()
    make = {
        "file": lambda: open(path, "w").close(),
        "folder": lambda: os.mkdir(path),
        "dangling link": lambda: os.symlink(os.path.join(tmp, "missing", "x"), path),
        "link loop": lambda: os.symlink(path, path),
        "link to a file": lambda: os.symlink(target, path),
        "link to /dev/full": lambda: os.symlink("/dev/full", path),
    }
    if setup in make:
        make[setup]()
    return path, draw(st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_accepted_output_can_be_written_and_a_refused_one_is_named(tmp_path_factory, data):
    tmp = str(tmp_path_factory.mktemp("fuzz"))
    path, is_stdout = data.draw(output_paths(tmp))
    stdout_identity = (os.stat(path).st_dev, os.stat(path).st_ino) if is_stdout and os.path.isfile(path) else None
    before = sorted(os.listdir(tmp))
    token = JSON_STREAM.set(JsonStream(stdout_identity))
    try:
        check_output_path(path, "--csv")
        accepted = True
    except UsageError as exc:
        accepted = False
        assert str(exc).startswith(f"--csv {path!r} ") and re.search(r"; (give|remove)", str(exc)), str(exc)
    finally:
        JSON_STREAM.reset(token)
    assert sorted(os.listdir(tmp)) == before  # the check itself creates nothing
    if accepted:
        assert stdout_identity is None and not path.startswith(("/proc", "/sys"))
        if os.path.realpath(path).startswith("/dev/"):  # a stream or /dev/null: written to, never created
            assert path in ("/dev/null", "/dev/stderr")
        else:
            with open(path, "a") as handle:
                handle.write("x")
