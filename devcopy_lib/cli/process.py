"""The `devcopy` process: a small supervisor forks a worker that runs the command, so that the one-JSON-object contract
holds whatever the user's model code does (docs/reliability.md, "The devcopy process").

- Only the supervisor writes stdout. Under `--json` the worker's fd 1 points at stderr (dup2), so C `printf`,
  `os.write(1, ...)`, `os.system`, child processes and `sys.__stdout__` land there, never in the JSON stream. The worker
  hands its result over a pipe as length-prefixed JSON frames tagged with its pid: a fork of the worker stays silent,
  and frames from any other pid are dropped.
- A worker that ends without a result (`os._exit`, a crash, a signal) becomes one failure: `interrupted` when a stop
  request was forwarded, `user_code` naming the model file when one was announced, else `internal`; never exit 0.
- SIGINT, SIGTERM and SIGHUP reaching the supervisor are forwarded once: the worker raises `common.Interrupted` and
  stops as on Ctrl-C (a bench keeps its rows); a second request kills the worker.
- Once its result is handed over, the worker leaves with `os._exit`: a lingering thread cannot keep devcopy alive.
  A supervisor killed outright (`kill -9`) takes the worker with it (Linux's parent-death signal).
- Writing the result: a reader gone (broken pipe) exits 141 quietly, an unwritable stdout (`/dev/full`) 1 with one
  line on stderr, an interrupt while blocked on a slow reader 130.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import struct
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, NoReturn, TextIO

from .common import EXIT_INTERRUPTED, EXIT_REFUSED, CliError, Interrupted, UserCodeError, encodable, failure, to_json

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a writer whose reader went away
POLL_S = 0.1  # how often the supervisor checks that the worker still runs (a fork of it may hold the pipe open)
HEADER = struct.Struct(">I")  # a frame's length
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies

Execute = Callable[..., tuple[int, str, list[str]]]  # cli.execute(argv, announce, stdout_identity)
Handler = Callable[[int, FrameType | None], Any] | int


class WorkerLost(CliError):
    """devcopy's worker ended without a result while no user code was involved: a devcopy bug (`internal`)."""


def identity(stream: TextIO | None) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file behind `stream`, None where it has none (a capture in tests, a closed fd)."""
    try:
        info = os.fstat(stream.fileno())  # type: ignore[union-attr]  # None has no fileno: the AttributeError below
    except (OSError, ValueError, AttributeError):
        return None
    return info.st_dev, info.st_ino


def supervise(argv: list[str], execute: Execute) -> int:
    """Run `execute(argv, ...)` in a forked worker and write its result, or the failure of a lost worker, to
    stdout; the exit code."""
    as_json = "--json" in argv
    stdout = identity(sys.stdout)
    read_fd, write_fd = os.pipe()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited SIG_IGN would reap the worker unseen
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # no stop request lost between the fork and the handlers
    supervisor = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _die_with(supervisor)
        _work(argv, execute, write_fd, as_json, stdout)
    os.close(write_fd)
    forward = _Forward(pid)
    _install(forward)
    data = _collect(read_fd, pid)
    os.close(read_fd)
    _install(_raise_interrupt)  # the worker has ended (not reaped yet): a stop request now stops the writing
    try:
        _, status = os.waitpid(pid, 0)
        frames = _frames(data, pid)
        result = next((frame["result"] for frame in frames if "result" in frame), None)
        code, text = (result["code"], result["text"]) if result else _lost(frames, status, forward.sent, as_json)
        return _deliver(text, code)
    except KeyboardInterrupt:
        _say("devcopy: interrupted while writing the result")
        return EXIT_INTERRUPTED
    finally:
        _install(signal.SIG_IGN)  # exiting now: a late stop request cannot turn into a traceback


class _Forward:
    """The supervisor's stop handler while the worker runs: the first request goes to the worker, a second kills it
    (for a model that swallows the interrupt)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.sent: list[str] = []

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.sent.append(signal.Signals(signum).name)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum if len(self.sent) == 1 else signal.SIGKILL)


