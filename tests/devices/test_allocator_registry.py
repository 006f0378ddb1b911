"""One allocator per device type; lookups of unregistered types return None; scoped registries restore."""

import pytest

from devcopy_lib.devices import (
    DeviceType,
    SimulatedCudaAllocator,
    get_device_allocator,
    register_device_allocator,
    scoped_allocators,
)


def test_lookup_of_unregistered_type_returns_none():
    with scoped_allocators():
        assert get_device_allocator(DeviceType.CUDA) is None


def test_second_registration_for_a_type_is_an_error():
    with scoped_allocators(SimulatedCudaAllocator()):
        with pytest.raises(ValueError, match="already registered for CUDA"):
            register_device_allocator(SimulatedCudaAllocator())


def test_scoped_registry_restores_the_previous_one():
    outer = SimulatedCudaAllocator()
    with scoped_allocators(outer):
        with scoped_allocators(SimulatedCudaAllocator()):
            assert get_device_allocator(DeviceType.CUDA) is not outer
        assert get_device_allocator(DeviceType.CUDA) is outer


def test_registering_something_else_is_a_type_error():
    with scoped_allocators(), pytest.raises(TypeError, match="DeviceAllocator"):
        register_device_allocator(object())
