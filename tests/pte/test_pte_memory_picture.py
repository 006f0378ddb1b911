"""ExecuTorch's memory plan of a .pte as the picture's data (memory_lanes.py): a lane per non-constant
buffer with its device, each planned tensor at ExecuTorch's (mem_id, offset) for the instructions that use it."""

from __future__ import annotations

import pytest

from devcopy_lib import memory_picture, pte_program
from devcopy_lib.memory_lanes import pte_lifetimes

pytestmark = pytest.mark.reference


def test_the_sin_program_plan_is_two_lanes_of_executorch_offsets(sin_program):
    picture = memory_picture(sin_program)
    assert [(lane.buffer, lane.device, lane.nbytes) for lane in picture.lanes] == [(1, "cpu", 96), (2, "cuda:0", 96)]
    assert picture.instructions == len(sin_program.instructions) == 6
    for lane in picture.lanes:
        assert lane.overlaps() == [] and lane.peak <= lane.nbytes
        for b in lane.blocks:
            v = sin_program.values[b.value]
            assert (v.mem_id, v.offset, v.nbytes) == (lane.buffer, b.offset, b.nbytes)
    planned = {i for i, v in enumerate(sin_program.values) if getattr(v, "mem_id", None) is not None}
    assert {b.value for lane in picture.lanes for b in lane.blocks} == planned
    b_input = picture.block(1)  # `b`: an input read by the copy at 1 and by mul at 5
    assert (b_input.first, b_input.last) == (0, 5) and b_input.label == "v1 float32[2, 3] 24 B (input)"
    out = picture.block(7)
    assert (out.first, out.last) == (5, 6) and out.label.endswith("(#5 aten::mul.out)")


def test_path_bytes_and_program_draw_the_same(sin_path, sin_bytes, sin_program):
    assert memory_picture(sin_path) == memory_picture(sin_bytes) == memory_picture(sin_program)


def _boxes(picture):
    return [
        (lane.buffer, lane.device, sorted((b.value, b.offset, b.first, b.last) for b in lane.blocks))
        for lane in picture.lanes
    ]


def test_pte_program_keeps_the_plan_the_picture_shows(sin_program):
    """The Program devcopy runs keeps ExecuTorch's plan: drawn from it, the same lanes and offsets."""
    direct = memory_picture(sin_program)
    kept = memory_picture(pte_program(sin_program))
    assert _boxes(kept) == _boxes(direct)


def test_uses_and_names_of_instructions(sin_program, sin_instruction_names):
    assert [sin_program.instruction_name(i) for i in range(6)] == sin_instruction_names
    assert sin_program.uses(5) == [6, 1, 7]  # mul(sin, b) -> out, the out listed once
    assert pte_lifetimes(sin_program)[4] == (2, 3)  # the delegate's output, read by the D2H
