"""open_pte reads what ExecuTorch wrote, through ExecuTorch's own deserializer: values with their planned place and
device, inputs and outputs, non-tensor values, constants, and the same program from a path, bytes or a manager."""

import pathlib

import pytest
import torch

from devcopy_lib.devices.device import CPU, Device, DeviceType
from devcopy_lib.pte.reader import PteKernel, PteList, PteScalar, PteTensor, open_pte

pytestmark = pytest.mark.reference

CUDA0 = Device(DeviceType.CUDA, 0)


def test_values_carry_executorchs_memory_plan_and_device(sin_program):
    p = sin_program
    assert len(p.values) == 8 and p.inputs == [0, 1] and p.outputs == [7]
    tensors = [p.tensor(i) for i in range(8)]
    assert all(t.dtype == torch.float32 and t.sizes == (2, 3) and t.dim_order == (0, 1) for t in tensors)
    assert all(t.dynamism == "STATIC" and t.constant == 0 for t in tensors)
    assert [t.device for t in tensors] == [CPU, CPU, CUDA0, CUDA0, CUDA0, CPU, CPU, CPU]
    assert [t.mem_id for t in tensors] == [1, 1, 2, 2, 2, 1, 1, 1]
    # every planned tensor lies inside its buffer, and each buffer holds tensors of its own device only
    for t in tensors:
        assert t.offset is not None and t.mem_id is not None
        assert t.offset + t.nbytes <= p.buffer_sizes[t.mem_id]
        assert p.buffer_devices.get(t.mem_id, CPU) == t.device


def test_kernel_args_are_value_indices_outs_last(sin_program):
    p = sin_program
    h2d, d2h = (p.instructions[0], p.instructions[3])
    assert isinstance(h2d, PteKernel) and h2d.args == (0, 2, 2)  # (self, out) + the returned out
    assert isinstance(d2h, PteKernel) and d2h.args == (4, 5, 5)
    assert p.tensor(h2d.args[0]).device == CPU and p.tensor(h2d.args[1]).device == CUDA0
    assert p.tensor(d2h.args[0]).device == CUDA0 and p.tensor(d2h.args[1]).device == CPU


def test_a_path_bytes_and_a_bytearray_open_the_same_program(sin_path, sin_bytes):
    by_path, by_str = open_pte(pathlib.Path(sin_path)), open_pte(sin_path)
    by_bytes, by_array = open_pte(sin_bytes), open_pte(bytearray(sin_bytes))
    assert by_path == by_str == by_bytes == by_array
    assert by_path.size == len(sin_bytes)


def test_constants_and_non_tensor_values(reduce_bytes):
    p = open_pte(reduce_bytes)
    assert p.operators == ["aten::mul.out", "aten::sum.IntList_out"]
    constant = [v for v in p.values if isinstance(v, PteTensor) and v.constant > 0]
    assert len(constant) == 1 and constant[0].mem_id is None and constant[0].sizes == (2, 3)
    data = p.constants[constant[0].constant]
    assert torch.frombuffer(bytearray(data), dtype=torch.float32).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    lists = [v for v in p.values if isinstance(v, PteList)]
    assert any(v.kind == "IntList" for v in lists)
    (int_list,) = [v for v in lists if v.kind == "IntList"]
    assert [p.values[i] for i in int_list.items] == [PteScalar(1)]  # dim=[1], stored as value indices
    assert PteScalar(True) in p.values  # keepdim
    assert p.buffer_devices == {} and p.delegates == []


def test_str_lists_every_instruction(sin_program):
    text = str(sin_program)
    assert "buffers [0, 96, 96] (2: cuda:0)" in text
    assert "2: delegate DevcopyExportBackend[2, 3, 4]" in text and "5: aten::mul.out[6, 1, 7, 7]" in text


def test_a_0d_constant_in_its_padded_segment_opens_with_its_value(lifted_scalar_bytes):
    """ExecuTorch pads each constant to 16 bytes in the segment and keeps the padding when it reads it back
    (`_restore_constant_segment`): the 8-byte int64 scalar arrives as 16 bytes. Only a shorter one is refused."""
    from devcopy_lib.pte.convert import pte_program

    p = open_pte(lifted_scalar_bytes)
    scalars = {v.dtype: i for i, v in enumerate(p.values) if isinstance(v, PteTensor) and v.constant and not v.sizes}
    assert set(scalars) == {torch.int64, torch.float32}
    int64 = p.tensor(scalars[torch.int64])
    assert len(p.constants[int64.constant]) == 16 > int64.nbytes == 8
    program = pte_program(p)  # the padding stays out of the value
    assert program.tensor(scalars[torch.int64]).data.tolist() == 1
    torch.testing.assert_close(program.tensor(scalars[torch.float32]).data, torch.tensor(2.5))
