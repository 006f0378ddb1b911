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


def test_the_fix_names_only_unlinked_libs_of_the_methods_mode_that_hold_the_op():
    from devcopy_lib.runtime.resolve import fix_hint, libs_holding

    h2d, d2d = "et_copy::_h2d_copy.out", "et_copy::_d2d_copy.out"
    assert libs_holding([h2d, "aten::cumsum.out"], "aten") == {
        "native": ["aten::cumsum.out"],
        "device_copy_ops_aten_lib": [h2d],
    }  # the portable lib holds both too, but an ATen-mode method cannot link it
    assert libs_holding([h2d], "portable") == {"portable": [h2d]}
    assert "To fix: link native; it registers aten::cumsum.out (--libs device_copy_ops_aten_lib,native)." in (
        fix_hint("aten", ["device_copy_ops_aten_lib"], ["aten::cumsum.out"])
    )
    assert fix_hint("aten", ["native", "device_copy_ops_aten_lib"], [d2d]).startswith(
        "To fix: link peer_copy_ops_aten_lib too (devcopy's peer copy)"
    )
    assert fix_hint("portable", ["portable"], ["my::op.out"]) == (
        "To fix: no portable-mode lib registers my::op.out: register a kernel for it, or delegate the op so that it "
        "runs on the device."
    )


def test_a_method_with_no_lib_is_told_the_libs_of_its_own_mode():
    with pytest.raises(MissingOperatorError) as info:
        resolve_operators(["et_copy::_h2d_copy.out"], [], mode="aten")
    message = str(info.value)
    assert "Linked libs: none." in message and "portable" not in message
    assert "link device_copy_ops_aten_lib next to native" in message


def test_registry_report_rows_and_the_fix_for_an_op_no_linked_lib_registers():
    """`registry_report` (what `devcopy registry` prints), called without the CLI: one row per (op, lib), and for
    an op none of the linked libs registers, the libs of this mode that would."""
    from devcopy_lib.runtime.libs import lib_by_name
    from devcopy_lib.runtime.resolve import registry_report

    ops = ["et_copy::_h2d_copy.out", "aten::cumsum.out"]
    report = registry_report("aten", [lib_by_name("device_copy_ops_aten_lib")], ops)
    assert report["mode"] == "aten" and report["ops"] == ops
    assert [lib["name"] for lib in report["libs"]] == ["device_copy_ops_aten_lib"]
    assert {(r["op"], r["registered"]) for r in report["rows"]} == {
        ("et_copy::_h2d_copy.out", True),
        ("aten::cumsum.out", False),
    }
    assert report["fixes"] == [{"op": "aten::cumsum.out", "libs": ["native"]}]
