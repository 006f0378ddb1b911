"""The `devcopy` process keeps its contract under every exit (docs/reliability.md, "The devcopy process"): each case
runs the real command in a child process and checks that stdout is exactly one JSON object (json.loads of all of
it), the error kind and the exit code, that nothing the model wrote reached stdout, and no traceback on stderr.
Signals are sent once the model says on stderr that it runs; every wait is bounded."""

from __future__ import annotations

import json
import os
import pathlib
import re
import select
import signal
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
WAIT_S = 120  # the bound on any one child: a hang fails the test instead of stalling the suite

MODEL = """
import ctypes, os, sys, threading, time
import torch

class Noisy(torch.nn.Module):
    def forward(self, x):
        os.write(1, b"MODEL-FORWARD\\n")
        return x + 1

def noisy():  # every way past sys.stdout to fd 1
    os.write(1, b"MODEL-FD1\\n")
    os.system("echo MODEL-CHILD")
    sys.__stdout__.write("MODEL-DUNDER\\n")
    sys.__stdout__.flush()
    libc = ctypes.CDLL(None)
    libc.printf(b"MODEL-PRINTF\\n")
    libc.fflush(None)
    return Noisy(), (torch.randn(2),)

def exits():
    os._exit(0)

def crashes():
    ctypes.string_at(0)

def forks():
    os.fork()
    raise ValueError("raised after a fork")

def lingers():
    threading.Thread(target=time.sleep, args=(3600,)).start()
    raise ValueError("left a thread behind")

def waits():
    sys.stderr.write("MODEL-STARTED\\n")
    sys.stderr.flush()
    time.sleep(3600)

def stubborn():
    started = False
    while True:
        try:  # entered before saying so: the interrupt always lands inside
            if not started:
                started = True
                sys.stderr.write("MODEL-STARTED\\n")
                sys.stderr.flush()
            time.sleep(3600)
        except KeyboardInterrupt:
            sys.stderr.write("MODEL-IGNORED\\n")
            sys.stderr.flush()

def long_message():
    raise ValueError("x" * 300_000)

class Custom(BaseException):
    pass

class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no message")

def base_exception():
    raise Custom("custom base")

def generator_exit():
    raise GeneratorExit

def unprintable():
    raise Unprintable()

def not_utf8():
    raise ValueError(os.fsdecode(b"caf\\xff"))
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("exits") / "model.py"
    path.write_text(MODEL)
    return str(path)


def _start(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, code=None):
    """`python -m devcopy_lib ARGV` (or `python -c CODE ARGV`), in its own session so a failed test can kill it all."""
    head = ["-c", code] if code else ["-m", "devcopy_lib"]
    return subprocess.Popen(
        [sys.executable, *head, *argv], cwd=ROOT, stdout=stdout, stderr=stderr, start_new_session=True
    )


def _finish(proc, err=""):
    """(exit code, stdout, stderr) once the child ends; killed (and the test failed) after WAIT_S."""
    try:
        out, rest = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"devcopy did not end within {WAIT_S} s")
    return proc.returncode, (out or b"").decode(errors="replace"), err + (rest or b"").decode(errors="replace")


def _wait_for(proc, marker, seen=""):
    """Read the child's stderr until `marker` appears; everything read so far."""
    deadline = time.monotonic() + WAIT_S
    while marker not in seen:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stderr], [], [], left)[0]:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"no {marker!r} on stderr within {WAIT_S} s: {seen[-2000:]!r}")
        chunk = os.read(proc.stderr.fileno(), 1 << 16)
        if not chunk:
            pytest.fail(f"the child ended before printing {marker!r}: {seen[-2000:]!r}")
        seen += chunk.decode(errors="replace")
    return seen


def _one_object(out, err):
    assert "Traceback" not in err, err[-3000:]
    return json.loads(out)  # the whole of stdout: exactly one JSON object


def test_what_the_model_writes_to_fd_1_goes_to_stderr(model):
    code, out, err = _finish(_start("place", f"{model}:noisy", "--json"))
    result = _one_object(out, err)
    assert (code, result["ok"]) == (0, True)
    for marker in ("MODEL-FD1", "MODEL-CHILD", "MODEL-DUNDER", "MODEL-PRINTF", "MODEL-FORWARD"):
        assert marker in err and marker not in out


@pytest.mark.parametrize(
    "factory, fragment",
    [
        ("exits", r"ended devcopy's process \(exit status 0\)"),
        ("crashes", r"ended devcopy's process \(killed by SIGSEGV\)"),
        ("forks", "ValueError: raised after a fork"),
        ("lingers", "ValueError: left a thread behind"),
        ("base_exception", "Custom: custom base"),
        ("generator_exit", "failed during loading .*: GeneratorExit\\. Fix"),
        (
            "unprintable",
            "Unprintable: <a Unprintable whose message cannot be printed: its __str__ raised RuntimeError>",
        ),
    ],
)
def test_whatever_the_model_does_ends_in_one_user_code_object(model, factory, fragment):
    code, out, err = _finish(_start("place", f"{model}:{factory}", "--json"))
    error = _one_object(out, err)["error"]
    assert (code, error["kind"], error["file"], error["factory"]) == (1, "user_code", model, factory)
    assert re.search(fragment, error["message"]), error["message"]
    assert err.count(error["message"]) == 1  # said once on stderr: a fork of the worker stays silent


def test_a_non_utf8_message_is_escaped_not_a_crash(model):
    code, out, err = _finish(_start("place", f"{model}:not_utf8", "--json"))
    error = _one_object(out, err)["error"]
    assert (code, error["kind"]) == (1, "user_code") and "ValueError: caf\udcff. Fix" in error["message"]
    assert "ValueError: caf\\udcff. Fix" in err  # the surrogate written as an escape on stderr


