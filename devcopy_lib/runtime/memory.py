"""The memory a loaded method owns: planned arenas, device constants and caller buffers, freed together.

Host memory comes from the CUDA allocator's `allocate_host` when one is registered (pinned on real CUDA, so copies
run at the hardware limit), device memory from the allocator registered for the device's type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

from ..devices.allocator import DeviceAllocator, DevicePtr
from ..devices.device import Device, DeviceType
from ..devices.registry import get_device_allocator, registered_allocators
from ..tensors.error import Error
from .failures import LoadError

ALIGNMENT = 64
_T = TypeVar("_T")


def allocator_for(device: Device) -> DeviceAllocator:
    """The allocator registered for `device`'s type, or LoadError NotFound naming what is registered."""
    allocator = get_device_allocator(device.type)
    if allocator is None:
        registered = ", ".join(t.name for t in registered_allocators()) or "none"
        raise LoadError(
            Error.NotFound,
            f"No DeviceAllocator registered for {device.type.name} (needed for {device}); registered: {registered}. "
            "To fix, register one (register_device_allocator(SimulatedCudaAllocator()), or pass backend=...).",
        )
    return allocator


class OwnedMemory:
    """Every buffer a method allocated, so that `free()` returns each exactly once, in reverse order."""

    def __init__(self) -> None:
        self._device: list[tuple[DeviceAllocator, DevicePtr]] = []
        self._host_allocator = get_device_allocator(DeviceType.CUDA)

    def host(self, nbytes: int) -> np.ndarray:
        """A host buffer (a uint8 array), pinned when a CUDA allocator can pin it."""
        allocator = self._host_allocator
        if allocator is None:  # a CPU-only program with nothing registered: plain host memory
            return np.empty(nbytes, dtype=np.uint8)
        return self._guarded(lambda: allocator.allocate_host(nbytes, ALIGNMENT), nbytes, "host")

    def device(self, device: Device, nbytes: int) -> DevicePtr:
        """`nbytes` on `device` through its registered allocator."""
        allocator = allocator_for(device)
        ptr = self._guarded(lambda: allocator.allocate(nbytes, device.index, ALIGNMENT), nbytes, str(device))
        self._device.append((allocator, ptr))
        return ptr

    @staticmethod
    def _guarded(allocate: Callable[[], _T], nbytes: int, where: str) -> _T:
        try:
            return allocate()
        except (MemoryError, ValueError, RuntimeError) as exc:
            raise LoadError(
                Error.MemoryAllocationFailed,
                f"Could not allocate {nbytes} bytes on {where} while loading the method: {exc}",
            ) from exc

    def free(self) -> None:
        """Free every device buffer (host buffers go with their arrays); safe to call twice. An allocator closed
        first freed its buffers already: nothing to do for those."""
        errors = []
        while self._device:
            allocator, ptr = self._device.pop()
            if allocator.closed:
                continue
            try:
                allocator.deallocate(ptr, ptr.index)
            except Exception as exc:  # keep freeing the rest; report the first failure afterwards
                errors.append(exc)
        if errors:
            raise RuntimeError(f"{len(errors)} device buffer(s) failed to free: {errors[0]}") from errors[0]
