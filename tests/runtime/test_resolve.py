"""resolve_operators and MissingOperatorError, in ExecuTorch's words (docs/semantics.md §5)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from devcopy_lib.ops.schema import ET_COPY_OPS_YAML
from devcopy_lib.runtime.libs import aten_lib, portable_lib
from devcopy_lib.runtime.resolve import MissingOperatorError, resolve_operators
from devcopy_lib.tensors.error import Error

TABLE = ["et_copy::_h2d_copy.out", "aten::relu.out", "et_copy::_d2h_copy.out"]


def test_kernels_come_back_in_operator_table_order():
    kernels = resolve_operators(TABLE, [portable_lib()])
    assert [k.name for k in kernels] == TABLE and {k.lib for k in kernels} == {"portable"}


def test_aten_lib_with_et_copy_yaml_resolves_everything():
    kernels = resolve_operators(TABLE, aten_lib(custom_ops=[ET_COPY_OPS_YAML]))
    assert [k.lib for k in kernels] == ["device_copy_ops_aten_lib", "native", "device_copy_ops_aten_lib"]


def test_missing_operator_error_lists_each_entry_then_the_count():
    with pytest.raises(MissingOperatorError, match=r"Missing operator: \[0\] et_copy::_h2d_copy.out") as info:
        resolve_operators(TABLE, ["native"])
    lines = str(info.value).splitlines()
    assert lines[:3] == [
        "Missing operator: [0] et_copy::_h2d_copy.out",
        "Missing operator: [2] et_copy::_d2h_copy.out",
        "There are 2 instructions don't have corresponding operator registered",
    ]
    assert "native (" in lines[3] and "link device_copy_ops_aten_lib" in lines[4]


def test_missing_operator_error_attributes():
    with pytest.raises(MissingOperatorError, match="There are 2 instructions") as info:
        resolve_operators(TABLE, aten_lib())
    assert info.value.kind == "missing_operator" and info.value.error is Error.OperatorMissing
    assert info.value.missing == [(0, "et_copy::_h2d_copy.out"), (2, "et_copy::_d2h_copy.out")]


def test_program_counts_instructions_not_operators():
    call = SimpleNamespace
    program = SimpleNamespace(operators=TABLE, instructions=[call(op=0), call(op=1), call(op=0), call(op=2)])
    with pytest.raises(MissingOperatorError, match="There are 3 instructions don't"):
        resolve_operators(program, ["native"])
