"""Devices, allocators and their registry; knows nothing of the runtime above it."""

from .allocator import DeviceAllocator, DeviceBlock, DevicePtr
from .device import CPU, Device, DeviceType
from .errors import DeviceCopyError, DeviceMemoryAccessError
from .registry import get_device_allocator, register_device_allocator, registered_allocators, scoped_allocators
from .simulated import SimulatedCudaAllocator

__all__ = [
    "CPU",
    "Device",
    "DeviceAllocator",
    "DeviceBlock",
    "DeviceCopyError",
    "DeviceMemoryAccessError",
    "DevicePtr",
    "DeviceType",
    "SimulatedCudaAllocator",
    "get_device_allocator",
    "register_device_allocator",
    "registered_allocators",
    "scoped_allocators",
]