def _install(handler: Handler) -> None:
    for signum in STOP_SIGNALS:
        signal.signal(signum, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted.by_signal(signum)


def _collect(read_fd: int, pid: int) -> bytes:
    """Everything the worker sent, read until the worker ended (not until the pipe closes: a fork of the worker
    may keep it open); the worker is left to be reaped."""
    chunks: list[bytes] = []
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if select.select([read_fd], [], [], POLL_S)[0]:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:  # no writer left: the worker is ending
                os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
                break
            chunks.append(chunk)
    os.set_blocking(read_fd, False)
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(read_fd, 1 << 16):
            chunks.append(chunk)
    return b"".join(chunks)


def _frames(data: bytes, pid: int) -> list[dict[str, Any]]:
    """The worker's own frames, in order; a torn frame (the worker died mid-send) ends the list."""
    frames, at = [], 0
    while at + HEADER.size <= len(data):
        (size,) = HEADER.unpack_from(data, at)
        at += HEADER.size
        try:
            frame = json.loads(data[at : at + size])
        except ValueError:
            break
        at += size
        if isinstance(frame, dict) and frame.get("pid") == pid:
            frames.append(frame)
    return frames


def _lost(frames: list[dict[str, Any]], status: int, sent: list[str], as_json: bool) -> tuple[int, str]:
    """The failure of a worker that ended without a result, said on stderr; (exit code, text for stdout)."""
    how = _how(status)
    model = next((frame["model"] for frame in frames if "model" in frame), None)
    exc: BaseException
    if sent:
        exc = Interrupted(f"interrupted ({', '.join(sent)}); the command ended ({how}) before it had a result")
    elif model:
        file, factory = model
        exc = UserCodeError(
            f"{file}:{factory}: the model code ended devcopy's process ({how}) before it had a result: os._exit, a "
            "crash or a signal in the model file. Fix the model file (devcopy executes it to build the model).",
            file=file,
            factory=factory,
        )
    else:
        exc = WorkerLost(f"devcopy's worker process ended ({how}) without a result")
    outcome = failure(exc)
    for line in outcome.stderr:
        _say(line)
    return outcome.code, to_json(outcome.payload) if as_json else ""


def _how(status: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def _deliver(text: str, code: int) -> int:
    """Write `text` to stdout; `code`, or 141 when the reader is gone. When stdout cannot be written (closed with
    `>&-`, a full disk) a failed command keeps its own code (2 for a usage error: the failure matters more than the
    lost JSON) and a successful one exits 1, so no caller mistakes an unwritten result for a success."""
    if not text:
        return code
    data = memoryview((text + "\n").encode(getattr(sys.stdout, "encoding", None) or "utf-8", "backslashreplace"))
    try:
        while data:
            data = data[os.write(1, data) :]
    except BrokenPipeError:
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        _say(f"devcopy: cannot write the result to stdout ({exc.strerror})")
        return code or EXIT_REFUSED
    return code


def _say(line: str) -> None:
    """One line on stderr, if there is one (print to a None stream would go to stdout)."""
    if sys.stderr is not None:
        with contextlib.suppress(OSError, ValueError):
            print(encodable(line, sys.stderr.encoding), file=sys.stderr, flush=True)


def _work(argv: list[str], execute: Execute, write_fd: int, as_json: bool, stdout: tuple[int, int] | None) -> NoReturn:
    """The worker: run the command with fd 1 away from the JSON stream, hand the result over, leave at once."""
    owner = os.getpid()

    def send(**frame: Any) -> None:
        data = json.dumps({"pid": owner, **frame}).encode("ascii")
        view = memoryview(HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(write_fd, view) :]

    try:
        _install(_Stop())
        if as_json:
            _flush()
            _point_fd_1_at_stderr()
        code, text, lines = execute(argv, lambda file, factory: send(model=[file, factory]), stdout)
        _install(signal.SIG_IGN)  # the result is ready: a late stop request no longer changes it
        if os.getpid() == owner:  # a fork made by the user's code returns here too: only the worker speaks
            for line in lines:
                _say(line)
            _flush()
            send(result={"code": code, "text": text})
    except BaseException as exc:  # the supervisor reports a worker without a result
        if os.getpid() == owner and not isinstance(exc, KeyboardInterrupt):
            _say(f"devcopy: the worker could not hand over its result ({type(exc).__name__})")
    finally:
        _flush()
        os._exit(0)


def _point_fd_1_at_stderr() -> None:
    """Point fd 1 at stderr, or at /dev/null when there is no stderr (`2>&-`): the model's output never reaches the
    JSON stream."""
    try:
        os.dup2(2, 1)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)


def _die_with(supervisor: int) -> None:
    """Ask Linux to kill the worker when the supervisor dies (`kill -9`, `timeout -k`): no one would read its result,
    and a model left running would hold the device."""
    prctl = getattr(ctypes.CDLL(None), "prctl", None)  # Linux only
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != supervisor:  # it died before the request took effect
        os._exit(1)


class _Stop:
    """The worker's stop handler: the first request raises Interrupted; later ones (Ctrl-C reaches the worker both
    from the terminal and through the supervisor) are ignored while it stops."""

    def __init__(self) -> None:
        self.stopping = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if not self.stopping:
            self.stopping = True
            raise Interrupted.by_signal(signum)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
