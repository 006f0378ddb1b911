"""Backend selection: `cupy` where CUDA is available, else the `simulated` accelerator; overridable."""

from __future__ import annotations

import os

from ..errors import InvalidArgumentError, InvalidArgumentTypeError
from ..names import AUTO_BACKEND, BACKENDS, Backend
from .allocator import DeviceAllocator
from .capabilities import Capabilities
from .device import DeviceType
from .registry import get_device_allocator, register_device_allocator

ENV_VAR = "DEVCOPY_BACKEND"


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy
    except Exception:
        return False
    try:
        return bool(cupy.cuda.is_available())
    except Exception:
        return False


def select_backend(backend: str | None = None) -> Backend:
    """Resolve `backend` (None/'auto' reads DEVCOPY_BACKEND, then picks cupy when CUDA is available)."""
    if backend is not None and not isinstance(backend, str):
        raise InvalidArgumentTypeError(
            f"backend must be a name ({AUTO_BACKEND}, {', '.join(BACKENDS)}) or None, got {type(backend).__name__} "
            f"{backend!r:.40}"
        )
    choice = backend if backend not in (None, AUTO_BACKEND) else os.environ.get(ENV_VAR, AUTO_BACKEND) or AUTO_BACKEND
    choice = choice.strip().lower()
    if choice == AUTO_BACKEND:
        return Backend.CUPY if cuda_available() else Backend.SIMULATED
    if choice not in BACKENDS:
        raise InvalidArgumentError(
            f"Unknown backend {choice!r}. Valid: {AUTO_BACKEND}, {', '.join(BACKENDS)} (argument or ${ENV_VAR})"
        )
    if choice == Backend.CUPY and not cuda_available():
        raise RuntimeError(
            "Backend 'cupy' was asked for but CUDA is not available (CuPy missing or no GPU). "
            "Install the gpu extra on a CUDA machine, or use --backend simulated."
        )
    return Backend(choice)


def make_allocator(backend: str | None = None) -> DeviceAllocator:
    """A new CUDA allocator of the selected backend."""
    name = select_backend(backend)
    if name == Backend.CUPY:
        from .cupy_cuda import CupyCudaAllocator

        return CupyCudaAllocator()
    from .simulated import SimulatedCudaAllocator

    return SimulatedCudaAllocator()


def backend_capabilities(backend: str | None = None) -> Capabilities:
    """What the selected backend's allocator can do (pinned host memory, a device clock, ...), without making one:
    for code that describes a backend before any allocator exists (the cost model picks the host memory kind). A
    backend named outright is described even where it cannot run (pricing for the H200 from a laptop)."""
    name = Backend(backend) if backend in BACKENDS else select_backend(backend)
    if name == Backend.CUPY:
        from .cupy_cuda import CupyCudaAllocator

        return CupyCudaAllocator.capabilities
    from .simulated import SimulatedCudaAllocator

    return SimulatedCudaAllocator.capabilities


def ensure_cuda_allocator(backend: str | None = None) -> DeviceAllocator:
    """The registered CUDA allocator, registering one of the selected backend if none is; a mismatch is an error."""
    current = get_device_allocator(DeviceType.CUDA)
    wanted = select_backend(backend)
    if current is None:
        current = make_allocator(wanted)
        register_device_allocator(current)
    elif current.backend != wanted and backend not in (None, AUTO_BACKEND):
        raise RuntimeError(
            f"Backend {wanted!r} was asked for but a {current.backend!r} CUDA allocator is registered. "
            "Use scoped_allocators(...) to run with another backend."
        )
    return current
