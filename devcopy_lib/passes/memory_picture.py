"""`memory_picture(source)`: the memory plan of a program as lanes and blocks (`runtime.memory_picture`), for the
explorer's memory-plan view (docs/explorer.md, docs/pte.md). `source` is devcopy's own program (placed, or
emitted: devcopy's plan, `runtime/memory_plan.py`) or ExecuTorch's (`.pte` path, bytes or `PteProgram`: its
`non_const_buffer_sizes`, each tensor's `mem_id`/`offset`, lifetimes from the instructions that use it)."""

from __future__ import annotations

import os
from typing import Any

from ..devices.device import CPU
from ..names import format_bytes
from ..runtime.memory_picture import Block, MemoryPicture, lanes_of, program_picture
from ..runtime.program import Program
from .emit import emit
from .pte import PteProgram, PteTensor, open_pte


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


__all__ = ["memory_picture", "pte_lifetimes", "pte_picture"]
