"""One `DeviceAllocator` per device type, as ExecuTorch's runtime registry keeps them."""
from __future__ import annotations

import contextlib
from typing import Iterator

from .allocator import DeviceAllocator
from .device import DeviceType

_registry: dict[DeviceType, DeviceAllocator] = {}


def register_device_allocator(allocator: DeviceAllocator) -> None:
    """Register `allocator` for its device type; a second registration for the same type is an error."""
    if not isinstance(allocator, DeviceAllocator):
        raise TypeError(f"expected a DeviceAllocator, got {type(allocator).__name__}")
    dtype = allocator.device_type()
    if dtype in _registry:
        raise ValueError(
            f"A DeviceAllocator is already registered for {dtype.name} ({_registry[dtype].backend}). "
            "One allocator per device type; use scoped_allocators() to swap one in for a test or a notebook."
        )
    _registry[dtype] = allocator


def get_device_allocator(device_type: DeviceType) -> DeviceAllocator | None:
    """The allocator registered for `device_type`, or None (the caller reports NotFound)."""
    return _registry.get(DeviceType(device_type))


def registered_allocators() -> dict[DeviceType, DeviceAllocator]:
    return dict(_registry)


@contextlib.contextmanager
def scoped_allocators(*allocators: DeviceAllocator) -> Iterator[None]:
    """Run with an empty registry holding only `allocators`; the previous registry is restored afterwards."""
    saved = dict(_registry)
    _registry.clear()
    try:
        for allocator in allocators:
            register_device_allocator(allocator)
        yield
    finally:
        _registry.clear()
        _registry.update(saved)
