"""The artifact as the measure of fidelity: `compare_artifacts` holds the `Program` devcopy
emits against the `.pte` ExecuTorch 1.5.1 writes for the same model and delegated ops, aspect by aspect - the
operator table, the instruction sequence, the copies (position, direction, the value copied) and the memory plan per
device - in the form of `artifact_form.py`.

A difference ExecuTorch's own code explains is classified by name (`KnownDifference`, each a section of
docs/differences.md, "The artifact"), and only where the explanation accounts for it exactly (a different schedule
only when both sides compute the same steps; a different buffer size only when devcopy's planner at ExecuTorch's
alignment gives ExecuTorch's size, or when each size is what its own plan's tensors fill); anything else is `new`.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..names import COPY_OP, Direction, Partition
from ..runtime.program import Program
from .artifact_form import VIEW_COPY, Artifact, Step, program_artifact, pte_artifact
from .reader import PteProgram

DIFFERENCES_DOC = "docs/differences.md"
ASPECTS = ("operators", "instructions", "copies", "memory_plan")
H2D = COPY_OP[Direction.H2D].name


class KnownDifference(str, Enum):
    """A documented difference between devcopy's program and ExecuTorch's; the value is its section in
    docs/differences.md."""

    EDGE_SPELLING = "edge_spelling"  # to_edge names `_to_copy` and `clone` as dim-order ops
    VIEW_ELIDED = "view_elided"  # ExecuTorch elides a static view_copy: its result shares the base's memory
    SCHEDULE = "schedule"  # ExecuTorch's delegate fusion re-sorts the graph (torch.fx legalize_graph)
    DELEGATE_SIGNATURE = "delegate_signature"  # a delegate's arguments and results in fuse_as_graphmodule's order
    ALIGNMENT = "alignment"  # ExecuTorch aligns planned tensors to 16 bytes, devcopy to 64
    PLANNING = "planning"  # another planner (shared objects) over other lifetimes

    @property
    def section(self) -> str:
        return f"{DIFFERENCES_DOC}#{self.value}"


@dataclass(frozen=True)
class Difference:
    """One item the two programs differ in: `ours` (devcopy) and `theirs` (ExecuTorch) as text, and `kind`, the
    documented difference that explains it (None: new, unexplained)."""

    aspect: str
    ours: str
    theirs: str
    kind: KnownDifference | None = None

    def __str__(self) -> str:
        why = f"[{self.kind.value}]" if self.kind else "[NEW]"
        return f"{why} devcopy: {self.ours} | executorch: {self.theirs}"


@dataclass(frozen=True)
class ArtifactComparison:
    """The comparison of two programs: per aspect (ASPECTS), the differences found (none: equal)."""

    aspects: dict[str, list[Difference]]
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)  # per aspect: (devcopy's items, ExecuTorch's)

    @property
    def differences(self) -> list[Difference]:
        return [d for aspect in ASPECTS for d in self.aspects[aspect]]

    @property
    def new(self) -> list[Difference]:
        """The differences no documented cause explains."""
        return [d for d in self.differences if d.kind is None]

    @property
    def documented(self) -> set[KnownDifference]:
        return {d.kind for d in self.differences if d.kind is not None}

    @property
    def ok(self) -> bool:
        """Equal except documented differences."""
        return not self.new

    @property
    def equal(self) -> bool:
        return not self.differences

    def to_markdown(self, limit: int = 20) -> str:
        """One table row per aspect, then each aspect's differences (at most `limit` each)."""
        lines = ["| aspect | devcopy | executorch | verdict |", "|---|---|---|---|"]
        for aspect in ASPECTS:
            found = self.aspects[aspect]
            kinds = sorted({d.kind.value for d in found if d.kind})
            verdict = "equal" if not found else "NEW differences" if any(d.kind is None for d in found) else ""
            verdict = verdict or "equal except " + ", ".join(f"[{k}]({DIFFERENCES_DOC}#{k})" for k in kinds)
            ours, theirs = self.sizes.get(aspect, (0, 0))
            lines.append(f"| {aspect} | {ours} | {theirs} | {verdict} |")
        for aspect in ASPECTS:
            found = self.aspects[aspect]
            if found:
                lines += ["", f"{aspect}:"] + [f"- {d}" for d in found[:limit]]
                lines += [f"- ... {len(found) - limit} more"] if len(found) > limit else []
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()


