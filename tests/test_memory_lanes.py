"""The memory-plan picture's data (memory_lanes.py, docs/explorer.md "The memory plan"): one lane per
buffer, one block per planned tensor at its offset for its lifetime; blocks of one lane never share bytes while both
live, every tensor is drawn once, in its device's lane, and each lane is exactly as large as its highest block."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib import export_and_lower, memory_picture, models, place_devices
from devcopy_lib.devices import CPU, Device
from devcopy_lib.memory_lanes import Block, Lane, MemoryPicture, plan_picture
from devcopy_lib.runtime.memory_plan import MemoryPlan, Request, plan

CUDA0, CUDA1 = Device.parse("cuda:0"), Device.parse("cuda:1")


@st.composite
def _requests(draw):
    out = []
    for key in range(draw(st.integers(1, 30))):
        first = draw(st.integers(0, 15))
        device = draw(st.sampled_from([CPU, CUDA0, CUDA1]))
        out.append(Request(key, device, draw(st.integers(0, 400)), (first, first + draw(st.integers(0, 8)))))
    return out


@settings(max_examples=200, deadline=None)
@given(_requests(), st.sampled_from([1, 16, 64]))
def test_blocks_never_overlap_while_live_and_sizes_add_up_to_the_buffers(requests, alignment):
    memory = plan(requests, alignment)
    picture = plan_picture(memory, 24)
    drawn = [b.value for lane in picture.lanes for b in lane.blocks]
    assert sorted(drawn) == sorted(r.key for r in requests)  # every tensor once
    by_key = {r.key: r for r in requests}
    for lane in picture.lanes:
        assert lane.overlaps() == []
        assert {str(by_key[b.value].device) for b in lane.blocks} <= {lane.device}
        aligned_top = max(
            (b.offset + -(-b.nbytes // alignment) * alignment for b in lane.blocks if b.nbytes), default=0
        )
        assert lane.nbytes == aligned_top and lane.peak <= lane.nbytes
        for b in lane.blocks:
            assert (b.first, b.last, b.nbytes) == (*by_key[b.value].lifetime, by_key[b.value].nbytes)


def test_an_overlap_is_found():
    a, b = Block(0, "a", 0, 64, 0, 3), Block(1, "b", 32, 64, 3, 5)
    c = Block(2, "c", 0, 64, 4, 6)  # after a: the same bytes, never live together
    lane = Lane(1, "cpu", 128, (a, b, c))
    assert lane.overlaps() == [(a, b), (b, c)]
    assert not Block(3, "empty", 0, 0, 0, 9).overlaps(a)


def test_a_plan_without_lifetimes_is_refused_with_the_way_to_draw_it():
    memory = plan([Request(0, CPU, 8, (0, 1))])
    bare = MemoryPlan(memory.buffers, memory.allocations)
    with pytest.raises(ValueError, match=r"keeps no requests .* To fix: .* memory_picture\(program\)"):
        plan_picture(bare, 2)


def test_a_placed_program_is_drawn_per_device_with_its_graph_nodes():
    module, inputs = models.cpu_between()
    placed = place_devices(export_and_lower(module, inputs))
    picture = memory_picture(placed)
    assert isinstance(picture, MemoryPicture)
    assert [(lane.buffer, lane.device) for lane in picture.lanes] == [(1, "cpu"), (2, "cuda:0")]
    names = {n.name for n in placed.graph_module.graph.nodes}
    blocks = [b for lane in picture.lanes for b in lane.blocks]
    assert blocks and all(b.node in names for b in blocks)
    h2d = next(b for b in blocks if b.node == "a_h2d")
    assert h2d.label == "v2 float32[4, 4] 64 B (#0 et_copy::_h2d_copy.out)" and (h2d.first, h2d.last) == (0, 2)
    assert next(b for b in blocks if b.node == "a").label.endswith("(input)")
    assert "cuda:0: buffer 2, 6 tensors in 192 B" in picture.summary()


def test_memory_picture_refuses_what_it_cannot_draw():
    with pytest.raises(TypeError, match="memory_picture takes a placed program.*not a int"):
        memory_picture(3)
