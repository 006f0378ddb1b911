"""What a user's own model meets at `torch.export` (docs/reliability.md, "Bring your own model"): example inputs
given as one bare tensor become a one-input tuple, and a branch on a tensor's value becomes one clear message,
printed once, instead of torch's traceback and the partial graph torch prints twice.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols

from ..names import ErrorKind

EXPORT_DOCS = "https://pytorch.org/docs/stable/export.html"
# torch logs this warning before raising a data-dependent error; the error's own message names the user's line
_SHAPES_LOG, _NO_USER_CODE = "torch.fx.experimental.symbolic_shapes", "Unable to find user code"
_LIBRARY_DIRS = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class UnsupportedModelError(Exception):
    """A model that torch.export cannot capture, or that exports with a construct devcopy's programs cannot express."""

    kind = ErrorKind.UNSUPPORTED_MODEL


def example_tuple(example_inputs: torch.Tensor | Sequence[Any]) -> tuple[Any, ...]:
    """The example inputs as the tuple torch.export wants: one bare tensor is one input, not a sequence of rows."""
    return (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)


def _user_line(exc: BaseException) -> str:
    """`file:line: code` of the innermost frame outside torch and devcopy (the model's own code), or ''."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_LIBRARY_DIRS)]
    if not frames:
        return ""
    frame = frames[-1]
    return f" at {frame.filename}:{frame.lineno}: `{(frame.line or '').strip()}`"


def data_dependent(model: torch.nn.Module, exc: GuardOnDataDependentSymNode) -> UnsupportedModelError:
    """The one message for a branch (or size) that depends on a tensor's value, which torch.export cannot trace."""
    guard = re.split(r"\s+\(", str(exc), maxsplit=1)[0]  # torch's first clause: the expression it could not decide
    return UnsupportedModelError(
        f"{type(model).__name__}.forward depends on a tensor's value{_user_line(exc)}. torch.export traces one graph "
        f"for every input, so it needs control flow it can decide without data: a condition on shapes or Python "
        f"values (a static shape), or torch.cond(pred, true_fn, false_fn, operands) for a real branch, which devcopy "
        f"places and runs as ExecuTorch does (docs/semantics.md §5c). torch.export's guide: "
        f"{EXPORT_DOCS} (torch said: {guard})"
    )


def _keep(record: logging.LogRecord) -> bool:
    return _NO_USER_CODE not in record.getMessage()


@contextlib.contextmanager
def partial_graph_once() -> Iterator[None]:
    """Hold back what torch.export prints on stderr while it runs; on a failure, drop the partial graph it prints
    (once per wrapper it failed through) when the failure becomes devcopy's own message, else keep one copy."""
    held, log = io.StringIO(), logging.getLogger(_SHAPES_LOG)
    log.addFilter(_keep)
    try:
        with contextlib.redirect_stderr(held):
            yield
    except BaseException as exc:
        partial, text = getattr(exc, "partial_fx_graph", None), held.getvalue()
        if partial and f"{partial}\n" in text:
            once = "" if isinstance(exc, GuardOnDataDependentSymNode) else f"{partial}\n"
            text = text.replace(f"{partial}\n", "") + once
        held = io.StringIO(text)
        raise
    finally:
        log.removeFilter(_keep)
        sys.stderr.write(held.getvalue())


def check_exported(name: str, exported: torch.export.ExportedProgram) -> None:
    """Refuse, naming the model `name`, what placement cannot handle in an exported program: outputs that are not
    tensors, sizes known only at run time (an UnsupportedModelError)."""
    outputs = exported.graph_module.graph.output_node().args[0]
    for i, out in enumerate(outputs):
        value = getattr(out, "meta", {}).get("val")
        if not isinstance(value, torch.Tensor):
            shown = f"{type(out).__name__} {out!r:.40}" if value is None else type(value).__name__
            raise UnsupportedModelError(
                f"{name}: output {i} is {shown}, not a tensor; devcopy places models whose "
                "outputs are all tensors (return torch.tensor(...) instead)"
            )
    for node in exported.graph_module.graph.nodes:
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor) and free_unbacked_symbols(value):
            raise UnsupportedModelError(
                f"{name}: {node.name} ({node.target}) has a data-dependent size "
                f"{list(value.shape)}; devcopy plans memory from sizes known at export. Avoid "
                "ops like nonzero/masked_select, or make the size static."
            )
