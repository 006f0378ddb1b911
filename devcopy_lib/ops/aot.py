"""The ahead-of-time `et_copy` namespace in `torch.library`: the one module that defines the device-copy ops.

- `et_copy::_h2d_copy(Tensor self) -> Tensor`: host -> device. At trace time everything is on CPU, so it is a
  clone; at run time the planned `out` lives on the device and the kernel copies through the DeviceAllocator.
- `et_copy::_d2h_copy(Tensor self) -> Tensor`: device -> host, the mirror.
- `.out` overloads (`Tensor(a!) out`): what the runtime calls; at trace time `out.copy_(self)`.
- `et_copy::_d2d_copy(Tensor self) -> Tensor` (+ `.out`): devcopy's addition, not in ExecuTorch: device -> device
  (cuda:0 -> cuda:1) in one direct peer copy instead of a D2H + H2D host hop; a clone at trace time too; at run time
  both tensors live on devices and the kernel copies through `DeviceAllocator.copy_device_to_device`.

ExecuTorch's Python package defines the same namespace with `Library("et_copy", "DEF")`, and a second `DEF` in one
process fails. So: if the ops already exist (ExecuTorch imported first), they are reused; if ExecuTorch is installed
but not yet imported, its op-definition module is imported so that a later `import executorch.exir` finds them
defined; only without ExecuTorch does devcopy define the namespace itself. ExecuTorch's DEF does not define
`_d2d_copy`, so devcopy defines it in a FRAGMENT, whoever DEF'd the namespace, once per process (whatever the import
order). This module only defines; `kernels/registration.py` registers devcopy's kernels for the `.out` overloads.
Import this module for its side effect.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import torch

from ..names import COPY_OP, CopyOp, Direction

NAMESPACE = "et_copy"


def _schemas(op: CopyOp) -> dict[str, str]:
    """The functional op and its `.out` overload, name -> schema: `_h2d_copy(Tensor self) -> Tensor`, ..."""
    functional = op.schema_name.partition(".")[0]
    return {
        functional: f"{functional}(Tensor self) -> Tensor",
        op.schema_name: f"{op.schema_name}(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    }


SCHEMAS = {**_schemas(COPY_OP[Direction.H2D]), **_schemas(COPY_OP[Direction.D2H])}
# devcopy's addition, defined in a FRAGMENT (ExecuTorch's DEF does not have it)
PEER_SCHEMAS = _schemas(COPY_OP[Direction.D2D])
EXECUTORCH_PACKAGE = "executorch"  # names: the package's import name, not the strategy
EXECUTORCH_REGISTRY = f"{EXECUTORCH_PACKAGE}.exir.passes._device_copy_ops_registry"

_own_library = None  # kept alive: dropping a torch.library.Library unregisters its definitions


def _defined() -> bool:
    try:
        torch.ops.et_copy._h2d_copy.default  # noqa: B018 - existence check
        torch.ops.et_copy._d2h_copy.out  # noqa: B018
        return True
    except (AttributeError, RuntimeError):
        return False


def _functional(self: torch.Tensor) -> torch.Tensor:
    return self.clone()


def _out_variant(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    out.copy_(self)
    return out


def _define(lib: torch.library.Library, schemas: dict[str, str]) -> None:
    """Define `schemas` in `lib` with their trace-time meaning (functional: clone; `.out`: `out.copy_(self)`)."""
    # torch.library.Library's methods are unannotated in torch
    for schema in schemas.values():
        lib.define(schema)  # type: ignore[no-untyped-call]
    for name in schemas:
        kernel = _out_variant if name.endswith(".out") else _functional
        lib.impl(name, kernel, "CompositeImplicitAutograd")  # type: ignore[no-untyped-call]


def _define_own() -> None:
    """devcopy's own definitions, identical to ExecuTorch's (used when ExecuTorch is not installed)."""
    global _own_library
    _own_library = torch.library.Library(NAMESPACE, "DEF")  # type: ignore[no-untyped-call]  # unannotated in torch
    _define(_own_library, SCHEMAS)


def _load_executorch_registry(package_dir: str) -> None:
    """Run ExecuTorch's op-definition module alone (it needs only torch), under its own module name, so that
    `import executorch.exir` later finds it in sys.modules instead of defining the namespace a second time."""
    path = os.path.join(package_dir, "exir", "passes", "_device_copy_ops_registry.py")
    spec = importlib.util.spec_from_file_location(EXECUTORCH_REGISTRY, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"ExecuTorch's op registry {path} cannot be imported", name=EXECUTORCH_REGISTRY, path=path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[EXECUTORCH_REGISTRY] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[EXECUTORCH_REGISTRY]
        raise


def ensure_defined() -> str:
    """Make sure `torch.ops.et_copy` exists; returns who defined it: 'existing', 'executorch' or 'devcopy'."""
    if _defined():
        return "existing"
    executorch = importlib.util.find_spec(EXECUTORCH_PACKAGE)
    if executorch is not None and executorch.submodule_search_locations:
        _load_executorch_registry(executorch.submodule_search_locations[0])
        return EXECUTORCH_PACKAGE
    _define_own()
    return "devcopy"


DEFINED_BY = ensure_defined()
h2d_copy = torch.ops.et_copy._h2d_copy
d2h_copy = torch.ops.et_copy._d2h_copy


def _define_peer() -> torch.library.Library:
    """devcopy's `_d2d_copy` in a FRAGMENT, whoever DEF'd the namespace (ExecuTorch's DEF does not have it)."""
    lib = torch.library.Library(NAMESPACE, "FRAGMENT")  # type: ignore[no-untyped-call]  # unannotated in torch
    if not hasattr(torch.ops.et_copy, "_d2d_copy"):
        _define(lib, PEER_SCHEMAS)
    return lib


_peer_library = _define_peer()  # kept alive: dropping it unregisters devcopy's _d2d_copy
d2d_copy = torch.ops.et_copy._d2d_copy
