"""The Program data types: tensor specs, value tables, instructions and the operator table."""

from __future__ import annotations

import pytest
import torch

from devcopy_lib.devices import Device
from devcopy_lib.runtime.program import (
    DelegateCall,
    KernelCall,
    Program,
    ScalarValue,
    TensorListValue,
    TensorSpec,
    TensorValue,
)


def test_tensor_spec_sizes_give_numel_and_bytes():
    spec = TensorSpec(torch.float16, (2, 3), Device.parse("cuda:1"), dynamic=True)
    assert (spec.numel, spec.nbytes) == (6, 12)
    assert TensorSpec(torch.int64, ()).nbytes == 8


def test_tensor_indices_cover_lists_and_delegate_outputs():
    t = TensorValue(TensorSpec(torch.float32, (1,)))
    program = Program(
        values=[t, t, TensorListValue((0, None, 1)), ScalarValue(1), t],
        instructions=[KernelCall(0, (2, 3, 4)), DelegateCall(0, (0,), (4,))],
        operators=["aten::cat.out"],
        inputs=[0, 1],
        outputs=[4],
    )
    assert program.tensor_indices(program.instructions[0]) == [0, 1, 4]
    assert program.tensor_indices(program.instructions[1]) == [0, 4]
    assert program.operator_of(program.instructions[0]) == "aten::cat.out"


def test_tensor_lookup_names_the_wrong_kind():
    program = Program(values=[ScalarValue(2)], instructions=[], operators=[], inputs=[], outputs=[])
    with pytest.raises(TypeError, match="value 0 is a ScalarValue"):
        program.tensor(0)


def test_str_lists_instructions_with_operator_names():
    t = TensorValue(TensorSpec(torch.float32, (1,)))
    program = Program(
        values=[t, t], instructions=[KernelCall(0, (0, 1))], operators=["aten::relu.out"], inputs=[0], outputs=[1]
    )
    assert "0: aten::relu.out[0, 1]" in str(program)
