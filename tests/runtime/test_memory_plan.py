"""Memory planning with devices (docs/semantics.md §7): per-device arenas, lifetime-based reuse, constants in buffer
0."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.devices import CPU, Device
from devcopy_lib.runtime.memory_plan import Request, lifetimes, plan, plan_program
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
