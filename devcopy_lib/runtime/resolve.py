"""`resolve_operators`: a method load's operator resolution, and `MissingOperatorError` in ExecuTorch's words."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from ..devices.errors import InvalidArgumentTypeError
from ..names import (
    COPY_OP,
    DEVICE_COPY_LIB,
    FALLBACK_KEY,
    NATIVE_LIB,
    PEER_COPY_LIB,
    DeviceRule,
    Direction,
    ErrorKind,
    Mode,
)
from ..tensors.error import Error
from .libs import Libs, as_libs
from .registry import Kernel, OperatorRegistry


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


def _fix_hint(registry: OperatorRegistry, missing: list[tuple[int, str]]) -> str:
    linked = ", ".join(f"{lib.name} ({len(lib.ops)} ops, {lib.mode} mode)" for lib in registry.libs) or "none"
    lines = [f"Linked libs: {linked}."]
    if any(name == COPY_OP[Direction.D2D].name for _, name in missing) and registry.mode == Mode.ATEN:
        lines.append(
            f"To fix: link {PEER_COPY_LIB} too (devcopy's peer copy; --aten-libs "
            f"{NATIVE_LIB},{DEVICE_COPY_LIB},{PEER_COPY_LIB}), or place with another strategy."
        )
    elif any(name.startswith("et_copy::") for _, name in missing):
        if registry.mode == Mode.ATEN:
            lines.append(
                f"To fix: link {DEVICE_COPY_LIB} next to native (aten_lib(custom_ops=[ET_COPY_OPS_YAML]) "
                f"or --aten-libs {NATIVE_LIB},{DEVICE_COPY_LIB}): ATen-mode codegen does not see functions.yaml."
            )
        else:
            lines.append("To fix: link the portable lib, whose functions.yaml registers the et_copy ops.")
    else:
        lines.append("To fix: link a lib that registers these operators, or register a kernel for them.")
    return "\n".join(lines)


def resolve_operators(
    program: _HasOperators | Iterable[str],
    libs: OperatorRegistry | Libs,
    *,
    device_rule: str = DeviceRule.SEED,
    key: str = FALLBACK_KEY,
) -> list[Kernel]:
    """The kernel of each operator-table entry, in table order. `program`: a list of operator names or any object
    with `operators`; `libs`: KernelLibs or lib names. Raises MissingOperatorError listing every unresolved entry."""
    names = list(program) if isinstance(program, Iterable) else list(getattr(program, "operators", [None]))
    if not all(isinstance(name, str) for name in names):
        raise InvalidArgumentTypeError(
            f"resolve_operators takes a Program (anything with `operators`) or a list of operator names, got "
            f"{program!r:.60}; pass emit(placed) or ['et_copy::_h2d_copy.out', ...]"
        )
    registry = libs if isinstance(libs, OperatorRegistry) else OperatorRegistry(as_libs(libs, device_rule))
    kernels: list[Kernel] = []
    missing: list[tuple[int, str]] = []
    for index, name in enumerate(names):
        kernel = registry.lookup(name, key)
        if kernel is None:
            missing.append((index, name))
        else:
            kernels.append(kernel)
    if missing:
        count = _instruction_count(program, {i for i, _ in missing})
        lines = [f"Missing operator: [{i}] {name}" for i, name in missing]
        lines.append(f"There are {count} instructions don't have corresponding operator registered")
        raise MissingOperatorError("\n".join(lines + [_fix_hint(registry, missing)]), missing)
    return kernels
