"""devcopy: the et_copy device-copy ops, their registration in portable and ATen-mode runtimes, device placement
over exported PyTorch programs, and copy timing.

The public names load lazily, so `import devcopy_lib` is cheap and imports neither ipywidgets nor matplotlib.
docs/design.md §6 lists what is public (these names, `devcopy_lib.names`, `models`,
`reference` and the timing modules of `devcopy_lib.bench`); its §3 gives the reading order.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (docs/design.md §6)
_EXPORTS = {
    "DeviceType": "devices.device",
    "Device": "devices.device",
    "DeviceAllocator": "devices.allocator",
    "DevicePtr": "devices.allocator",
    "register_device_allocator": "devices.registry",
    "get_device_allocator": "devices.registry",
    "scoped_allocators": "devices.registry",
    "SimulatedCudaAllocator": "devices.simulated",
    "CupyCudaAllocator": "devices.cupy_cuda",
    "select_backend": "devices.backend",
    "make_allocator": "devices.backend",
    "PortableTensor": "tensors.tensor",
    "TensorShapeDynamism": "tensors.tensor",
    "KernelRuntimeContext": "tensors.context",
    "Error": "tensors.error",
    "MissingOperatorError": "runtime.resolve",
    "resolve_operators": "runtime.resolve",
    "portable_lib": "runtime.libs",
    "aten_lib": "runtime.libs",
    "native_lib": "runtime.libs",
    "lib_by_name": "runtime.libs",
    "registration_status": "runtime.libs",
    "load_method": "load",
    "eager_program": "runtime.eager",
    "compare_outputs": "compare",
    "export_and_lower": "passes.lower",
    "export_program": "passes.lower",
    "lower": "passes.lower",
    "DEFAULT_DELEGATE_OPS": "passes.lower",
    "place_devices": "passes.placement",
    "PlaceDevicesPass": "passes.placement",
    "PlacementError": "passes.placement",
    "copy_graph_module": "passes.placement",
    "overload_name": "passes.ops",
    "node_kind": "passes.nodes",
    "delegate_of": "passes.delegate",
    "delegate_source": "passes.delegate",
    "emit": "passes.emit",
    "PlacementReport": "passes.report",
    "executorch_pte": "passes.pte_backend",
    "open_pte": "passes.pte",
    "memory_picture": "passes.memory_picture",
    "pte_registration": "passes.pte",
    "PteProgram": "passes.pte",
    "PteLoadError": "passes.pte",
    "PteUsageError": "passes.pte",
    "pte_program": "passes.pte_run",
    "pte_inputs": "passes.pte_run",
    "PteUnsupportedError": "passes.pte_run",
    "run_in_executorch": "passes.pte_executorch",
    "export_report": "passes.report_export",
    "report_document": "passes.report_export",
    "diff_html": "passes.report_export",
    "placement_diff": "passes.placement_diff",
    "diff_lines": "passes.placement_diff",
    "chrome_trace": "runtime.trace",
    "profile_trace": "runtime.trace",
    "write_trace": "runtime.trace",
}

# public modules reached as attributes: the sample models, and ExecuTorch itself as the reference (`reference` extra)
_MODULES = {"models": ".models", "reference": ".passes.executorch_reference"}

__all__ = sorted([*_EXPORTS, *_MODULES])  # noqa: PLE0605 - built from the tables, so they cannot drift apart


def __getattr__(name: str) -> Any:  # the lazily imported exports: functions, classes, modules
    if name in _MODULES:
        return importlib.import_module(_MODULES[name], __name__)
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'devcopy_lib' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
