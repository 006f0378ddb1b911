"""What this install runs on (what `devcopy info` reports): the backend, whether its accelerator is simulated, the
devices it sees, and the versions of the packages devcopy works with."""

from __future__ import annotations

import importlib.metadata
import platform
from typing import Any

from ..devices.backend import make_allocator, select_backend

PACKAGES = (
    "devcopy",
    "torch",
    "numpy",
    "cupy-cuda13x",
    "cupy-cuda12x",
    "cupy",
    "executorch",  # names: the package, not the placement strategy
    "ipywidgets",
    "jupyterlab",
)


def describe_environment(backend: str | None = None) -> dict[str, Any]:
    """The backend (`select_backend(backend)`), whether it is simulated, its devices, Python's version and those of
    the PACKAGES installed."""
    name = select_backend(backend)
    with make_allocator(name) as allocator:
        devices = allocator.describe_devices()
        simulated = not allocator.capabilities.real_device
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "ok": True,
        "backend": name,
        "simulated": simulated,
        "devices": devices,
        "python": platform.python_version(),
        "versions": versions,
    }
