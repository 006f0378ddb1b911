"""The libs by name and registration_status (docs/semantics.md §5)."""

from __future__ import annotations

import pytest
import torch

from devcopy_lib.ops.schema import ET_COPY_OPS_YAML, NATIVE_FUNCTIONS_YAML
from devcopy_lib.runtime.libs import aten_lib, lib_by_name, native_lib, portable_lib, registration_status
from devcopy_lib.tensors.context import KernelRuntimeContext


def test_libs_are_cached():
    assert portable_lib() is lib_by_name("portable") and native_lib() is lib_by_name("native")


def test_unknown_lib_names_the_valid_ones():
    with pytest.raises(ValueError, match="Valid libs: portable, native, device_copy_ops_aten_lib"):
        lib_by_name("aten")


def test_native_lib_holds_every_native_function():
    assert len(native_lib().ops) > 3000 and "aten::relu.out" in native_lib().ops
    assert native_lib().source == NATIVE_FUNCTIONS_YAML


def test_native_kernels_run_pytorch_ops():
    kernel = native_lib().kernel("aten::add.out")
    out = torch.empty(2)
    assert kernel(KernelRuntimeContext(), [torch.ones(2), torch.ones(2), 3, out]) is out
    assert out.tolist() == [4, 4]


def test_aten_lib_without_custom_ops_lacks_et_copy():
    assert [lib.name for lib in aten_lib()] == ["native"]
    assert [lib.name for lib in aten_lib(custom_ops=[ET_COPY_OPS_YAML])] == ["native", "device_copy_ops_aten_lib"]


def test_status_rows_say_registered_or_not():
    rows = registration_status(ops=["et_copy::_h2d_copy.out"])
    assert {(r.lib, r.mode, r.registered) for r in rows} == {
        ("portable", "portable", True),
        ("native", "aten", False),
        ("device_copy_ops_aten_lib", "aten", True),
    }
    assert all(r.kernel_key == "" for r in rows if r.registered)


def test_status_filters_by_lib_and_glob():
    rows = registration_status(libs=["portable"], ops=["aten::add.*"])
    assert {r.op for r in rows} == {"aten::add.out", "aten::add.Scalar_out"} and all(r.registered for r in rows)


def test_a_custom_op_yaml_with_an_unknown_kernel_name_is_a_yaml_error_with_file_and_line(tmp_path):
    from devcopy_lib import export_and_lower, load_method, models, place_devices
    from devcopy_lib.ops.schema import OpYamlError

    text = open(ET_COPY_OPS_YAML).read()  # the shipped file with one kernel name misspelt
    text = text.replace("_d2h_copy_out", "_d2h_cpy_out")
    path = tmp_path / "typo_ops.yaml"
    path.write_text(text)
    line = text.splitlines().index("- func: et_copy::_d2h_copy.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)") + 1
    module, inputs = models.add()
    placed = place_devices(export_and_lower(module, inputs))
    with pytest.raises(OpYamlError) as refused:
        load_method(placed, "aten", aten_lib([str(path)]), backend="simulated")
    message = str(refused.value)
    assert message.startswith(f"{path}:{line}: entry 1: kernels[0]: unknown kernel_name 'devcopy::aten::_d2h_cpy_out'")
    assert "Valid: devcopy::portable::aten_out" in message
    assert refused.value.kind == "usage"
