"""One `DeviceAllocator` per device type, as ExecuTorch's runtime registry keeps them.

The registry is process-global; `scoped_allocators` pushes an override that only the calling thread sees, so a
notebook cell, a test or a background timing sweep can run with its own allocator while another thread's Method
keeps the allocator it was loaded with."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from ..errors import InvalidArgumentError, InvalidArgumentTypeError
from .allocator import DeviceAllocator
from .device import DeviceType

_registry: dict[DeviceType, DeviceAllocator] = {}
_local = threading.local()  # .scopes: this thread's stack of override registries (innermost last)


def _current() -> dict[DeviceType, DeviceAllocator]:
    """The registry the calling thread sees: its innermost scope, else the process-global one."""
    scopes = getattr(_local, "scopes", None)
    return scopes[-1] if scopes else _registry


def register_device_allocator(allocator: DeviceAllocator) -> None:
    """Register `allocator` for its device type (in the calling thread's innermost scope, if any); a second
    registration for the same type is an error."""
    if not isinstance(allocator, DeviceAllocator):
        raise InvalidArgumentTypeError(
            f"expected a DeviceAllocator, got {type(allocator).__name__}; pass make_allocator() or "
            "SimulatedCudaAllocator()"
        )
    registry = _current()
    dtype = allocator.device_type()
    if dtype in registry:
        raise InvalidArgumentError(
            f"A DeviceAllocator is already registered for {dtype.name} ({registry[dtype].backend}). "
            "One allocator per device type; use scoped_allocators() to swap one in for a test or a notebook."
        )
    registry[dtype] = allocator


def get_device_allocator(device_type: DeviceType) -> DeviceAllocator | None:
    """The allocator the calling thread sees for `device_type`, or None (the caller reports NotFound)."""
    return _current().get(DeviceType(device_type))


def registered_allocators() -> dict[DeviceType, DeviceAllocator]:
    return dict(_current())


@contextlib.contextmanager
def scoped_allocators(*allocators: DeviceAllocator) -> Iterator[None]:
    """In the calling thread only, run with a registry holding only `allocators`; other threads keep seeing theirs.
    The allocators stay open (their owner closes them)."""
    scopes = _local.__dict__.setdefault("scopes", [])
    scopes.append({})
    try:
        for allocator in allocators:
            register_device_allocator(allocator)
        yield
    finally:
        scopes.pop()
