"""State of the registration panel: mode, linked libs, the program's operator table and one load-and-run.

No display calls; `load_and_run` returns a `RunResult` or raises (MissingOperatorError on a missing kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

from devcopy_lib import (
    compare_outputs,
    eager_program,
    emit,
    load_method,
    make_allocator,
    open_pte,
    pte_inputs,
    pte_program,
    registration_status,
    scoped_allocators,
)
from devcopy_lib.names import AUTO_BACKEND, DEFAULT_LIBS, LIB_NAMES, MODES, Direction, Mode

from .placement_state import PlacementState


@dataclass
class RunResult:
    """One load-and-run: the outputs, whether they match eager PyTorch, and the copies the kernels executed."""

    backend: str
    outputs: tuple[Any, ...]
    ok: bool
    max_abs_err: float
    copies_executed: dict[str, int]

    def summary(self) -> str:
        shapes = ", ".join(str(list(o.shape)) for o in self.outputs)
        return (
            f"loaded and ran on the {self.backend} backend: outputs {shapes}; matches eager: {self.ok} "
            f"(max abs err {self.max_abs_err:.3g}); copies executed H2D {self.copies_executed[Direction.H2D]}, "
            f"D2H {self.copies_executed[Direction.D2H]}"
        )


@dataclass
class RegistrationState:
    """Which mode, which libs are linked, and the program Load runs: the placed one of a PlacementState, or an
    ExecuTorch `.pte` when `pte` is its path (`from_pte`)."""

    mode: str = Mode.PORTABLE
    libs: tuple[str, ...] | None = None  # None: the mode's default libs
    backend: str = AUTO_BACKEND
    placement: PlacementState = field(default_factory=PlacementState)
    pte: str | None = None  # an ExecuTorch program's path: its operator table and plan replace the placed model's
    _libs_by_mode: dict[str, tuple[str, ...] | None] = field(default_factory=dict, repr=False)

    @classmethod
    def from_pte(cls, path: str, **settings: Any) -> RegistrationState:
        """The state of an ExecuTorch program at `path`, read at once (a bad file raises PteLoadError here)."""
        open_pte(path)
        return cls(pte=str(path), **settings)

    def switch_mode(self, mode: str) -> None:
        """Change mode, keeping each mode's own lib choice: coming back restores what was (un)ticked there, so no
        lib is linked again behind the user's back."""
        self.libs_of(mode)
        self._libs_by_mode[self.mode] = self.libs
        self.mode, self.libs = mode, self._libs_by_mode.get(mode)

    @staticmethod
    def libs_of(mode: str) -> tuple[str, ...]:
        """The libs a method of `mode` can link (portable: portable, quantized; aten: native, device_copy_ops_aten_lib,
        quantized_ops_aten_lib)."""
        if mode not in MODES:
            raise ValueError(f"Unknown mode {mode!r}. Valid: {', '.join(MODES)}")
        return tuple(DEFAULT_LIBS[Mode(mode)])

    def linked(self) -> tuple[str, ...]:
        return DEFAULT_LIBS[Mode(self.mode)] if self.libs is None else tuple(self.libs)

    def operators(self) -> list[str]:
        """The program's operator table (the names load resolves, in first-use order)."""
        if self.pte is not None:
            return list(open_pte(self.pte).operators)
        return list(emit(self.placement.placed()).operators)

    def matrix(self) -> list[dict[str, Any]]:
        """One row per operator of the program: for each lib of this mode, ✓ when it registers the op (a lib of
        the other mode cannot be linked here: `n/a`); `resolved by` names the linked lib Load will use, or says
        MISSING and which unticked lib of this mode holds the op (`MISSING: tick native`)."""
        rows: dict[str, dict[str, str]] = {}
        linked = set(self.linked())
        for row in registration_status(libs=LIB_NAMES, ops=self.operators()):
            entry = rows.setdefault(row.op, {"op": row.op, "resolved by": ""})
            entry[row.lib] = "n/a" if row.mode != self.mode else "✓" if row.registered else "✗"
            if row.registered and row.lib in linked and row.mode == self.mode:
                entry["resolved by"] = entry["resolved by"] or row.lib
        for entry in rows.values():
            if not entry["resolved by"]:
                holders = self._holders(entry)
                entry["resolved by"] = f"MISSING: tick {' or '.join(holders)}" if holders else "MISSING: no lib"
        return list(rows.values())

    def _holders(self, entry: dict[str, Any]) -> list[str]:
        """The libs of this mode that register the op of a matrix row (ticking one resolves it)."""
        return [lib for lib in self.libs_of(self.mode) if entry.get(lib) == "✓"]

    def advice(self) -> str:
        """What to tick so that Load resolves every operator, from the matrix: only libs this mode links, each with
        the missing ops it holds; '' when nothing is missing."""
        missing = [entry for entry in self.matrix() if entry["resolved by"].startswith("MISSING")]
        by_lib: dict[str, list[str]] = {}
        orphans = []
        for entry in missing:
            holders = self._holders(entry)
            if holders:
                by_lib.setdefault(holders[0], []).append(entry["op"])
            else:
                orphans.append(entry["op"])
        lines = [
            f"tick {lib}: it registers {', '.join(by_lib[lib])}" for lib in self.libs_of(self.mode) if lib in by_lib
        ]
        if orphans:
            lines.append(
                f"no {self.mode}-mode lib registers {', '.join(orphans)}: delegate the op, or register a kernel"
            )
        return "; ".join(lines)

    def load_and_run(self) -> RunResult:
        """Load the program in this mode with the linked libs, run it on its example inputs (a .pte's: seeded random
        ones) and compare with eager PyTorch (a .pte's: the same program run by torch eagerly)."""
        if self.pte is not None:
            program = open_pte(self.pte)
            placed, inputs = pte_program(program), tuple(pte_inputs(program))
            module: Callable[..., Any] = eager_program(pte_program(program))
        else:
            placed = self.placement.placed()
            module, inputs = self.placement.module_and_inputs()
        with (
            make_allocator(self.backend) as allocator,
            scoped_allocators(allocator),
            load_method(placed, self.mode, list(self.linked())) as method,
        ):  # one Load, one allocator, closed
            outputs = tuple(method(*inputs))
            copies = dict(method.copies_executed)
        with torch.no_grad():
            expected = pytree.tree_leaves(module(*inputs))
        ok, err = compare_outputs(outputs, expected)
        return RunResult(allocator.backend, outputs, ok, err, copies)
