"""A program's memory plan as a picture's data (`memory_picture(source)`, the explorer's memory-plan view,
docs/explorer.md, docs/pte.md): one lane per planned buffer (and so per device), one block per tensor at its
(offset, bytes) for its lifetime in instructions.

`source` is devcopy's own program (placed, or emitted: devcopy's plan, `runtime/memory_plan.py`, whose requests hold
the lifetimes) or ExecuTorch's (`.pte` path, bytes or `PteProgram`: its `non_const_buffer_sizes`, each tensor's
`mem_id`/`offset`, lifetimes from the instructions that use it). Pure data; it sits above `emitter` and `pte` because it
draws both programs.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from .devices.device import CPU
from .emitter.emit import emit
from .names import format_bytes
from .pte.reader import PteProgram, PteTensor, open_pte
from .runtime.memory_plan import CONSTANT_BUFFER, MemoryPlan, lifetimes, plan_program
from .runtime.program import Program, TensorValue


@dataclass(frozen=True)
class Block:
    """One tensor in a buffer: bytes [offset, offset + nbytes) for instructions first..last (inclusive); `label`
    says what it is, `node` the graph node that writes it ("" when the picture has no graph to point into)."""

    value: Hashable
    label: str
    offset: int
    nbytes: int
    first: int
    last: int
    node: str = ""

    def overlaps(self, other: Block) -> bool:
        """Both live at one instruction and share a byte (empty tensors share nothing)."""
        live = self.first <= other.last and other.first <= self.last
        shared = self.offset < other.offset + other.nbytes and other.offset < self.offset + self.nbytes
        return live and shared and self.nbytes > 0 and other.nbytes > 0


@dataclass(frozen=True)
class Lane:
    """One planned buffer: its index, device and size in bytes, and the blocks in it."""

    buffer: int
    device: str
    nbytes: int
    blocks: tuple[Block, ...]

    @property
    def peak(self) -> int:
        """The highest byte any block reaches: at most `nbytes` (the plan's size, alignment included)."""
        return max((b.offset + b.nbytes for b in self.blocks), default=0)

    def overlaps(self) -> list[tuple[Block, Block]]:
        """Pairs of blocks that share bytes while both live: none in a correct plan (aliases of one value aside)."""
        ordered = sorted(self.blocks, key=lambda b: b.first)
        return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :] if b.first <= a.last and a.overlaps(b)]


@dataclass(frozen=True)
class MemoryPicture:
    """The lanes of a plan over `instructions` instructions (x runs 0..instructions; a program output is live up to
    `instructions`, the caller's read)."""

    instructions: int
    lanes: tuple[Lane, ...]

    def block(self, value: Hashable) -> Block | None:
        return next((b for lane in self.lanes for b in lane.blocks if b.value == value), None)

    def summary(self) -> str:
        """`cpu: buffer 1, 3 tensors in 192 B · cuda:0: buffer 2, 2 tensors in 128 B`."""
        return " · ".join(
            f"{lane.device}: buffer {lane.buffer}, {len(lane.blocks)} tensor{'s' if len(lane.blocks) != 1 else ''} "
            f"in {format_bytes(lane.nbytes)}"
            for lane in self.lanes
        )


def lanes_of(
    buffers: Iterable[tuple[int, str, int]], blocks: Iterable[tuple[int, Block]], instructions: int
) -> MemoryPicture:
    """The picture of `buffers` ((index, device, bytes)) holding `blocks` ((buffer index, block)): a lane per buffer
    that has bytes or blocks, the constants buffer (0) left out; blocks by offset, then lifetime."""
    held: dict[int, list[Block]] = {}
    for buffer, block in blocks:
        held.setdefault(buffer, []).append(block)
    lanes = tuple(
        Lane(index, device, nbytes, tuple(sorted(held.get(index, ()), key=lambda b: (b.offset, b.first))))
        for index, device, nbytes in buffers
        if index != CONSTANT_BUFFER and (nbytes or held.get(index))
    )
    return MemoryPicture(instructions, lanes)


def plan_picture(plan: MemoryPlan, instructions: int) -> MemoryPicture:
    """The picture of a devcopy plan: every request at its allocation, for its lifetime, labelled by its key."""
    if not plan.requests and plan.allocations:
        raise ValueError(
            "This memory plan keeps no requests (lifetimes), so plan_picture cannot draw it. To fix: draw the "
            "program it belongs to, memory_picture(program), which takes the lifetimes from its instructions"
        )
    blocks = []
    for request in plan.requests:
        where = plan.allocations[request.key]
        blocks.append(
            (where.buffer, Block(request.key, str(request.key), where.offset, request.nbytes, *request.lifetime))
        )
    buffers = ((i, str(b.device), b.nbytes) for i, b in enumerate(plan.buffers))
    return lanes_of(buffers, blocks, instructions)


def writers(program: Program) -> dict[int, str]:
    """Tensor value -> `#i op`, the first instruction that touches it (its writer, for any value but an input)."""
    found: dict[int, str] = {}
    for position, ins in enumerate(program.instructions):
        name = program.instruction_name(position)
        for index in program.tensor_indices(ins):
            found.setdefault(index, f"#{position} {name}")
    return found


