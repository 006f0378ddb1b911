"""Which of a `.pte`'s operators devcopy's runtime resolves: `pte_registration` links a mode's libs and resolves the
program's operator table as a method load would (`runtime.resolve_operators`), so a missing operator is named before
any load, with ExecuTorch's `Missing operator: [i] name` lines. The reader (`reader.py`) only reads the file; this is
where a read program meets the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..names import DEFAULT_LIBS, MODES, Mode
from ..runtime.libs import RegistrationRow, libs_of_mode, registration_status
from ..runtime.resolve import MissingOperatorError, resolve_operators
from .reader import PteProgram, PteUsageError


@dataclass(frozen=True)
class PteRegistration:
    """What a `mode` runtime linking `libs` makes of a program's operator table: `resolved` the operators it finds,
    `missing` `(table index, name)` of those it does not, `message` ExecuTorch's `Missing operator: [i] name` lines
    with devcopy's fix ("" when nothing is missing), and `rows` registration_status's rows for the table."""

    mode: str
    libs: tuple[str, ...]
    resolved: list[str]
    missing: list[tuple[int, str]]
    message: str
    rows: list[RegistrationRow]

    @property
    def ok(self) -> bool:
        return not self.missing


def pte_registration(program: PteProgram, mode: str = Mode.PORTABLE, libs: Any = None) -> PteRegistration:
    """Resolve `program`'s operator table as a method load would, in `mode` with `libs` (None: the mode's default,
    `portable`; `native` + `device_copy_ops_aten_lib`), through devcopy's `resolve_operators`."""
    if mode not in MODES:
        raise PteUsageError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    linked = libs_of_mode(mode, DEFAULT_LIBS[Mode(mode)] if libs is None else libs)
    missing: list[tuple[int, str]] = []
    message = ""
    try:
        resolve_operators(program, linked)
    except MissingOperatorError as exc:
        missing, message = list(exc.missing), str(exc)
    gone = {name for _, name in missing}
    return PteRegistration(
        mode=mode,
        libs=tuple(lib.name for lib in linked),
        resolved=[name for name in program.operators if name not in gone],
        missing=missing,
        message=message,
        rows=registration_status(linked, ops=program.operators),
    )


__all__ = ["PteRegistration", "pte_registration"]
