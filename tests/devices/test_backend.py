"""Backend selection: automatic, DEVCOPY_BACKEND, explicit arguments."""

import pytest

from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.devices.backend import cuda_available, ensure_cuda_allocator, make_allocator, select_backend


def test_auto_picks_cupy_only_with_cuda(monkeypatch):
    monkeypatch.delenv("DEVCOPY_BACKEND", raising=False)
    assert select_backend() == ("cupy" if cuda_available() else "simulated")


def test_environment_overrides_auto(monkeypatch):
    monkeypatch.setenv("DEVCOPY_BACKEND", "simulated")
    assert select_backend(None) == "simulated"
    assert isinstance(make_allocator(), SimulatedCudaAllocator)


def test_unknown_backend_names_the_valid_ones():
    with pytest.raises(ValueError, match="Valid: auto, cupy, simulated"):
        select_backend("rocm")


@pytest.mark.skipif(cuda_available(), reason="checks the refusal on a machine without CUDA")
def test_cupy_without_cuda_is_refused_with_the_fix():
    with pytest.raises(RuntimeError, match="--backend simulated"):
        select_backend("cupy")


def test_ensure_registers_once_and_refuses_a_mismatch():
    with scoped_allocators():
        first = ensure_cuda_allocator("simulated")
        assert ensure_cuda_allocator("simulated") is first
    with scoped_allocators(SimulatedCudaAllocator()):
        if cuda_available():
            with pytest.raises(RuntimeError, match="scoped_allocators"):
                ensure_cuda_allocator("cupy")
