"""A bad program is a devcopy error naming what was wrong and the fix, never another exception and never a
half-read program: a missing path, a directory, truncated or corrupted bytes, a wrong magic, an unknown plan, a
source of the wrong type; a fuzz over flipped and truncated bytes holds open_pte to that."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devcopy_lib.names import ERROR_KINDS
from devcopy_lib.pte.reader import (
    PteDelegate,
    PteKernel,
    PteList,
    PteLoadError,
    PteProgram,
    PteTensor,
    PteUsageError,
    open_pte,
)
from devcopy_lib.tensors.error import Error


def _load_error(source, *, match: str) -> PteLoadError:
    with pytest.raises(PteLoadError, match=match) as info:
        open_pte(source)
    assert info.value.kind == "load" and "To fix:" in str(info.value)
    return info.value


def test_the_error_kinds_are_shared_kinds():
    assert PteLoadError.kind == "load" and PteUsageError.kind == "usage"
    assert {PteLoadError.kind, PteUsageError.kind} <= set(ERROR_KINDS)


def test_a_missing_path_and_a_directory(tmp_path):
    error = _load_error(tmp_path / "nope.pte", match="no such .pte file")
    assert error.error == Error.NotFound
    error = _load_error(tmp_path, match="is a directory, not a .pte file")
    assert error.error == Error.NotFound


def test_a_source_of_the_wrong_type_is_a_usage_error():
    with pytest.raises(PteUsageError, match="takes a .pte path, its bytes or an ExecutorchProgramManager, not a int"):
        open_pte(3)


@pytest.mark.parametrize("data", [b"", b"ET12", b"\x00" * 7])
def test_shorter_than_a_header(data):
    error = _load_error(data, match="shorter than a .pte header")
    assert error.error == Error.InvalidProgram


@pytest.mark.reference
def test_a_wrong_magic_is_named(sin_bytes):
    data = sin_bytes[:4] + b"ET11" + sin_bytes[8:]
    _load_error(data, match=r"file identifier b'ET11', expected b'ET12'")
    _load_error(b"PK\x03\x04" + b"\x00" * 100, match="not an ExecuTorch 1.5.1 program")


@pytest.mark.reference
@pytest.mark.parametrize("keep", [12, 64, 0.5, -1])
def test_truncated_bytes(sin_bytes, keep):
    cut = int(len(sin_bytes) * keep) if isinstance(keep, float) else keep
    _load_error(sin_bytes[:cut], match="ExecuTorch cannot parse the program|inconsistent program")


@pytest.mark.reference
def test_a_truncated_file_on_disk(sin_bytes, tmp_path):
    path = tmp_path / "cut.pte"
    path.write_bytes(sin_bytes[: len(sin_bytes) // 3])
    _load_error(path, match="truncated or corrupted")


@pytest.mark.reference
def test_an_unknown_plan_is_a_usage_error_naming_the_plans(sin_bytes):
    with pytest.raises(PteUsageError, match="no plan 'backward'. Its plans: forward; pass one of them"):
        open_pte(sin_bytes, plan="backward")
    assert open_pte(sin_bytes, plan="forward").plan == "forward"


def _op_index(plan):
    plan.chains[0].instructions[4].instr_args.op_index = 4  # the table has 4 operators: 0..3


def _negative_op_index(plan):
    plan.chains[0].instructions[4].instr_args.op_index = -1  # Python would read the last operator


def _negative_kernel_arg(plan):
    plan.chains[0].instructions[5].instr_args.args[1] = -1


def _negative_delegate_index(plan):
    plan.chains[0].instructions[2].instr_args.delegate_index = -1


def _kernel_arg(plan):
    plan.chains[0].instructions[5].instr_args.args[1] = 8  # 8 values: 0..7


def _delegate_index(plan):
    plan.chains[0].instructions[2].instr_args.delegate_index = 1


def _memory_id(plan):
    plan.values[2].val.allocation_info.memory_id = 3  # buffers 0..2


def _overflowing_offset(plan):
    plan.values[2].val.allocation_info.memory_offset_low = 96 - 23  # 24 bytes in a 96-byte buffer


def _output(plan):
    plan.outputs[0] = 8


def _buffer_device(plan):
    plan.non_const_buffer_device[0].buffer_idx = 3


@pytest.mark.reference
@pytest.mark.parametrize(
    "corrupt, problem",
    [
        (_op_index, "instruction 4's operator is 4, outside 0..3"),
        (_negative_op_index, "instruction 4's operator is -1, outside 0..3"),
        (_negative_kernel_arg, "instruction 5's arg 1 is -1, outside 0..7"),
        (_negative_delegate_index, "instruction 2's delegate is -1, outside 0..0"),
        (_kernel_arg, "instruction 5's arg 1 is 8, outside 0..7"),
        (_delegate_index, "instruction 2's delegate is 1, outside 0..0"),
        (_memory_id, "value 2's memory_id is 3, outside 0..2"),
        (_overflowing_offset, r"value 2 \(24 bytes at offset 73\) overflows buffer 2 of 96 bytes"),
        (_output, "output 0 is 8, outside 0..7"),
        (_buffer_device, r"non_const_buffer_device\[0\]'s buffer is 3, outside 0..2"),
    ],
    ids=lambda c: getattr(c, "__name__", "")[1:] or None,
)
def test_an_index_out_of_range_is_an_inconsistent_program(sin_bytes, corrupt, problem):
    """A program ExecuTorch parses, but with one index just past the table it points into, or negative (which
    Python would read from the table's end), or a tensor past its buffer's end: refused by devcopy's checks, not an
    IndexError or a wrong read later."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pte = deserialize_pte_binary(sin_bytes)
    corrupt(pte.program.execution_plan[0])
    data = bytes(serialize_pte_binary(pte))
    _load_error(data, match="inconsistent program: " + problem)


@pytest.mark.reference
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flips=st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(1, 255)), min_size=0, max_size=4),
    cut=st.one_of(st.none(), st.integers(0, 1 << 30)),
)
def test_corrupted_bytes_open_or_fail_as_a_devcopy_error(sin_bytes, flips, cut):
    data = bytearray(sin_bytes)
    for where, mask in flips:
        data[where % len(data)] ^= mask
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    try:
        program = open_pte(bytes(data))
    except (PteLoadError, PteUsageError) as error:
        assert error.kind in ERROR_KINDS and str(error)
    else:
        assert isinstance(program, PteProgram)
        _assert_whole(program)
        str(program)


def _assert_whole(p: PteProgram) -> None:
    """A program that opened is whole: every index it holds points into its table, every planned tensor fits."""
    n = len(p.values)
    assert all(0 <= i < n for i in p.inputs + p.outputs)
    for ins in p.instructions:
        if isinstance(ins, PteKernel):
            assert 0 <= ins.op < len(p.operators) and all(0 <= a < n for a in ins.args)
        elif isinstance(ins, PteDelegate):
            assert 0 <= ins.delegate < len(p.delegates) and all(0 <= a < n for a in ins.args)
    for v in p.values:
        if isinstance(v, PteTensor) and v.mem_id is not None:
            assert 0 <= v.mem_id < len(p.buffer_sizes) and v.offset is not None
            assert v.offset + v.nbytes <= p.buffer_sizes[v.mem_id]
        if isinstance(v, PteTensor):
            assert 0 <= v.constant < max(len(p.constants), 1)
        if isinstance(v, PteList) and not v.items_are_values:
            assert all(-1 <= i < n for i in v.items)
    assert all(0 <= b < len(p.buffer_sizes) for b in p.buffer_devices)
