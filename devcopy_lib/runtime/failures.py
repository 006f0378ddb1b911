"""Exceptions a method raises when loading or executing fails: `kind` says which step (docs/design.md §8),
`error` is ExecuTorch's error code."""

from __future__ import annotations

from ..names import ErrorKind
from ..tensors.error import Error


class MethodError(RuntimeError):
    """A method failed with ExecuTorch error `error` (the JSON error object's `error_code` is its name)."""

    kind = ErrorKind.EXECUTION

    def __init__(self, error: Error, message: str) -> None:
        super().__init__(message)
        self.error = Error(error)


class LoadError(MethodError):
    """Loading a method failed: no allocator (NotFound), no memory (MemoryAllocationFailed), a bad program."""

    kind = ErrorKind.LOAD


class ExecutionError(MethodError):
    """Running a loaded method failed: a kernel recorded a failure or a delegate raised."""


class ConstantsChangedError(ExecutionError):
    """The model's parameters or buffers changed after the method was loaded (InvalidState): the method holds a
    snapshot taken at load and refuses to run rather than compute with weights the model no longer has.
    `changed` names each changed tensor as the model calls it."""

    def __init__(self, message: str, changed: tuple[str, ...]) -> None:
        super().__init__(Error.InvalidState, message)
        self.changed = changed
