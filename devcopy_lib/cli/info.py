"""`devcopy info`: which backend runs, which devices it sees, which library versions."""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
from typing import Any

from ..devices.backend import make_allocator, select_backend
from .common import Outcome, add_backend, add_json, backend_name

_PACKAGES = (
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


def collect(backend: str | None = None) -> dict[str, Any]:
    """What `devcopy info` reports: the backend, whether it is simulated, its devices, library versions."""
    name = select_backend(backend)
    with make_allocator(name) as allocator:
        devices = allocator.describe_devices()
        simulated = not allocator.capabilities.real_device
    versions = {}
    for package in _PACKAGES:
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


def _render(info: dict[str, Any]) -> str:
    """The text form of `collect()`."""
    lines = [
        f"backend: {info['backend']}" + ("  (simulated accelerator: host memory, no GPU)" if info["simulated"] else "")
    ]
    lines += [f"  {d['device']}: {d['name']}" for d in info["devices"]]
    lines.append(f"python {info['python']}; " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> Outcome:
    """The `info` subcommand."""
    return Outcome(collect(backend_name(args)), _render)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `devcopy info`."""
    parser = subparsers.add_parser("info", help="backend, devices and library versions")
    add_backend(parser)
    add_json(parser)
    parser.set_defaults(handler=run)
