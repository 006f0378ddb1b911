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
    "export_and_lower": "lowering.lower",
    "export_program": "lowering.lower",
    "lower": "lowering.lower",
    "DEFAULT_DELEGATE_OPS": "lowering.lower",
    "place_devices": "placement.place",
    "PlaceDevicesPass": "placement.place",
    "PlacementError": "placement.place",
    "copy_graph_module": "placement.place",
    "overload_name": "lowering.ops",
    "node_kind": "lowering.nodes",
    "delegate_of": "lowering.delegate",
    "delegate_source": "lowering.delegate",
    "graph_fact": "lowering.delegate",
    "emit": "emitter.emit",
    "PlacementReport": "placement.report",
    "executorch_pte": "pte.backend",
    "open_pte": "pte.reader",
    "memory_picture": "memory_lanes",
    "pte_registration": "pte.registration",
    "PteProgram": "pte.reader",
    "PteLoadError": "pte.reader",
    "PteUsageError": "pte.reader",
    "pte_program": "pte.convert",
    "pte_inputs": "pte.convert",
    "PteUnsupportedError": "pte.convert",
    "run_in_executorch": "pte.executorch_runtime",
    "export_report": "placement.report_export",
    "report_document": "placement.report_export",
    "diff_html": "placement.report_export",
    "placement_diff": "placement.diff",
    "diff_lines": "placement.diff",
    "chrome_trace": "runtime.trace",
    "profile_trace": "runtime.trace",
    "write_trace": "runtime.trace",
}

# public modules reached as attributes: the sample models, and ExecuTorch itself as the reference (`reference` extra)
_MODULES = {"models": ".models", "reference": ".pte.executorch_reference"}

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
