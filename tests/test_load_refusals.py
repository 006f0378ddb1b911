"""Public loaders and a loaded Method refuse what they cannot take with devcopy's error kinds, naming the value and
the fix: wrong `libs`, `mode`, `backend` or program; pickling a Method; a sparse input. Closing a Method after its
allocator was closed is quiet."""

from __future__ import annotations

import functools
import pickle

import pytest
import torch

from devcopy_lib import models
from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.devices.backend import select_backend
from devcopy_lib.load import load_method
from devcopy_lib.passes.lower import export_and_lower
from devcopy_lib.passes.placement import place_devices
from devcopy_lib.runtime.failures import ExecutionError


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
