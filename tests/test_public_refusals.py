"""Public constructors, loaders and a loaded Method refuse what they cannot take with devcopy's error kinds, naming
the value and the fix: wrong `libs`, `mode`, `backend`, program, tensor arguments; pickling a Method; a sparse input.
Closing a Method after its allocator was closed is quiet."""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib import models
from devcopy_lib.devices import (
    Device,
    DeviceType,
    SimulatedCudaAllocator,
    get_device_allocator,
    scoped_allocators,
)
from devcopy_lib.devices.backend import select_backend
from devcopy_lib.devices.copy_engine import EngineConfig
from devcopy_lib.emitter.emit import emit
from devcopy_lib.load import load_method
from devcopy_lib.lowering.lower import export_and_lower, export_program, lower
from devcopy_lib.names import ERROR_KINDS
from devcopy_lib.placement.place import place_devices
from devcopy_lib.runtime.eager import eager_program
from devcopy_lib.runtime.failures import ExecutionError
from devcopy_lib.runtime.libs import lib_by_name, registration_status
from devcopy_lib.runtime.resolve import resolve_operators
from devcopy_lib.tensors.tensor import PortableTensor, TensorShapeDynamism


@functools.cache
def _placed():
    module, inputs = models.MODELS["add"]()
    return place_devices(export_and_lower(module, inputs)), inputs


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"libs": 5}, TypeError, "libs must be lib names .* got int 5"),
        ({"libs": [None]}, TypeError, "got NoneType None"),
        ({"libs": [5]}, TypeError, "got int 5; pass for example libs=\\['portable'\\]"),
        ({"libs": ["nope"]}, ValueError, "Unknown lib 'nope'. Valid libs: portable, native"),
        ({"mode": "fast"}, ValueError, "Unknown mode 'fast'. Valid: portable, aten"),
        ({"backend": 5}, TypeError, "backend must be a name .* got int 5"),
    ],
)
def test_load_method_refuses_wrong_arguments_with_the_usage_kind(kwargs, error, message):
    with scoped_allocators(SimulatedCudaAllocator()), pytest.raises(error, match=message) as info:
        load_method(_placed()[0], **kwargs)
    assert info.value.kind == "usage"


def test_load_method_refuses_what_is_not_a_program():
    with pytest.raises(TypeError, match="load_method takes a placed program .* got int") as info:
        load_method(5)
    assert info.value.kind == "usage"


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (lambda: lib_by_name(5), ValueError, "Unknown lib 5. Valid libs: portable"),
        (lambda: registration_status(libs=[None]), TypeError, "libs must be lib names .* got NoneType"),
        (lambda: registration_status(ops=5), TypeError, "ops must be op names or glob patterns"),
        (lambda: resolve_operators(5, ["portable"]), TypeError, "resolve_operators takes a Program"),
        (lambda: resolve_operators(["aten::add.out"], [5]), TypeError, "libs must be lib names .* got int 5"),
        (lambda: eager_program(5), TypeError, "eager_program takes an emitted Program, got int"),
    ],
)
def test_the_runtimes_public_loaders_refuse_wrong_arguments_with_the_usage_kind(bad, error, message):
    with pytest.raises(error, match=message) as info:
        bad()
    assert info.value.kind == "usage"


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (lambda: PortableTensor("junk", [2], _bytes(8)), TypeError, "dtype must be a torch.dtype .* got 'junk'"),
        (lambda: PortableTensor(torch.float32, [-1], _bytes(8)), ValueError, r"sizes must be ints >= 0, got \(-1,\)"),
        (lambda: PortableTensor(torch.float32, 5, _bytes(8)), TypeError, "sizes must be a sequence of ints"),
        (lambda: PortableTensor(torch.float32, [2], 5), TypeError, "storage is a contiguous 1-D np.uint8 array"),
        (lambda: PortableTensor(torch.float32, [2], _bytes(8), capacity=1.5), TypeError, "capacity is a number"),
        (lambda: PortableTensor(torch.float32, [4], _bytes(8)), ValueError, "storage holds 8 bytes but the tensor"),
        (lambda: TensorShapeDynamism(9), ValueError, "9 is not a TensorShapeDynamism; pass one of STATIC"),
    ],
)
def test_tensor_constructors_refuse_wrong_arguments_with_the_usage_kind(bad, error, message):
    with pytest.raises(error, match=message) as info:
        bad()
    assert info.value.kind == "usage"


def _bytes(n):
    return np.zeros(n, np.uint8)


def test_select_backend_refuses_a_non_name():
    with pytest.raises(TypeError, match="backend must be a name") as info:
        select_backend(["cupy"])
    assert info.value.kind == "usage"


