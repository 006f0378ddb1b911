"""The kernel libs, by name, and what they register.

- `portable` (portable mode): every entry of ops/functions.yaml: the et_copy portable kernels and the portable CPU
  ops computed through torch.ops.aten on zero-copy host views.
- `native` (ATen mode): every op of ATen's native_functions.yaml (torchgen's packaged copy), run by PyTorch, and
  the ExecuTorch-defined dim-order copies of ops/edge_dialect_aten_op.yaml (as ExecuTorch's ATen generated_lib links
  its edge_dialect_aten_op.yaml), run by kernels/dim_order.py.
- `device_copy_ops_aten_lib` (ATen mode): ops/et_copy_ops.yaml through the custom-op path, the ATen-mode et_copy
  kernels; link it next to `native` or the et_copy ops are missing (ExecuTorch's ATen-mode bug).
- `peer_copy_ops_aten_lib` (ATen mode, devcopy's addition): ops/peer_copy_ops.yaml, the `_d2d_copy.out` kernel the
  `peer` placement strategy needs; link it too for programs placed with `strategy="peer"`.
- `quantized` (portable mode) and `quantized_ops_aten_lib` (ATen mode): ops/quantized.yaml, ExecuTorch's quantized
  out variants (quantize/dequantize per tensor, channel and token, choose_qparams); a PT2E-quantized program needs one.
Libs are cached and lazy: kernels are built on first lookup.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from torchgen.model import FunctionSchema

from ..errors import InvalidArgumentError, InvalidArgumentTypeError
from ..kernels import device_copy, dim_order, portable_cpu, quantized
from ..kernels.portable_cpu import boxed_aten_kernel
from ..names import (
    COPY_OP,
    DEFAULT_LIBS,
    DEVICE_COPY_LIB,
    DEVICE_RULES,
    FALLBACK_KEY,
    LIB_NAMES,
    LINKABLE_LIBS,
    MODES,
    PEER_COPY_LIB,
    QUANTIZED_ATEN_LIB,
    QUANTIZED_LIB,
    QUANTIZED_LIBS,
    DeviceRule,
    Direction,
    Lib,
    Mode,
)
from ..ops.schema import (
    EDGE_DIALECT_ATEN_OPS_YAML,
    ET_COPY_OPS_YAML,
    FUNCTIONS_YAML,
    NATIVE_FUNCTIONS_YAML,
    PEER_COPY_OPS_YAML,
    QUANTIZED_YAML,
    entry_error,
    load_ops_yaml,
    native_functions,
    native_schema,
    parse_schema,
)
from .operator_registry import BoxedKernel, KernelLib

# Libs given as KernelLibs, lib names, or (nested) iterables of them
Libs = KernelLib | str | Iterable["Libs"]


QUANTIZED_KERNELS = "devcopy::quantized"  # the namespace of ops/quantized.yaml's kernel names


def _valid_kernel_names() -> str:
    """The kernel_names a YAML lib can build, for the message that refuses another one."""
    copies = ",".join([*device_copy.PORTABLE_KERNELS, *dim_order.KERNELS])
    return (
        f"devcopy::portable::aten_out, devcopy::portable::{{{copies}}}, devcopy::aten::{{{copies}}}, "
        f"{QUANTIZED_KERNELS}::{{{','.join(quantized.KERNELS)}}}"
    )


def _builds(kernel_name: str, op: str) -> bool:
    """Whether `kernel_name` names a kernel devcopy can build for `op` (a quantized kernel only for its own op)."""
    namespace, _, fn = kernel_name.rpartition("::")
    if kernel_name == "devcopy::portable::aten_out":
        return True
    if namespace == QUANTIZED_KERNELS:
        return quantized.KERNELS.get(fn) == op
    if fn in dim_order.KERNELS:  # a dim-order kernel only for its own op
        return namespace in ("devcopy::portable", "devcopy::aten") and dim_order.KERNELS[fn] == op
    return namespace in ("devcopy::portable", "devcopy::aten") and fn in device_copy.PORTABLE_KERNELS


def _make_kernel(kernel_name: str, name: str, schema: FunctionSchema, mode: str, device_rule: str) -> BoxedKernel:
    """kernel_name -> boxed kernel: `devcopy::portable::<fn>`, `devcopy::aten::<fn>`, `devcopy::portable::aten_out`,
    `devcopy::quantized::<fn>` in `mode` (a name `_builds` refuses never gets here: the lib's entries refuse it)."""
    namespace, _, fn = kernel_name.rpartition("::")
    boxed: BoxedKernel
    if kernel_name == "devcopy::portable::aten_out":
        boxed = portable_cpu.boxed_aten_kernel(name, schema, portable=True)
        return boxed
    if namespace == QUANTIZED_KERNELS:
        boxed = quantized.quantized_kernel(name, schema, portable=mode == Mode.PORTABLE)
        return boxed
    if fn in dim_order.KERNELS:
        boxed = dim_order.dim_order_kernel(name, schema, portable=mode == Mode.PORTABLE)
        return boxed
    if namespace == "devcopy::portable":
        return device_copy.portable_boxed_kernel(fn)
    return device_copy.aten_boxed_kernel(name, device_rule)  # same kernel names in both modes


def _yaml_lib(name: str, mode: str, path: str, device_rule: str = DeviceRule.SEED) -> KernelLib:
    def entries() -> dict[tuple[str, str], str]:
        """Every (op, kernel key) of the file; a kernel_name devcopy cannot build is refused here, when the lib is
        first used, as an OpYamlError naming the file, the line and the names that are valid."""
        found = {}
        for entry in load_ops_yaml(path):
            for index, kernel in enumerate(entry.kernels):
                if not _builds(kernel.kernel_name, entry.name):
                    raise entry_error(
                        entry,
                        f"kernels[{index}]: unknown kernel_name {kernel.kernel_name!r} for {entry.name}. Valid: "
                        f"{_valid_kernel_names()}",
                    )
                found[(entry.name, kernel.key)] = kernel.kernel_name
        return found

    def schema_of(op: str) -> FunctionSchema:
        return next(e.schema for e in load_ops_yaml(path) if e.name == op)

    return KernelLib(
        name,
        mode,
        path,
        entries,
        schema_of,
        lambda op, kernel_name, schema: _make_kernel(kernel_name, op, schema, mode, device_rule),
    )


@functools.cache
def portable_lib() -> KernelLib:
    """The portable-mode lib generated from ops/functions.yaml."""
    return _yaml_lib(Lib.PORTABLE, Mode.PORTABLE, FUNCTIONS_YAML)


def quantized_lib(mode: str = Mode.PORTABLE) -> KernelLib:
    """ExecuTorch's quantized kernels (ops/quantized.yaml) in `mode`: `quantized` (portable) or
    `quantized_ops_aten_lib` (ATen), both from one YAML as ExecuTorch's kernels/quantized generates generated_lib and
    generated_lib_aten from quantized.yaml. One lib per mode, however the mode is spelt (`Mode.ATEN` or "aten")."""
    if mode not in MODES:
        raise InvalidArgumentError(f"Unknown mode {mode!r}. Valid: {', '.join(MODES)}")
    return _quantized_lib(Mode(mode).value)


@functools.cache
def _quantized_lib(mode: str) -> KernelLib:
    return _yaml_lib(QUANTIZED_LIBS[Mode(mode)], mode, QUANTIZED_YAML)


@functools.cache
def native_lib() -> KernelLib:
    """ATen's native lib: every op of native_functions.yaml, executed by PyTorch's kernels (torch.ops.aten)."""

    edge = {e.name: e for e in load_ops_yaml(EDGE_DIALECT_ATEN_OPS_YAML)}  # ExecuTorch's own ops, ATen mode

    def schema_of(op: str) -> FunctionSchema:
        if op in edge:
            return edge[op].schema
        schema = native_schema(op)
        if schema is None:  # an autogen variant in torchgen's YAML that this PyTorch does not register
            raise LookupError(
                f"{op}: native_functions.yaml lists it (autogen), but this PyTorch has no schema for it, "
                "so the native lib cannot build its kernel"
            )
        return parse_schema(schema)

    return KernelLib(
        Lib.NATIVE,
        Mode.ATEN,
        NATIVE_FUNCTIONS_YAML,
        lambda: {
            **{(op, FALLBACK_KEY): "torch.ops." + op.replace("::", ".") for op in native_functions()},
            **{(op, k.key): k.kernel_name for op, e in edge.items() for k in e.kernels},
        },
        schema_of,
        _native_kernel,
    )


def _native_kernel(op: str, kernel_name: str, schema: FunctionSchema) -> BoxedKernel:
    if not kernel_name.startswith("torch.ops."):  # an edge_dialect_aten_op.yaml entry
        return _make_kernel(kernel_name, op, schema, Mode.ATEN, DeviceRule.SEED)
    kernel: BoxedKernel = boxed_aten_kernel(op, schema, portable=False)
    return kernel


@functools.cache
def custom_ops_lib(path: str, device_rule: str = DeviceRule.SEED) -> KernelLib:
    """An ATen-mode lib from a custom-op YAML (ExecuTorch's custom-op path); et_copy_ops.yaml gives
    `device_copy_ops_aten_lib`."""
    if device_rule not in DEVICE_RULES:
        raise ValueError(f"device_rule must be one of {', '.join(DEVICE_RULES)}, got {device_rule!r}")
    path = os.path.abspath(path)
    name = DEVICE_COPY_LIB if path == ET_COPY_OPS_YAML else os.path.splitext(os.path.basename(path))[0] + "_aten_lib"
    return _yaml_lib(name, Mode.ATEN, path, device_rule)


def aten_lib(custom_ops: Sequence[str] = (), device_rule: str = DeviceRule.SEED) -> list[KernelLib]:
    """The ATen-mode libs: `native` plus one lib per custom-op YAML (pass ET_COPY_OPS_YAML for the et_copy ops)."""
    return [native_lib(), *(custom_ops_lib(path, device_rule) for path in custom_ops)]


def lib_by_name(name: str, device_rule: str = DeviceRule.SEED) -> KernelLib:
    """A lib by its name: one of `names.LINKABLE_LIBS`."""
    if name == Lib.PORTABLE:
        return portable_lib()
    if name == Lib.NATIVE:
        return native_lib()
    if name == DEVICE_COPY_LIB:
        return custom_ops_lib(ET_COPY_OPS_YAML, device_rule)
    if name == PEER_COPY_LIB:
        return custom_ops_lib(PEER_COPY_OPS_YAML, device_rule)
    if name == QUANTIZED_LIB:
        return quantized_lib(Mode.PORTABLE)
    if name == QUANTIZED_ATEN_LIB:
        return quantized_lib(Mode.ATEN)
    raise InvalidArgumentError(f"Unknown lib {name!r}. Valid libs: {', '.join(LINKABLE_LIBS)}")


def as_libs(libs: Libs, device_rule: str = DeviceRule.SEED) -> list[KernelLib]:
    """Libs given as KernelLibs, names, or (nested) lists of them -> a flat list of KernelLibs; anything else is an
    InvalidArgumentTypeError naming it."""
    if isinstance(libs, (KernelLib, str)):
        return [libs if isinstance(libs, KernelLib) else lib_by_name(libs, device_rule)]
    if not isinstance(libs, Iterable):
        raise InvalidArgumentTypeError(
            f"libs must be lib names ({', '.join(LINKABLE_LIBS)}), KernelLibs or a list of them, got "
            f"{type(libs).__name__} {libs!r:.60}; pass for example libs=['portable'], or None for the default"
        )
    return [lib for item in libs for lib in as_libs(item, device_rule)]


def default_libs(mode: str, operators: Iterable[str] = ()) -> tuple[str, ...]:
    """The libs a `mode` method links when none are given: the mode's default (`names.DEFAULT_LIBS`), plus what the
    program's `operators` need beyond it that the mode keeps in a lib of its own - in ATen mode
    `peer_copy_ops_aten_lib` for the `_d2d_copy.out` that the `peer` strategy emits. So the default follows the
    placement strategy, as the CLI's `--libs` default does."""
    defaults = DEFAULT_LIBS[Mode(mode)]
    if mode == Mode.ATEN and COPY_OP[Direction.D2D].name in set(operators):
        return (*defaults, PEER_COPY_LIB)
    return defaults


def libs_of_mode(mode: str, libs: Libs | None = None, operators: Iterable[str] = ()) -> list[KernelLib]:
    """The libs a `mode` method links (KernelLibs or names; None -> the mode's default for a program calling
    `operators`, `default_libs`); ValueError when one is of another mode, since a method resolves against one
    mode's kernels (docs/design.md §5)."""
    defaults = default_libs(mode, operators)
    linked = as_libs(defaults if libs is None else libs)
    wrong = [lib.name for lib in linked if lib.mode != mode]
    if wrong:
        raise InvalidArgumentError(
            f"{', '.join(wrong)}: not {mode}-mode libs; a {mode}-mode method links {mode} libs only "
            f"(default: {','.join(defaults)})"
        )
    return linked


@dataclass(frozen=True)
class RegistrationRow:
    """Is `op` registered in `lib` (of `mode`)? With which kernel key and kernel name, from which file."""

    op: str
    mode: str
    lib: str
    registered: bool
    kernel_key: str | None
    kernel_name: str | None
    source: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _matching(ops: Iterable[str] | str, known: Sequence[str]) -> list[str]:
    """Op names and glob patterns (`aten::add*`, `et_copy::*`) -> names; a plain name is kept even if unknown."""
    patterns = [ops] if isinstance(ops, str) else list(ops) if isinstance(ops, Iterable) else [ops]
    if not all(isinstance(p, str) for p in patterns):
        raise InvalidArgumentTypeError(
            f"ops must be op names or glob patterns (str), got {ops!r:.60}; pass for example ops='et_copy::*'"
        )
    found: dict[str, None] = {}
    for pattern in patterns:
        if any(c in pattern for c in "*?["):
            found.update(dict.fromkeys(fnmatch.filter(known, pattern)))
        else:
            found[pattern] = None
    return list(found)


def registration_status(libs: Libs | None = None, ops: Iterable[str] | str | None = None) -> list[RegistrationRow]:
    """One row per (op, lib): registered or not, kernel key and name, source file. `libs`: names or libs (default:
    all three); `ops`: names or glob patterns (default: every op any of the libs holds)."""
    linked = as_libs(LIB_NAMES if libs is None else libs)
    known = sorted({op for lib in linked for op in lib.ops})
    names = known if ops is None else _matching(ops, known)
    keys: dict[tuple[str, str], list[str]] = {}
    for lib in linked:
        for name, key in lib.entries:
            keys.setdefault((lib.name, name), []).append(key)
    rows = []
    for op in names:
        for lib in linked:
            for kernel_key in keys.get((lib.name, op)) or (None,):
                rows.append(
                    RegistrationRow(
                        op,
                        lib.mode,
                        lib.name,
                        kernel_key is not None,
                        kernel_key,
                        lib.entries.get((op, kernel_key)) if kernel_key is not None else None,
                        lib.source,
                    )
                )
    return rows
