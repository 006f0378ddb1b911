"""The errors every floor raises: a public call given a value (`InvalidArgumentError`, kind `usage`) or a type
(`InvalidArgumentTypeError`) it does not take; the message names the argument, the value and the fix.

These two are the only failures all layers share, so they live here, on the floor just above `names`; each layer's
own failures live beside it (`devices/errors.py`, `runtime/failures.py`, `placement.place.PlacementError`, ...;
docs/design.md §8). They subclass ValueError / TypeError, so code that caught those keeps working.
"""

from .names import ErrorKind


class InvalidArgumentError(ValueError):
    """A public call was given a value it cannot take; the message names the argument, the value and the fix."""

    kind = ErrorKind.USAGE


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """A public call was given an argument of a type it does not take (also a TypeError)."""
