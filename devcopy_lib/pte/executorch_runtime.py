"""ExecuTorch's own CPU runtime (`executorch.extension.pybindings.portable_lib`, the `reference` extra) run on a
`.pte`: which of the program's operators it registers, whether it loads the program, and what its first call
returns or why it fails. The measure devcopy's own run of the same bytes is held against (docs/pte.md).

ExecuTorch's runtime logs to stderr (through Python's `sys.stderr`, or straight to file descriptor 2);
`run_in_executorch` catches those lines into the result instead of letting them through, so a notebook or a `--json`
run shows them once, as data.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .executorch_import import import_executorch

PORTABLE_LIB = "executorch.extension.pybindings.portable_lib"  # ExecuTorch's Python runtime module
PACKAGE = "executorch"  # names: the package ExecuTorch installs, not the placement strategy
RUNTIME_MODULE = f"{PACKAGE}.extension.pybindings.portable_lib"  # ExecuTorch's runtime, imported under the lock


@dataclass(frozen=True)
class ExecuTorchRun:
    """One try of ExecuTorch's runtime on a program: `available` (portable_lib importable), `registered` (how many
    operators it registers), `missing` (the program's operators it lacks), `loaded`, `outputs` (None unless the call
    ran), `error` (what it raised, "" when it ran) and `log` (its own stderr lines)."""

    available: bool
    registered: int = 0
    missing: list[str] = field(default_factory=list)
    loaded: bool = False
    outputs: list[torch.Tensor] | None = None
    error: str = ""
    log: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outputs is not None

    def summary(self) -> str:
        """One line: ran, or where it stopped and why (with ExecuTorch's log lines)."""
        if not self.available:
            return f"ExecuTorch's runtime is not importable ({PORTABLE_LIB}): install the `reference` extra"
        head = f"ExecuTorch's portable_lib: {self.registered} operators registered"
        if self.missing:
            head += f", missing {', '.join(self.missing)}"
        if self.ok:
            return f"{head}; loaded and ran"
        where = "the first call failed" if self.loaded else "loading failed"
        log = "; ".join(line.rsplit("] ", 1)[-1] for line in self.log)
        return f"{head}; {where}: {self.error}" + (f" (its log: {log})" if log else "")


@contextlib.contextmanager
def _stderr_lines() -> Iterator[list[str]]:
    """Collect what is written to stderr meanwhile - to file descriptor 2 (a C++ library's own writes) and to
    Python's `sys.stderr` (where ExecuTorch's pybindings send its log) - restoring both afterwards."""
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    python_side = io.StringIO()
    with tempfile.TemporaryFile() as sink, contextlib.redirect_stderr(python_side):
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", errors="replace") + python_side.getvalue()
            lines.extend(line for line in text.splitlines() if line)


def executorch_operators() -> set[str] | None:
    """The operator names ExecuTorch's portable_lib registers (`_get_operator_names()`); None when it is not
    importable."""
    if importlib.util.find_spec(PACKAGE) is None:
        return None
    with _stderr_lines():
        try:
            import_executorch(RUNTIME_MODULE)
            import executorch.extension.pybindings.portable_lib as runtime
        except ImportError:
            return None
        return set(runtime._get_operator_names())


def run_in_executorch(data: bytes, inputs: Sequence[Any], operators: Sequence[str] = ()) -> ExecuTorchRun:
    """Load `.pte` bytes `data` in ExecuTorch's portable_lib and call `forward(*inputs)` once. `operators`: the
    program's table (`PteProgram.operators`), checked against what the runtime registers. Never raises for the
    program's sake: a refusal is the result's `error`."""
    names = executorch_operators()
    if names is None:
        return ExecuTorchRun(available=False)
    import_executorch(RUNTIME_MODULE)
    import executorch.extension.pybindings.portable_lib as runtime

    with _stderr_lines() as log:  # `log` is filled when the block ends, the returned result keeps the same list
        missing = [op for op in operators if op not in names]
        try:
            module = runtime._load_for_executorch_from_buffer(bytes(data))
        except Exception as exc:  # ExecuTorch's refusal to load: the verdict this function reports
            return ExecuTorchRun(True, len(names), missing, error=str(exc), log=log)
        try:
            outputs = list(module.forward(tuple(inputs)))
        except Exception as exc:  # the first call's failure: reported, not raised
            return ExecuTorchRun(True, len(names), missing, loaded=True, error=str(exc), log=log)
    return ExecuTorchRun(True, len(names), missing, loaded=True, outputs=outputs, log=log)


__all__ = ["ExecuTorchRun", "executorch_operators", "run_in_executorch"]
