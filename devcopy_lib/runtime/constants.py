"""A method's constants are a snapshot of the model at load (docs/reliability.md, "Constants: a snapshot at load").

Loading copies every constant into memory the method owns (host copies for the CPU ops, device memory for the
delegates), so whatever the caller does to the model afterwards never reaches a call. For each constant emitted from
the model's own tensor (`ConstantSource`), `take()` records, before reading it, what `check()` compares at the start
of every call: the tensor's identity in its module (a tensor replaced by `load_state_dict(..., assign=True)`), its
`_version` (bumped by every in-place write torch tracks: `add_` under no_grad, `load_state_dict`, an optimizer step)
and its address (changed by `.data =` and `module.to()`). A change raises `ConstantsChangedError` naming the tensor
instead of computing with weights the model no longer has; `Method.reload_constants()` takes the snapshot again.

Constants that are the same elements of one storage (GPT-2's token embedding and its tied lm_head, owned by two
delegates) get one copy per device, shared by every value that reads them (`shared_copies`); a reload that finds
them untied is refused, since the prepared calls read the one copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from ..devices import Device
from ..tensors.error import Error
from .failures import ConstantsChangedError, LoadError
from .program import Program, TensorValue

# what check() compares for one source tensor: (owner, key, tensor, version, address, name)
Watch = tuple[Mapping[str, Any], str, torch.Tensor, int, int, str]
_SHOWN = 5  # changed tensors a message names one by one


def storage_view(data: torch.Tensor, where: Device) -> tuple[Any, ...]:
    """What makes two constants one copy: the same elements of one storage (a tied weight), held on `where`."""
    storage = data.untyped_storage()
    return (storage.data_ptr(), data.device, data.storage_offset(), tuple(data.shape), data.stride(), data.dtype, where)


def shared_copies(program: Program, tensors: Mapping[int, torch.Tensor]) -> dict[int, int]:
    """Constant value index -> the earlier index whose copy it reads, for constants with the same `storage_view` of
    the tensors taken (`tensors`, else the program's data); a buffer the program writes is never shared."""
    first: dict[tuple[Any, ...], int] = {}
    aliases: dict[int, int] = {}
    for index, value in enumerate(program.values):
        if isinstance(value, TensorValue) and value.data is not None and not value.mutable:
            holder = first.setdefault(storage_view(tensors.get(index, value.data), value.spec.device), index)
            if holder != index:
                aliases[index] = holder
    return aliases


def _held(program: Program, tensors: Mapping[int, torch.Tensor], index: int) -> tuple[tuple[Any, ...], str]:
    """A constant's `storage_view` as taken (or as emitted) and its name."""
    value = program.values[index]
    assert isinstance(value, TensorValue) and value.data is not None  # only constants are shared
    name = value.source.name if value.source is not None else f"constant value {index}"
    return storage_view(tensors.get(index, value.data), value.spec.device), name


def check_still_shared(program: Program, aliases: Mapping[int, int], tensors: Mapping[int, torch.Tensor]) -> None:
    """Refuse a reload whose tensors no longer share what the loaded method shares (a tied weight untied)."""
    for index, holder in aliases.items():
        (view, name), (holder_view, holder_name) = _held(program, tensors, index), _held(program, tensors, holder)
        if view != holder_view:
            raise LoadError(
                Error.InvalidProgram,
                f"Cannot reload the constants: {name} and {holder_name} were one tensor at load (tied), so the "
                "method holds one copy of them, and the model now holds two different tensors. Call "
                "load_method(...) again to load them apart.",
            )


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
