"""Memory planning with devices (docs/semantics.md §7): per-device arenas, lifetime-based reuse, constants in
buffer 0."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.devices import CPU, Device
from devcopy_lib.runtime.memory_plan import Buffer, MemoryPlan, Request, lifetimes, plan, plan_program
from devcopy_lib.runtime.program import KernelCall, Program, TensorSpec, TensorValue

CUDA0, CUDA1 = Device.parse("cuda:0"), Device.parse("cuda:1")


def test_buffer_zero_is_reserved_for_constants():
    memory = plan([Request("a", CPU, 16, (0, 1))])
    assert memory.buffers[0].nbytes == 0
    assert memory.allocations["a"].buffer == 1


def test_cpu_is_planned_first_then_devices_by_index():
    memory = plan([Request("d1", CUDA1, 8, (0, 0)), Request("d0", CUDA0, 8, (0, 0)), Request("h", CPU, 8, (0, 0))])
    assert [b.device for b in memory.buffers[1:]] == [CPU, CUDA0, CUDA1]
    assert memory.arena_sizes() == {"cpu": 64, "cuda:0": 64, "cuda:1": 64}


def test_disjoint_lifetimes_share_bytes_overlapping_do_not():
    memory = plan([Request("a", CPU, 100, (0, 1)), Request("b", CPU, 100, (2, 3)), Request("c", CPU, 100, (1, 2))])
    a, b, c = (memory.allocations[k] for k in "abc")
    assert a.offset == b.offset
    assert c.offset != a.offset
    assert memory.arena_sizes() == {"cpu": 256}


def test_cpu_and_cuda_never_share_a_buffer_even_with_disjoint_lifetimes():
    memory = plan([Request("h", CPU, 32, (0, 0)), Request("d", CUDA0, 32, (5, 5))])
    assert memory.allocations["h"].buffer != memory.allocations["d"].buffer


def test_program_lifetimes_span_inputs_to_outputs():
    spec = TensorSpec(torch.float32, (4,))
    program = Program(
        values=[TensorValue(spec)] * 3,
        operators=["aten::relu.out"],
        instructions=[KernelCall(0, (0, 1)), KernelCall(0, (1, 2))],
        inputs=[0],
        outputs=[2],
    )
    assert lifetimes(program) == {0: (0, 0), 1: (0, 1), 2: (1, 2)}
    memory = plan_program(program)
    assert set(memory.allocations) == {0, 1, 2}
    assert program.memory_plan is memory


def test_an_unread_input_and_a_forwarded_output_still_get_lifetimes():
    """An input no instruction reads is live at the start; an output no instruction writes lives to the end."""
    spec = TensorSpec(torch.float32, (4,))
    program = Program(
        values=[TensorValue(spec)] * 4,
        operators=["aten::relu.out"],
        instructions=[KernelCall(0, (0, 1))],
        inputs=[0, 2],
        outputs=[1, 3],
    )
    assert lifetimes(program) == {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (1, 1)}


def test_arena_sizes_add_up_the_buffers_of_one_device():
    buffers = (Buffer(CPU, 0), Buffer(CPU, 64), Buffer(CUDA0, 128), Buffer(CPU, 32))
    assert MemoryPlan(buffers, {}).arena_sizes() == {"cpu": 96, "cuda:0": 128}


def test_plan_program_aligns_offsets_as_asked():
    spec = TensorSpec(torch.float32, (3,))  # 12 bytes: 16 apart at alignment 16, 64 apart by default
    values = [TensorValue(spec)] * 2
    program = Program(
        values=values, operators=["aten::relu.out"], instructions=[KernelCall(0, (0, 1))], inputs=[0], outputs=[1]
    )
    assert sorted(a.offset for a in plan_program(program, alignment=16).allocations.values()) == [0, 16]
    assert sorted(a.offset for a in plan_program(program).allocations.values()) == [0, 64]


def test_constants_and_unplanned_tensors_get_no_arena_memory():
    spec = TensorSpec(torch.float32, (4,))
    program = Program(
        values=[
            TensorValue(spec, planned=False),
            TensorValue(spec, planned=False, data=torch.ones(4)),
            TensorValue(spec),
        ],
        operators=["aten::add.out"],
        instructions=[KernelCall(0, (0, 1, 2))],
        inputs=[0],
        outputs=[2],
    )
    assert set(plan_program(program).allocations) == {2}


_devices = st.sampled_from([CPU, CUDA0, CUDA1])


@st.composite
def _requests(draw):
    count = draw(st.integers(1, 24))
    out = []
    for key in range(count):
        first = draw(st.integers(0, 12))
        out.append(Request(key, draw(_devices), draw(st.integers(0, 300)), (first, first + draw(st.integers(0, 6)))))
    return out


@settings(max_examples=200, deadline=None)
@given(_requests(), st.sampled_from([1, 16, 64]))
def test_no_two_live_tensors_overlap_and_devices_stay_apart(requests, alignment):
    memory = plan(requests, alignment)
    for request in requests:
        where = memory.allocations[request.key]
        buffer = memory.buffers[where.buffer]
        assert where.buffer != 0
        assert buffer.device == request.device
        assert where.offset % alignment == 0
        assert where.offset + request.nbytes <= buffer.nbytes
    for i, a in enumerate(requests):
        for b in requests[i + 1 :]:
            wa, wb = memory.allocations[a.key], memory.allocations[b.key]
            if wa.buffer != wb.buffer or not a.nbytes or not b.nbytes:
                continue
            live_together = not (a.lifetime[1] < b.lifetime[0] or b.lifetime[1] < a.lifetime[0])
            bytes_overlap = wa.offset < wb.offset + b.nbytes and wb.offset < wa.offset + a.nbytes
            assert not (live_together and bytes_overlap), (a, b, wa, wb)
    assert len({b.device for b in memory.buffers[1:]}) == len(memory.buffers) - 1


def _first_fit_by_scan(requests, alignment):
    """The oracle: the greedy first fit, scanning every placed allocation for each request (quadratic)."""
    placed, offsets = [], {}
    for request in sorted(requests, key=lambda r: (-r.nbytes, r.lifetime)):
        size = -(-request.nbytes // alignment) * alignment
        busy = sorted(
            (off, off + sz)
            for off, sz, life in placed
            if sz and not (life[1] < request.lifetime[0] or request.lifetime[1] < life[0])
        )
        offset = 0
        for start, end in busy:
            if offset + size <= start:
                break
            offset = max(offset, end)
        placed.append((offset, size, request.lifetime))
        offsets[request.key] = offset
    return max((off + sz for off, sz, _ in placed), default=0), offsets


_lifetimes = st.tuples(st.integers(0, 40), st.integers(0, 12) | st.integers(0, 60)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5000), _lifetimes), max_size=60), st.sampled_from([1, 64]))
def test_indexed_lifetimes_plan_exactly_as_a_scan_of_everything_placed(specs, alignment):
    requests = [Request(i, CPU, nbytes, life) for i, (nbytes, life) in enumerate(specs)]
    got = plan(requests, alignment)
    total, offsets = _first_fit_by_scan(requests, alignment)
    assert got.buffers[-1].nbytes == total if requests else len(got.buffers) == 1
    assert {key: a.offset for key, a in got.allocations.items()} == offsets


@pytest.mark.parametrize("nbytes, lifetime", [(-1, (0, 1)), (8, (2, 1))])
def test_a_bad_request_is_refused_naming_it(nbytes, lifetime):
    with pytest.raises(ValueError, match=r"^Bad planning request .*: nbytes must be >= 0 and lifetime \(first, last\)"):
        plan([Request("a", CPU, 8, (0, 0)), Request("b", CPU, nbytes, lifetime)])


def test_the_plan_keeps_its_requests_and_a_cpu_constants_buffer():
    requests = (Request("a", CUDA0, 8, (0, 1)),)
    memory = plan(requests)
    assert memory.requests == requests and memory.buffers[0] == Buffer(CPU, 0)