def _first_use(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _operators(ours: Artifact, theirs: Artifact) -> list[Difference]:
    found = [
        Difference("operators", f"{name} (spelled as ExecuTorch's edge op)", name, KnownDifference.EDGE_SPELLING)
        for name in theirs.respelled
    ]
    mine = list(ours.operators)
    if VIEW_COPY in mine and VIEW_COPY not in theirs.operators and all(s.name != VIEW_COPY for s in ours.steps):
        mine.remove(VIEW_COPY)  # every view_copy devcopy emits is one ExecuTorch elides
        found.append(
            Difference("operators", VIEW_COPY, "(no operator: every view elided)", KnownDifference.VIEW_ELIDED)
        )
    if mine == list(theirs.operators):
        return found
    emitted = sorted((*ours.steps, *ours.elided), key=lambda s: s.position)  # devcopy's table counts elided views
    in_order = mine == [n for n in _first_use(s.name for s in emitted if s.kind == "kernel") if n in mine]
    in_order &= list(theirs.operators) == _first_use(s.name for s in theirs.steps if s.kind == "kernel")
    if set(mine) == set(theirs.operators) and in_order:  # each table lists its own kernels in first-use order
        first = next(i for i, (a, b) in enumerate(zip(mine, theirs.operators, strict=True)) if a != b)
        text = "table in first-use order from {}: {}"
        ours_text, theirs_text = text.format(first, mine[first:]), text.format(first, list(theirs.operators[first:]))
        return [*found, Difference("operators", ours_text, theirs_text, KnownDifference.SCHEDULE)]
    found += [Difference("operators", name, "(absent)") for name in mine if name not in theirs.operators]
    found += [Difference("operators", "(absent)", name) for name in theirs.operators if name not in mine]
    if set(mine) == set(theirs.operators):
        found.append(Difference("operators", f"table {mine}", f"table {list(theirs.operators)}"))
    return found


def _one_sided(aspect: str, ours: Sequence[Any], theirs: Sequence[Any]) -> list[Difference]:
    """The items of two sequences that difflib does not match, each as a new difference."""
    found = []
    matcher = difflib.SequenceMatcher(a=[x.key for x in ours], b=[x.key for x in theirs], autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag != "equal":
            for k in range(max(a1 - a0, b1 - b0)):
                mine = str(ours[a0 + k]) if a0 + k < a1 else "(absent)"
                other = str(theirs[b0 + k]) if b0 + k < b1 else "(absent)"
                found.append(Difference(aspect, mine, other))
    return found


def _instructions(ours: Artifact, theirs: Artifact) -> list[Difference]:
    found = [
        Difference("instructions", str(s), "(no instruction: shares its base's memory)", KnownDifference.VIEW_ELIDED)
        for s in ours.elided
    ]
    mine, other = [s.key for s in ours.steps], [s.key for s in theirs.steps]
    if Counter(mine) == Counter(other):
        found += _signatures(ours, theirs)
    if mine == other:
        return found
    if Counter(mine) == Counter(other):  # the same steps computing the same values, in another valid order
        moved = [(a, b) for a, b in zip(ours.steps, theirs.steps, strict=True) if a.key != b.key]
        return [
            *found,
            Difference(
                "instructions",
                f"{len(moved)} of {len(mine)} steps in another order, first {moved[0][0]}",
                f"{moved[0][1]}",
                KnownDifference.SCHEDULE,
            ),
        ]
    found += _unmatched(ours.steps, Counter(mine) - Counter(other), "ours")
    return found + _unmatched(theirs.steps, Counter(other) - Counter(mine), "theirs")


def _unmatched(steps: Sequence[Step], extra: Counter[Any], side: str) -> list[Difference]:
    """The steps only one side holds (`extra`: their keys, counted), each a new difference."""
    found = []
    for step in steps:
        if extra[step.key] > 0:
            extra[step.key] -= 1
            text = (str(step), "(absent)") if side == "ours" else ("(absent)", str(step))
            found.append(Difference("instructions", *text))
    return found


def _signatures(ours: Artifact, theirs: Artifact) -> list[Difference]:
    """The delegates both sides call with the same values, in another order of arguments or results."""
    theirs_by_key = {s.key: s for s in theirs.steps if s.kind == "delegate"}
    return [
        Difference(
            "instructions",
            f"{a.name} reads ({', '.join(a.reads)}), writes ({', '.join(a.writes)})",
            f"{b.name} reads ({', '.join(b.reads)}), writes ({', '.join(b.writes)})",
            KnownDifference.DELEGATE_SIGNATURE,
        )
        for a in ours.steps
        if a.kind == "delegate" and (b := theirs_by_key[a.key]) and (a.reads, a.writes) != (b.reads, b.writes)
    ]


def _positions(order: tuple[str, ...], names: list[str]) -> list[int]:
    """Where each of `names` stands in `order`, a name that occurs twice taking its next place."""
    taken: set[int] = set()
    found = []
    for name in names:
        place = next((i for i, o in enumerate(order) if o == name and i not in taken), None)
        if place is not None:
            taken.add(place)
            found.append(place)
    return found


def _boundary(artifact: Artifact) -> tuple[list[Step], list[str]]:
    """The steps at the device boundary (delegates and copies) in order, each run of H2Ds before a delegate and of
    D2Hs after one sorted (the two sides order a delegate's arguments differently); and the runs that are not in
    their delegate's argument or result order, which PropagateDevicePass follows when it inserts them."""
    steps = [s for s in artifact.steps if s.kind == "delegate" or s.name.startswith("et_copy::")]
    canonical: list[Step] = []
    disordered: list[str] = []
    k = 0
    while k < len(steps):
        end = k + 1
        while steps[k].kind == "kernel" and end < len(steps) and steps[end].name == steps[k].name:
            end += 1
        run = steps[k:end]
        h2d = run[0].name == H2D
        owner = (steps[end] if end < len(steps) else None) if h2d else (steps[k - 1] if k else None)
        if run[0].kind == "kernel" and owner is not None and owner.kind == "delegate" and len(run) > 1:
            order = owner.reads if h2d else owner.writes
            where = _positions(order, [s.writes[0] if h2d else s.reads[0] for s in run])
            if where != sorted(where):
                disordered.append(f"{', '.join(str(s) for s in run)} (not in {owner.name}'s order)")
            run = sorted(run, key=lambda s: s.key)
        canonical += run
        k = end
    return canonical, disordered


def _copies(ours: Artifact, theirs: Artifact) -> list[Difference]:
    (mine, mine_bad), (other, other_bad) = _boundary(ours), _boundary(theirs)
    in_order = "(its copies in their delegates' order)"
    found = [Difference("copies", bad, in_order) for bad in mine_bad]
    found += [Difference("copies", in_order, bad) for bad in other_bad]
    if [s.key for s in mine] != [s.key for s in other] or len(ours.copies) != len(theirs.copies):
        return found + (_one_sided("copies", ours.copies, theirs.copies) or _one_sided("copies", mine, other))
    if found:
        return found
    reordered = [a for a, b in zip(ours.copies, theirs.copies, strict=True) if a.key != b.key]
    if reordered:
        found.append(
            Difference(
                "copies",
                f"{len(reordered)} copies in a delegate's argument order, first {reordered[0]}",
                "its delegate's argument order",
                KnownDifference.DELEGATE_SIGNATURE,
            )
        )
    moved = [(a, b) for a, b in zip(ours.copies, theirs.copies, strict=True) if a.position != b.position]
    if not moved:
        return found
    positions = ", ".join(f"{a.position}->{b.position}" for a, b in moved[:8])
    return [
        *found,
        Difference(
            "copies",
            f"the same {len(mine)} copies and delegates in the same order; {len(moved)} copies at other positions "
            f"({positions}{', ...' if len(moved) > 8 else ''})",
            "positions of its own schedule",
            KnownDifference.SCHEDULE,
        ),
    ]


def _memory_plan(ours: Artifact, theirs: Artifact) -> list[Difference]:
    found = []
    for k in range(max(len(ours.buffers), len(theirs.buffers))):
        a = ours.buffers[k] if k < len(ours.buffers) else None
        b = theirs.buffers[k] if k < len(theirs.buffers) else None
        if a is not None and b is not None and (a.nbytes, a.device) == (b.nbytes, b.device):
            continue
        kind = None
        if a is not None and b is not None and a.device == b.device:
            if a.realigned == b.nbytes:
                kind = KnownDifference.ALIGNMENT
            elif a.nbytes == a.extent and b.nbytes == b.extent:
                kind = KnownDifference.PLANNING
        found.append(Difference("memory_plan", str(a or "(absent)"), str(b or "(absent)"), kind))
    return found


def compare_artifacts(devcopy_program: Program | Artifact, pte_program: PteProgram | Artifact) -> ArtifactComparison:
    """Compare devcopy's emitted program (a `Program`, planned here if it carries no plan) with ExecuTorch's (a
    `PteProgram` from `open_pte`); either may be given in its compared form already (`program_artifact`,
    `pte_artifact`)."""
    ours = devcopy_program if isinstance(devcopy_program, Artifact) else program_artifact(devcopy_program)
    theirs = pte_program if isinstance(pte_program, Artifact) else pte_artifact(pte_program)
    return ArtifactComparison(
        {
            "operators": _operators(ours, theirs),
            "instructions": _instructions(ours, theirs),
            "copies": _copies(ours, theirs),
            "memory_plan": _memory_plan(ours, theirs),
        },
        {
            "operators": (len(ours.operators), len(theirs.operators)),
            "instructions": (len(ours.steps) + len(ours.elided), len(theirs.steps)),
            "copies": (len(ours.copies), len(theirs.copies)),
            "memory_plan": (len(ours.buffers), len(theirs.buffers)),
        },
    )


def compare_model(
    model: Any,
    example_inputs: Sequence[Any],
    delegate_ops: Sequence[str] | None = None,
    target_device: str = "cuda:0",
    partition: str = Partition.CAPABILITY,
) -> ArtifactComparison:
    """Lower `model` both ways with the same delegated ops, device and partitioning - devcopy's `export_and_lower`,
    `place_devices`, `emit`; ExecuTorch's pipeline through devcopy's backend (`executorch_pte`) - and compare the
    two programs. Needs the `reference` extra (ExecuTorch 1.5.1)."""
    from ..emitter.emit import emit
    from ..lowering.lower import export_and_lower
    from ..placement.place import place_devices
    from .backend import executorch_pte
    from .reader import open_pte

    ours = emit(
        place_devices(export_and_lower(model, example_inputs, delegate_ops, target_device, partition=partition))
    )
    theirs = open_pte(executorch_pte(model, example_inputs, delegate_ops, target_device, partition))
    return compare_artifacts(ours, theirs)


__all__ = [
    "ASPECTS",
    "ArtifactComparison",
    "Difference",
    "KnownDifference",
    "compare_artifacts",
    "compare_model",
]