def test_a_method_refuses_pickling_and_says_what_to_pickle():
    with scoped_allocators(SimulatedCudaAllocator()), load_method(_placed()[0]) as method:
        with pytest.raises(TypeError, match="holds device memory .* Pickle the Program") as info:
            pickle.dumps(method)
        assert info.value.kind == "usage"
        pickle.dumps(method.program)  # what the message says to pickle instead


def test_closing_a_method_after_its_allocator_is_quiet():
    allocator = SimulatedCudaAllocator()
    with scoped_allocators(allocator):
        method = load_method(_placed()[0])
    allocator.close()
    method.close()
    assert allocator.live_allocations() == 0


def test_a_sparse_input_is_refused_with_the_fix():
    placed, inputs = _placed()
    with scoped_allocators(SimulatedCudaAllocator()), load_method(placed) as method:
        sparse = [x.to_sparse() for x in inputs]
        with pytest.raises(ExecutionError, match=r"input 0: .*\(torch.sparse_coo: pass tensor.to_dense\(\)\)"):
            method(*sparse)
        assert torch.equal(method(*inputs)[0], models.MODELS["add"]()[0](*inputs))


JUNK = st.one_of(
    st.integers(-(1 << 70), 1 << 70),
    st.floats(),
    st.none(),
    st.text(max_size=6),
    st.booleans(),
    st.lists(st.one_of(st.integers(-3, 3), st.none(), st.text(max_size=2)), max_size=3),
    st.builds(object),
)
# public constructors, loaders and passes, each called with one junk argument in one of its places
JUNK_CALLS = {
    "Device": lambda v: Device(DeviceType.CUDA, v),
    "Device type": lambda v: Device(v, 0),
    "Device.parse": Device.parse,
    "DeviceType": DeviceType,
    "SimulatedCudaAllocator": lambda v: SimulatedCudaAllocator(peer_access=v),
    "EngineConfig": lambda v: EngineConfig(threads=v),
    "select_backend": select_backend,
    "get_device_allocator": get_device_allocator,
    "register_device_allocator": lambda v: scoped_allocators(v).__enter__(),
    "PortableTensor dtype": lambda v: PortableTensor(v, [2], _bytes(8)),
    "PortableTensor sizes": lambda v: PortableTensor(torch.uint8, v, _bytes(8)),
    "PortableTensor storage": lambda v: PortableTensor(torch.uint8, [2], v),
    "PortableTensor device": lambda v: PortableTensor(torch.uint8, [2], _bytes(8), device=v),
    "PortableTensor capacity": lambda v: PortableTensor(torch.uint8, [2], _bytes(8), capacity=v),
    "TensorShapeDynamism": TensorShapeDynamism,
    "lib_by_name": lib_by_name,
    "registration_status libs": lambda v: registration_status(libs=v),
    "registration_status ops": lambda v: registration_status(libs=["portable"], ops=v),
    "resolve_operators": lambda v: resolve_operators(v, ["portable"]),
    "eager_program": eager_program,
    "load_method placed": load_method,
    "load_method mode": lambda v: load_method(_placed()[0], mode=v),
    "load_method libs": lambda v: load_method(_placed()[0], libs=v),
    "load_method backend": lambda v: load_method(_placed()[0], backend=v),
    "export_program model": lambda v: export_program(v, (torch.ones(2),)),
    "export_and_lower model": lambda v: export_and_lower(v, (torch.ones(2),)),
    "export_and_lower delegate_ops": lambda v: export_and_lower(*models.MODELS["add"](), delegate_ops=v),
    "export_and_lower partition": lambda v: export_and_lower(*models.MODELS["add"](), partition=v),
    "lower": lower,
    "place_devices": place_devices,
    "place_devices strategy": lambda v: place_devices(_lowered(), strategy=v),
    "emit": emit,
}


@functools.cache
def _lowered():
    return export_and_lower(*models.MODELS["add"]())


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(JUNK_CALLS)), JUNK)
def test_junk_arguments_to_public_constructors_and_loaders_are_refused_with_devcopy_kinds(name, value):
    """Whatever a caller passes, a refusal is one of devcopy's kinds (never a bare TypeError or AttributeError)."""
    with scoped_allocators(SimulatedCudaAllocator()):
        try:
            JUNK_CALLS[name](value)
        except Exception as exc:  # noqa: BLE001 - the kind is what is checked
            assert getattr(exc, "kind", None) in ERROR_KINDS, f"{name}({value!r}): {type(exc).__name__}: {exc}"
