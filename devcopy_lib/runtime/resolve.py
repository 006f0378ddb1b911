"""`resolve_operators`: a method load's operator resolution, and `MissingOperatorError` in ExecuTorch's words."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from ..errors import InvalidArgumentTypeError
from ..kernels.prim_ops import PRIM_FUNCTIONS, PRIM_SCHEMAS, PRIM_TENSOR_OPS, prim_kernel
from ..names import (
    DEVICE_COPY_LIB,
    FALLBACK_KEY,
    LINKABLE_LIBS,
    NATIVE_LIB,
    PEER_COPY_LIB,
    QUANTIZED_ATEN_LIB,
    QUANTIZED_LIB,
    DeviceRule,
    ErrorKind,
    Mode,
)
from ..ops.schema import parse_schema
from ..tensors.error import Error
from .libs import Libs, as_libs, lib_by_name, registration_status
from .operator_registry import Kernel, KernelLib, OperatorRegistry


class _HasOperators(Protocol):
    """A program's operator table (`Program.operators`)."""

    @property
    def operators(self) -> Sequence[str]: ...


class MissingOperatorError(RuntimeError):
    """Operators of the program that no linked lib registers; raised at load time, before anything runs."""

    kind = ErrorKind.MISSING_OPERATOR
    error = Error.OperatorMissing

    def __init__(self, message: str, missing: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.missing = missing


def _instruction_count(program: _HasOperators | Iterable[str], missing_indices: set[int]) -> int:
    """How many instructions call a missing operator (ExecuTorch counts instructions, not operators)."""
    instructions = getattr(program, "instructions", None)
    if instructions is None:
        return len(missing_indices)
    return sum(1 for ins in instructions if getattr(ins, "op", None) in missing_indices)


# Why a lib is needed, beside its name, where ExecuTorch users trip on it.
_WHY_LINK: dict[str, str] = {
    DEVICE_COPY_LIB: f" next to {NATIVE_LIB} (aten_lib(custom_ops=[ET_COPY_OPS_YAML])): ATen-mode codegen does not "
    "see functions.yaml",
    PEER_COPY_LIB: " too (devcopy's peer copy), or place with another strategy",
    QUANTIZED_LIB: " (ExecuTorch's quantized kernels: a PT2E-quantized program's quantize and dequantize ops)",
    QUANTIZED_ATEN_LIB: " (ExecuTorch's quantized kernels in ATen mode: a PT2E-quantized program's quantize and "
    "dequantize ops)",
}


def libs_holding(ops: Iterable[str], mode: str, linked: Iterable[str] = ()) -> dict[str, list[str]]:
    """The linkable libs of `mode` that are not `linked` and register some of `ops`: lib name -> those ops. What
    a missing operator's fix names (never a lib of the other mode: a method links one mode's libs)."""
    wanted, skip = list(dict.fromkeys(ops)), set(linked)
    holders: dict[str, list[str]] = {}
    for name in LINKABLE_LIBS:
        if name in skip:
            continue
        lib = lib_by_name(name)
        registered = set(lib.ops) if lib.mode == mode else set()
        held = [op for op in wanted if op in registered]
        if held:
            holders[name] = held
    return holders


def registry_report(mode: str, linked: Sequence[KernelLib], ops: Sequence[str]) -> dict[str, Any]:
    """Which of `ops` (names or glob patterns) the `linked` libs of `mode` register, one row per (op, lib), and for
    each op none registers the libs of this mode that would (none: a kernel must be registered). JSON-ready."""
    rows = registration_status(linked, ops)
    unregistered = [
        op for op in dict.fromkeys(row.op for row in rows) if not any(r.registered for r in rows if r.op == op)
    ]
    holders = libs_holding(unregistered, mode, [lib.name for lib in linked])
    return {
        "ok": True,
        "mode": mode,
        "libs": [{"name": lib.name, "mode": lib.mode, "source": lib.source, "ops": len(lib.ops)} for lib in linked],
        "ops": list(ops),
        "rows": [row.as_dict() for row in rows],
        "fixes": [{"op": op, "libs": [lib for lib, held in holders.items() if op in held]} for op in unregistered],
    }


def fix_hint(mode: str, linked: Sequence[str], missing: Sequence[str]) -> str:
    """How to resolve the `missing` operators of a `mode` method that links `linked`: the unlinked libs of that
    mode that register them, or, when none does, that a kernel must be registered."""
    holders = libs_holding(missing, mode, linked)
    if not holders:
        return (
            f"To fix: no {mode}-mode lib registers {', '.join(dict.fromkeys(missing))}: register a kernel for it, "
            "or delegate the op so that it runs on the device."
        )
    every = ",".join([*linked, *holders])
    cli = f" (--libs {every})" if mode == Mode.ATEN else ""
    return "\n".join(
        f"To fix: link {lib}{_WHY_LINK.get(lib, '')}; it registers {', '.join(ops)}{cli}."
        for lib, ops in holders.items()
    )


def _fix_hint(registry: OperatorRegistry, missing: list[tuple[int, str]], mode: str | None) -> str:
    linked = ", ".join(f"{lib.name} ({len(lib.ops)} ops, {lib.mode} mode)" for lib in registry.libs) or "none"
    chosen = mode or registry.mode or Mode.PORTABLE
    names = [lib.name for lib in registry.libs]
    return f"Linked libs: {linked}.\n" + fix_hint(chosen, names, [name for _, name in missing])


PRIM_LIB = "prim_ops"  # the runtime's own primitive ops, there in both modes whatever the linked libs


@functools.cache
def prim_kernel_of(name: str, mode: str) -> Kernel | None:
    """The runtime's primitive op `name` (`aten::sym_size.int`, `executorch_prim::mul.Scalar`, ...) in `mode`, or
    None when `name` is no primitive. Like ExecuTorch's prim ops they are registered by the runtime itself, so a
    program with dynamic shapes resolves whatever libs it links (docs/semantics.md §5b)."""
    if name not in PRIM_FUNCTIONS and name not in PRIM_TENSOR_OPS:
        return None
    return Kernel(
        name,
        FALLBACK_KEY,
        prim_kernel(name, portable=mode == Mode.PORTABLE),
        parse_schema(PRIM_SCHEMAS[name]),
        PRIM_LIB,
        mode,
        f"devcopy::prim::{name}",
        "devcopy_lib/kernels/prim_ops.py",
    )


def resolve_operators(
    program: _HasOperators | Iterable[str],
    libs: OperatorRegistry | Libs,
    *,
    device_rule: str = DeviceRule.SEED,
    key: str = FALLBACK_KEY,
    mode: str | None = None,
) -> list[Kernel]:
    """The kernel of each operator-table entry, in table order. `program`: a list of operator names or any object
    with `operators`; `libs`: KernelLibs or lib names; `mode`: the method's mode, which the fix of a missing
    operator names libs of (default: the libs' own; needed when no lib is linked). Raises MissingOperatorError
    listing every unresolved entry."""
    names = list(program) if isinstance(program, Iterable) else list(getattr(program, "operators", [None]))
    if not all(isinstance(name, str) for name in names):
        raise InvalidArgumentTypeError(
            f"resolve_operators takes a Program (anything with `operators`) or a list of operator names, got "
            f"{program!r:.60}; pass emit(placed) or ['et_copy::_h2d_copy.out', ...]"
        )
    registry = libs if isinstance(libs, OperatorRegistry) else OperatorRegistry(as_libs(libs, device_rule))
    kernels: list[Kernel] = []
    missing: list[tuple[int, str]] = []
    chosen = mode or registry.mode or Mode.PORTABLE
    for index, name in enumerate(names):
        kernel = prim_kernel_of(name, chosen) or registry.lookup(name, key)
        if kernel is None:
            missing.append((index, name))
        else:
            kernels.append(kernel)
    if missing:
        count = _instruction_count(program, {i for i, _ in missing})
        lines = [f"Missing operator: [{i}] {name}" for i, name in missing]
        lines.append(f"There are {count} instructions don't have corresponding operator registered")
        raise MissingOperatorError("\n".join(lines + [_fix_hint(registry, missing, mode)]), missing)
    return kernels
