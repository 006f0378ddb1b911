"""The MODEL argument: a sample name or `path/to/file.py:factory` (which executes the file). What the user's code
raises or exits becomes a UserCodeError naming the file and the factory; what MODEL names that is not a model (no
such file or factory, a factory returning something else, non-tensor inputs) is a UsageError; a sample of meta tensors
is UnsupportedModel. `user_code(spec, ...)` is the guard the library's workflows run the model's own stages in."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .common import UnsupportedModel, UsageError, UserCodeError, describe

if TYPE_CHECKING:
    import torch


def user_file(spec: str) -> tuple[str, str] | None:
    """(file, factory) when MODEL names the user's code, None for a sample name."""
    from ..models import MODELS

    path, sep, factory = spec.rpartition(":")
    return (path, factory) if spec not in MODELS and sep and path.endswith(".py") else None


@contextlib.contextmanager
def user_code(spec: str, stage: str) -> Iterator[None]:
    """Run a stage that executes the user's code (import, factory, forward): any exception from it (a BaseException
    such as `sys.exit` or GeneratorExit included, its message built even when its `__str__` fails) becomes a
    UserCodeError naming the file and the factory; Ctrl-C and other stop requests stay an interrupt."""
    named = user_file(spec)
    try:
        yield
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        if named is None or isinstance(exc, UsageError) or _devcopy_refusal(exc):
            raise
        path, factory = named
        what = f"sys.exit({exc.code!r})" if isinstance(exc, SystemExit) else _said(exc)
        raise UserCodeError(
            f"{path}:{factory}: the model code failed during {stage}: {what}. Fix the model file "
            "(devcopy executes it to build the model).",
            file=path,
            factory=factory,
        ) from None


def _devcopy_refusal(exc: BaseException) -> bool:
    """True for devcopy's own refusal of the model (a branch torch.export cannot trace) or ExecuTorch's (its
    pipeline refused the program: a verdict `--compare-executorch` and `--save-pte` report as such), not a fault in
    the model's code."""
    from ..lowering.user_model import UnsupportedModelError
    from ..pte.pipeline import ExecuTorchRefusal

    return isinstance(exc, (UnsupportedModelError, ExecuTorchRefusal))


def _said(exc: BaseException) -> str:
    """`Type: message`, or the type alone when the message is empty (a bare GeneratorExit)."""
    text = describe(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load(spec: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The model's `(module, example_inputs)`; every input must be a tensor."""
    import torch

    from ..models import load_model

    with user_code(spec, "loading (the file's top level or the factory)"):
        try:
            module, inputs = load_model(spec)
        except ValueError as exc:
            if _raised_by_user(exc):
                raise
            raise UsageError(str(exc)) from None  # load_model's own refusal: MODEL names no model
    bad = [
        f"input {i} is {type(x).__name__} {x!r:.40}" for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)
    ]
    if bad:
        raise UsageError(
            f"{spec}: example inputs must be tensors, but {'; '.join(bad)}. Return them as tensors, "
            "e.g. (torch.tensor(1.5),)"
        )
    _refuse_meta(spec, module, inputs)
    return module, inputs


def _refuse_meta(spec: str, module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
    """A model whose weights or inputs are meta tensors holds no values: torch.export traces it, but nothing can be
    copied to a device or computed. Refused at once as the model's own doing (a UserCodeError naming the tensor and
    what the file did), not left to fail at load as a copy of a tensor with no data. torch's default device, when
    the file set it to meta, is put back to the CPU so that devcopy's own tensors (and a caller's, in-process) have
    data again."""
    import torch

    meta = [f"parameter {name!r}" for name, value in module.named_parameters() if value.is_meta]
    meta += [f"buffer {name!r}" for name, value in module.named_buffers() if value.is_meta]
    meta += [f"input {i}" for i, x in enumerate(inputs) if x.is_meta]
    default_meta = torch.get_default_device().type == "meta"
    if not meta and not default_meta:
        return
    if default_meta:
        torch.set_default_device(None)
    what = (
        "called torch.set_default_device('meta') (torch's default device was meta after it ran)"
        if default_meta
        else "built them on the meta device"
    )
    message = (
        f"{spec}: {', '.join(meta[:3]) or 'the model'}{' and more' if len(meta) > 3 else ''}: meta tensors hold no "
        f"values; the model file {what}, so there is nothing to copy to a device or compute with. Build the model and "
        "its inputs on the CPU: drop torch.set_default_device('meta') / device='meta', or materialize the weights "
        "(module.to_empty(device='cpu') and load_state_dict)."
    )
    named_file = user_file(spec)
    if named_file is None:
        raise UnsupportedModel(message)
    raise UserCodeError(message, file=named_file[0], factory=named_file[1])


def _raised_by_user(exc: BaseException) -> bool:
    """True when the exception came from deeper than `load_model` itself (the user's file or factory)."""
    from ..models import load_model

    tb, seen = exc.__traceback__, False
    while tb is not None:
        if seen:
            return True
        seen = tb.tb_frame.f_code is load_model.__code__
        tb = tb.tb_next
    return False