def test_a_non_utf8_model_path_is_refused_naming_the_fix(tmp_path):
    path = tmp_path / os.fsdecode(b"\xff.py")
    path.write_text(MODEL)
    code, out, err = _finish(_start("place", f"{path}:noisy", "--json"))
    error = _one_object(out, err)["error"]
    assert (code, error["kind"]) == (2, "usage") and "is not UTF-8" in error["message"]
    assert repr(str(path)) in error["message"] and "Rename the file" in error["message"]
    assert "\\udcff.py" in err


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_request_ends_in_one_interrupted_object(model, stop):
    proc = _start("place", f"{model}:waits", "--json")
    seen = _wait_for(proc, "MODEL-STARTED")
    proc.send_signal(stop)
    code, out, err = _finish(proc, seen)
    error = _one_object(out, err)["error"]
    assert (code, error["kind"]) == (130, "interrupted") and stop.name in error["message"]


def test_a_model_that_swallows_the_interrupt_is_stopped_by_a_second_request(model):
    proc = _start("place", f"{model}:stubborn", "--json")
    seen = _wait_for(proc, "MODEL-STARTED")
    proc.send_signal(signal.SIGTERM)
    seen = _wait_for(proc, "MODEL-IGNORED", seen)
    proc.send_signal(signal.SIGTERM)
    code, out, err = _finish(proc, seen)
    error = _one_object(out, err)["error"]
    assert (code, error["kind"]) == (130, "interrupted") and "killed by SIGKILL" in error["message"]


BENCH_DRIVER = """
import sys
from devcopy_lib.bench import harness
from devcopy_lib.cli import main

real = harness.measure
calls = []

def announced(*args):
    calls.append(args)
    if len(calls) == 2:  # the first measurement is in the rows now
        sys.stderr.write("BENCH-MEASURED\\n")
        sys.stderr.flush()
    return real(*args)

harness.measure = announced
sys.argv[0] = "devcopy"
sys.exit(main())
"""


def test_sigterm_keeps_a_benchs_finished_rows_in_the_json_and_the_csv(tmp_path):
    csv = tmp_path / "b.csv"
    argv = ["bench", "--backend", "simulated", "--sizes", "4K..1G", "--quick", "--csv", str(csv), "--json"]
    proc = _start(*argv, code=BENCH_DRIVER)
    seen = _wait_for(proc, "BENCH-MEASURED")
    proc.send_signal(signal.SIGTERM)
    code, out, err = _finish(proc, seen)
    result = _one_object(out, err)
    assert (code, result["ok"], result["error"]["kind"]) == (130, False, "interrupted")
    assert result["rows"] and len(csv.read_text().splitlines()) == 1 + len(result["rows"])


def test_help_with_json_is_one_object():
    code, out, err = _finish(_start("place", "--help", "--json"))
    result = _one_object(out, err)
    assert (code, result["ok"]) == (0, True) and result["help"].startswith("usage: devcopy place")


def test_a_closed_stdout_exits_quietly_with_141():
    proc = _start("info", "--backend", "simulated", "--json")
    proc.stdout.close()  # the reader is gone before devcopy writes
    code, _, err = _finish(proc)
    assert code == 141 and err == ""


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_stdout_on_a_full_disk_exits_1_with_one_line(json_flag):
    with open("/dev/full", "w") as full:
        code, _, err = _finish(_start("info", "--backend", "simulated", *json_flag, stdout=full))
    assert code == 1 and err == "devcopy: cannot write the result to stdout (No space left on device)\n"


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_a_failing_command_with_stdout_closed_keeps_its_code(json_flag):
    """`>&-`: fd 1 is no file at all. The usage error's 2 wins over the unwritten result's 1."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "devcopy_lib", "run", "no_such_model", *json_flag],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: os.close(1),
    )
    code, _, err = _finish(proc)
    assert code == 2, err
    assert "Unknown model 'no_such_model'" in err and "Traceback" not in err


def test_sigint_while_blocked_on_a_slow_reader_exits_130(model, tmp_path):
    with open(tmp_path / "err", "w+b") as err_file:
        proc = _start("place", f"{model}:long_message", "--json", stderr=err_file)
        assert proc.stdout.read(1) == b"{"  # writing has begun; 300 kB cannot fit the pipe, so it is blocked
        proc.send_signal(signal.SIGINT)
        code, _, _ = _finish(proc)
        err = (tmp_path / "err").read_text(errors="replace")
    assert code == 130 and err.endswith("devcopy: interrupted while writing the result\n")
    assert "Traceback" not in err


def test_a_worker_dies_with_its_supervisor(model):
    proc = _start("place", f"{model}:waits", "--json")
    seen = _wait_for(proc, "MODEL-STARTED")
    (worker,) = pathlib.Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    proc.kill()  # SIGKILL: the supervisor cannot forward anything
    _finish(proc, seen)
    deadline = time.monotonic() + WAIT_S
    while _state(worker) not in ("gone", "Z") and time.monotonic() < deadline:
        time.sleep(0.05)  # polling for the kernel's parent-death signal, which nothing announces
    assert _state(worker) in ("gone", "Z")


def _state(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_without_stderr_the_json_still_comes_alone():
    proc = subprocess.Popen(
        [sys.executable, "-m", "devcopy_lib", "info", "--backend", "simulated", "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.close(2),  # `2>&-`
    )
    code, out, _ = _finish(proc)
    assert code == 0 and json.loads(out)["backend"] == "simulated"
