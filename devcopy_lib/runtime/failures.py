"""Exceptions a method raises when loading or executing fails; `kind` is ExecuTorch's error name."""
from __future__ import annotations

from ..tensors.error import Error


class MethodError(RuntimeError):
    """A method failed with ExecuTorch error `error`; `kind` is its name (the JSON error object's kind)."""

    def __init__(self, error: Error, message: str) -> None:
        super().__init__(message)
        self.error = Error(error)
        self.kind = self.error.name


class LoadError(MethodError):
    """Loading a method failed: no allocator (NotFound), no memory (MemoryAllocationFailed), a bad program."""


class ExecutionError(MethodError):
    """Running a loaded method failed: a kernel recorded a failure or a delegate raised."""