def program_picture(program: Program, nodes: dict[int, str] | None = None) -> MemoryPicture:
    """The picture of an emitted program's plan (planned now when it has none); `nodes` maps a value index to the
    graph node the picture selects for it (default: the nodes emit recorded, `Program.value_nodes`). A plan kept
    from a .pte (`pte_program`) has no requests: its lifetimes come from the program, as `plan_program` counts."""
    plan = program.memory_plan if program.memory_plan is not None else plan_program(program)
    if plan.requests or not plan.allocations:
        picture = plan_picture(plan, len(program.instructions))
    else:
        spans = lifetimes(program)
        blocks = [
            (where.buffer, Block(i, str(i), where.offset, program.tensor(i).spec.nbytes, *spans.get(i, (0, 0))))
            for i, where in plan.allocations.items()
            if isinstance(i, int)
        ]
        buffers = ((i, str(b.device), b.nbytes) for i, b in enumerate(plan.buffers))
        picture = lanes_of(buffers, blocks, len(program.instructions))
    return _described(picture, program, program.value_nodes if nodes is None else nodes)


def _described(picture: MemoryPicture, program: Program, nodes: dict[int, str]) -> MemoryPicture:
    """Label each block `v12 f32[2, 3] (#4 aten::sin.out)` and attach its graph node."""
    made = writers(program)
    lanes = []
    for lane in picture.lanes:
        blocks = []
        for b in lane.blocks:
            index = b.value if isinstance(b.value, int) else -1  # a program's plan is keyed by value index
            value = program.values[index] if index >= 0 else None
            what = _tensor_text(value) if isinstance(value, TensorValue) else ""
            where = " (input)" if index in program.inputs else f" ({made[index]})" if index in made else ""
            label = f"v{index} {what}{where}" if index >= 0 else b.label
            blocks.append(Block(b.value, label, b.offset, b.nbytes, b.first, b.last, nodes.get(index, "")))
        lanes.append(Lane(lane.buffer, lane.device, lane.nbytes, tuple(blocks)))
    return MemoryPicture(picture.instructions, tuple(lanes))


def _tensor_text(value: TensorValue) -> str:
    dtype = str(value.spec.dtype).removeprefix("torch.")
    return f"{dtype}{list(value.spec.sizes)} {format_bytes(value.spec.nbytes)}"


def pte_lifetimes(p: PteProgram) -> dict[int, tuple[int, int]]:
    """First and last instruction using each tensor value; inputs live from 0, outputs up to the end (the caller's
    read), as devcopy's `runtime.memory_plan.lifetimes` counts them."""
    spans: dict[int, list[int]] = {}
    end = len(p.instructions)
    for position in range(end):
        for index in p.uses(position):
            spans.setdefault(index, [position, position])[1] = position
    for index in p.inputs:
        spans.setdefault(index, [0, 0])[0] = 0
    for index in p.outputs:
        spans.setdefault(index, [end, end])[1] = end
    return {index: (first, last) for index, (first, last) in spans.items()}


def pte_picture(p: PteProgram, nodes: dict[int, str] | None = None) -> MemoryPicture:
    """ExecuTorch's plan of `p`: a lane per non-constant buffer, a block per planned tensor used by an instruction
    (or an input or output); `nodes` maps a value index to the graph node the picture selects for it."""
    spans = pte_lifetimes(p)
    nodes = nodes or {}
    writer: dict[int, int] = {}
    for position in range(len(p.instructions)):
        for index in p.uses(position):
            writer.setdefault(index, position)
    blocks = []
    for index, (first, last) in spans.items():
        v = p.values[index]
        if not isinstance(v, PteTensor) or v.mem_id is None or v.offset is None:
            continue
        dtype = str(v.dtype).removeprefix("torch.")
        made = (
            " (input)"
            if index in p.inputs or index not in writer
            else f" (#{writer[index]} {p.instruction_name(writer[index])})"
        )
        label = f"v{index} {dtype}{list(v.sizes)} {format_bytes(v.nbytes)}{made}"
        blocks.append((v.mem_id, Block(index, label, v.offset, v.nbytes, first, last, nodes.get(index, ""))))
    buffers = ((i, str(p.buffer_devices.get(i, CPU)), size) for i, size in enumerate(p.buffer_sizes))
    return lanes_of(buffers, blocks, len(p.instructions))


def memory_picture(source: Any, nodes: dict[int, str] | None = None) -> MemoryPicture:
    """The memory plan of `source` as lanes (one per buffer and device) of blocks (one per tensor: offset, bytes,
    lifetime in instructions). `source`: a placed program (emitted and planned here), an emitted `Program`, a
    `PteProgram`, or a `.pte` path or its bytes. `nodes`: value index -> graph node id, carried on each block."""
    if isinstance(source, (str, os.PathLike, bytes, bytearray, memoryview)):
        source = open_pte(source)
    if isinstance(source, PteProgram):
        return pte_picture(source, nodes)
    if isinstance(source, Program):
        return program_picture(source, nodes)
    if hasattr(source, "graph_module"):
        return program_picture(emit(source), nodes)
    raise TypeError(
        f"memory_picture takes a placed program, an emitted Program, a PteProgram or a .pte path or bytes, not a "
        f"{type(source).__name__}"
    )


__all__ = [
    "Block",
    "Lane",
    "MemoryPicture",
    "lanes_of",
    "memory_picture",
    "plan_picture",
    "program_picture",
    "pte_lifetimes",
    "pte_picture",
]
