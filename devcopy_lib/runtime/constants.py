"""A method's constants are a snapshot of the model at load (docs/reliability.md, "Constants: a snapshot at load").

Loading copies every constant into memory the method owns (host copies for the CPU ops, device memory for the
delegates), so whatever the caller does to the model afterwards never reaches a call. For each constant emitted from
the model's own tensor (`ConstantSource`), `take()` records, before reading it, what `check()` compares at the start
of every call: the tensor's identity in its module (a tensor replaced by `load_state_dict(..., assign=True)`), its
`_version` (bumped by every in-place write torch tracks: `add_` under no_grad, `load_state_dict`, an optimizer step)
and its address (changed by `.data =` and `module.to()`). A change raises `ConstantsChangedError` naming the tensor
instead of computing with weights the model no longer has; `Method.reload_constants()` takes the snapshot again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from ..tensors.error import Error
from .failures import ConstantsChangedError, LoadError
from .program import Program, TensorValue

# what check() compares for one source tensor: (owner, key, tensor, version, address, name)
Watch = tuple[Mapping[str, Any], str, torch.Tensor, int, int, str]
_SHOWN = 5  # changed tensors a message names one by one


class Taken(NamedTuple):
    """One reading of the sources: the live tensor of each constant (by value index) and what to watch."""

    tensors: dict[int, torch.Tensor]
    watch: tuple[Watch, ...]


def _live(value: TensorValue) -> torch.Tensor:
    """The tensor the model holds now for `value`'s source, refused when it no longer fits the program."""
    source = value.source
    assert source is not None  # only sourced values are read
    tensor = source.tensor if source.owner is None else source.owner.get(source.key)
    spec = value.spec
    if not isinstance(tensor, torch.Tensor):
        problem = f"the model no longer holds a tensor named {source.name!r} (it holds {type(tensor).__name__})"
    elif tensor.dtype != spec.dtype or tuple(tensor.shape) != spec.sizes:
        problem = (
            f"the model's {source.name!r} is now a {tensor.dtype} tensor of sizes {list(tensor.shape)}, where the "
            f"program was emitted for {spec.dtype} {list(spec.sizes)}"
        )
    else:
        return tensor
    raise LoadError(
        Error.InvalidProgram,
        f"Cannot take the model's constants: {problem}. A new shape or dtype needs a new program: "
        "export_and_lower, place_devices and load_method again.",
    )


def _change(entry: Watch) -> str:
    """How one watched tensor changed, in words ('' when it did not)."""
    owner, key, tensor, version, address, name = entry
    if owner.get(key) is not tensor:
        return f"{name} was replaced by another tensor (an assignment, or load_state_dict(..., assign=True))"
    if tensor._version != version:
        return f"{name} was written in place (its version went from {version} to {tensor._version})"
    if tensor.data_ptr() != address:
        return f"{name} was moved to other memory (.data = ..., or module.to(...))"
    return ""


class ConstantSnapshot:
    """The sourced constants of one method and what `check()` compares before each call."""

    def __init__(self, program: Program) -> None:
        self._values = {
            index: value
            for index, value in enumerate(program.values)
            if isinstance(value, TensorValue) and value.source is not None
        }
        self._watch: tuple[Watch, ...] = ()
        self._broken = ""

    def take(self) -> Taken:
        """Read every source's live tensor, recording what to watch first (a change while copying is then seen by
        the next check). Effective with `commit`; a problem with any source is raised before anything is read."""
        tensors = {index: _live(value) for index, value in self._values.items()}
        watch: dict[tuple[int, int, str], Watch] = {}  # one entry per (tensor, holder, name): a shared one once
        for index, tensor in tensors.items():
            source = self._values[index].source
            assert source is not None  # only sourced values are kept
            found = (id(tensor), id(source.owner), source.key)
            if found not in watch:
                owner = source.owner if source.owner is not None else {source.key: tensor}
                watch[found] = (owner, source.key, tensor, tensor._version, tensor.data_ptr(), source.name)
        return Taken(tensors, tuple(watch.values()))

    def commit(self, taken: Taken) -> None:
        """The method now holds `taken`'s values: watch them."""
        self._watch, self._broken = taken.watch, ""

    def broken(self, reason: str) -> None:
        """Copying a new snapshot failed midway: every call is refused until one succeeds."""
        self._broken = reason

    def check(self) -> None:
        """Raise ConstantsChangedError when a source changed since the snapshot (once per call: a few attribute
        reads per source tensor)."""
        if self._broken:
            raise ConstantsChangedError(
                f"This method's constants are incomplete: {self._broken}. Call method.reload_constants() again, "
                "or load_method(...) again.",
                (),
            )
        for owner, key, tensor, version, address, _ in self._watch:
            if tensor._version != version or owner.get(key) is not tensor or tensor.data_ptr() != address:
                raise self._changed()

    def _changed(self) -> ConstantsChangedError:
        changes = [(entry[-1], text) for entry in self._watch if (text := _change(entry))]
        listed = "; ".join(text for _, text in changes[:_SHOWN])
        more = f"; and {len(changes) - _SHOWN} more" if len(changes) > _SHOWN else ""
        return ConstantsChangedError(
            f"The model changed after this method was loaded: {listed}{more}. A method computes with a snapshot of "
            "the model taken at load (docs/reliability.md), so it refuses to run with weights the model no longer "
            "has. To fix: call method.reload_constants() to take the new values, or load_method(...) again; to keep "
            "the old values, load the method from a copy of the model (copy.deepcopy(model)).",
            tuple(name for name, _ in changes),
        )
