"""Op YAML files in ExecuTorch's shape (`func:` schema or `op:` ATen name, plus `kernels:` entries with `arg_meta`
and `kernel_name`), validated on load and parsed with torchgen's schema parser."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch
import torchgen
import yaml
from torchgen.model import FunctionSchema

from ..names import ErrorKind

HERE = os.path.dirname(os.path.abspath(__file__))
ET_COPY_OPS_YAML = os.path.join(HERE, "et_copy_ops.yaml")
FUNCTIONS_YAML = os.path.join(HERE, "functions.yaml")
PEER_COPY_OPS_YAML = os.path.join(HERE, "peer_copy_ops.yaml")  # devcopy's et_copy::_d2d_copy.out for ATen mode
NATIVE_FUNCTIONS_YAML = os.path.join(
    os.path.dirname(torchgen.__file__),
    "packaged",
    "ATen",
    "native",  # names: torchgen's folder, not the lib
    "native_functions.yaml",
)
ATEN_NAMESPACE = "aten"  # names: the namespace of ATen's ops (`aten::add.out`), not the runtime mode

ENTRY_KEYS = ("func", "op", "kernels", "type_alias", "dim_order_alias")
KERNEL_KEYS = ("arg_meta", "kernel_name")


class OpYamlError(ValueError):
    """A malformed op YAML entry; the message names the file, the entry index and the key."""

    kind = ErrorKind.USAGE


@dataclass(frozen=True)
class KernelEntry:
    key: str  # "" = fallback (arg_meta null)
    kernel_name: str


@dataclass(frozen=True)
class OpEntry:
    """One op of a YAML file: its runtime name (`ns::name.overload`), schema, kernels and where it came from."""

    name: str
    func: str  # the schema text without namespace, parsed lazily by `schema`
    kernels: tuple[KernelEntry, ...]
    source: str
    index: int

    @property
    def schema(self) -> FunctionSchema:
        return parse_schema(self.func)


@functools.cache
def parse_schema(func: str) -> FunctionSchema:
    return FunctionSchema.parse(func)


def split_namespace(text: str) -> tuple[str, str]:
    """`et_copy::_h2d_copy.out(...)` -> ("et_copy", "_h2d_copy.out(...)"); no namespace means aten."""
    head = text.split("(", 1)[0]
    if "::" in head:
        namespace, rest = text.split("::", 1)
        return namespace.strip(), rest.strip()
    return ATEN_NAMESPACE, text.strip()


def runtime_name(namespace: str, func: str) -> str:
    """The runtime operator name ExecuTorch uses: `aten::add.out`, `aten::relu` (no `.default`)."""
    return f"{namespace}::{func.split('(', 1)[0].strip()}"


@functools.cache
def native_functions() -> dict[str, str | None]:
    """ATen's ops in torchgen's packaged native_functions.yaml, `autogen:` variants included (read once): runtime
    name -> schema text, or None for an autogen op (its schema comes from PyTorch on demand: `native_schema`)."""
    with open(NATIVE_FUNCTIONS_YAML) as f:
        entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    found: dict[str, str | None] = {}
    for entry in entries:
        found[runtime_name(ATEN_NAMESPACE, entry["func"])] = entry["func"]
        for generated in str(entry.get("autogen", "")).split(","):
            if generated.strip():
                found.setdefault(f"aten::{generated.strip()}", None)
    return found


@functools.cache
def native_schema(name: str) -> str | None:
    """The schema text of ATen op `name` (`aten::relu.out`), from the YAML or else from PyTorch's own registry."""
    if name not in native_functions():
        return None
    if native_functions()[name]:
        return native_functions()[name]
    base, _, overload = name.partition(".")
    for schema in torch._C._jit_get_schemas_for_operator(base):
        if schema.overload_name == overload:
            return split_namespace(str(schema))[1]
    return None


def _bad(path: str, index: int, message: str) -> OpYamlError:
    return OpYamlError(f"{path}: entry {index}: {message}")


def _kernel_entries(path: str, index: int, kernels: object) -> tuple[KernelEntry, ...]:
    if not isinstance(kernels, list) or not kernels:
        raise _bad(path, index, f"'kernels' must be a non-empty list of {{arg_meta, kernel_name}}, got {kernels!r}")
    found = []
    for k, kernel in enumerate(kernels):
        if not isinstance(kernel, dict):
            raise _bad(path, index, f"kernels[{k}] must be a mapping with keys {', '.join(KERNEL_KEYS)}")
        unknown = sorted(set(kernel) - set(KERNEL_KEYS))
        if unknown:
            raise _bad(path, index, f"kernels[{k}]: unknown key {unknown[0]!r}. Valid keys: {', '.join(KERNEL_KEYS)}")
        if not isinstance(kernel.get("kernel_name"), str):
            raise _bad(path, index, f"kernels[{k}]: key 'kernel_name' is missing or not a string")
        arg_meta = kernel.get("arg_meta")
        if arg_meta is not None and not isinstance(arg_meta, str):
            raise _bad(
                path,
                index,
                f"kernels[{k}]: key 'arg_meta' must be null (fallback) or a kernel-key string "
                f"like 'v1/6;0,1|6;0,1', got {arg_meta!r}",
            )
        found.append(KernelEntry(arg_meta or "", kernel["kernel_name"]))
    return tuple(found)


def _entry(path: str, index: int, raw: object) -> OpEntry:
    if not isinstance(raw, dict):
        raise _bad(path, index, f"expected a mapping with keys {', '.join(ENTRY_KEYS)}, got {raw!r}")
    unknown = sorted(set(raw) - set(ENTRY_KEYS))
    if unknown:
        raise _bad(path, index, f"unknown key {unknown[0]!r}. Valid keys: {', '.join(ENTRY_KEYS)}")
    if ("func" in raw) == ("op" in raw):
        raise _bad(path, index, "exactly one of key 'func' (a full schema) or key 'op' (an ATen op name) is needed")
    if "op" in raw:
        name = f"aten::{raw['op']}"
        func = native_schema(name)
        if func is None:
            raise _bad(
                path,
                index,
                f"key 'op': {raw['op']!r} is not in ATen's native_functions.yaml; "
                "use 'func:' with a full schema for a custom op",
            )
    else:
        namespace, func = split_namespace(str(raw["func"]))
        name = runtime_name(namespace, func)
    try:
        parse_schema(func)
    except Exception as exc:  # torchgen raises AssertionError / RuntimeError on a bad schema
        raise _bad(path, index, f"key 'func': cannot parse schema {func!r}: {exc}") from None
    return OpEntry(name, func, _kernel_entries(path, index, raw.get("kernels")), path, index)


@functools.cache
def load_ops_yaml(path: str) -> tuple[OpEntry, ...]:
    """Load and validate an op YAML file (cached by path)."""
    with open(path) as f:
        raw = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or []
    if not isinstance(raw, list):
        raise OpYamlError(f"{path}: the top level must be a list of op entries, got {type(raw).__name__}")
    return tuple(_entry(path, i, item) for i, item in enumerate(raw))
