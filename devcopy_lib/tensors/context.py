"""`KernelRuntimeContext`: how a portable kernel reports failure without raising, as in ExecuTorch."""

from __future__ import annotations

from .error import Error


class KernelRuntimeContext:
    """Holds the failure state of one kernel call; like ExecuTorch's, `fail` overwrites it (the last failure wins)."""

    def __init__(self) -> None:
        self._failure = Error.Ok
        self.message = ""

    def fail(self, error: Error, message: str = "") -> None:
        """Record a failure kind (not Ok) and, optionally, a message saying what failed and how to fix it."""
        error = Error(error)
        if error is Error.Ok:
            raise ValueError("fail(Error.Ok) is meaningless: pass the failure kind, e.g. Error.InvalidArgument")
        self._failure, self.message = error, message

    def failure_state(self) -> Error:
        return self._failure

    @property
    def ok(self) -> bool:
        return self._failure is Error.Ok

    def __repr__(self) -> str:
        detail = f": {self.message}" if self.message else ""
        return f"KernelRuntimeContext({self._failure.name}{detail})"
