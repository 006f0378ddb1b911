"""`devcopy registry`: JSON shape, defaults per mode, exit codes."""

from __future__ import annotations

import json

import pytest

from devcopy_lib.cli import main


def run_json(capsys, *argv):
    code = main(["registry", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_portable_registers_the_et_copy_ops(capsys):
    code, result = run_json(capsys)
    assert code == 0 and result["ok"] and result["mode"] == "portable"
    assert {(r["op"], r["lib"], r["registered"]) for r in result["rows"]} == {
        ("et_copy::_h2d_copy.out", "portable", True),
        ("et_copy::_d2h_copy.out", "portable", True),
        ("et_copy::_h2d_copy.out", "quantized", False),
        ("et_copy::_d2h_copy.out", "quantized", False),
    }


def test_aten_defaults_to_native_device_copy_and_quantized_libs(capsys):
    code, result = run_json(capsys, "--mode", "aten")
    names = ["native", "device_copy_ops_aten_lib", "quantized_ops_aten_lib"]
    assert code == 0 and [lib["name"] for lib in result["libs"]] == names
    by_lib = {(r["op"], r["lib"]): r["registered"] for r in result["rows"]}
    assert by_lib[("et_copy::_h2d_copy.out", "native")] is False
    assert by_lib[("et_copy::_h2d_copy.out", "device_copy_ops_aten_lib")] is True


def test_ops_filter_takes_names_and_globs(capsys):
    code, result = run_json(capsys, "--mode", "aten", "--libs", "native", "--ops", "aten::relu.out,aten::add.*out")
    assert code == 0 and {r["op"] for r in result["rows"]} >= {
        "aten::relu.out",
        "aten::add.out",
        "aten::add.Scalar_out",
    }
    row = next(r for r in result["rows"] if r["op"] == "aten::relu.out")
    assert set(row) == {"op", "mode", "lib", "registered", "kernel_key", "kernel_name", "source"}


def test_unknown_lib_is_a_usage_error(capsys):
    code, result = run_json(capsys, "--libs", "portible")
    assert code == 2 and not result["ok"] and "Close matches: portable" in result["error"]["message"]


def test_lib_of_another_mode_is_a_usage_error(capsys):
    code, result = run_json(capsys, "--mode", "portable", "--libs", "native")
    assert code == 2 and "not portable-mode" in result["error"]["message"]


def test_text_output_marks_unregistered_ops(capsys):
    assert main(["registry", "--mode", "aten", "--libs", "native"]) == 0
    assert "NOT registered" in capsys.readouterr().out


def test_an_op_no_linked_lib_registers_names_the_lib_of_this_mode_that_does(capsys):
    code, result = run_json(capsys, "--mode", "aten", "--libs", "native")
    assert code == 0 and result["fixes"] == [
        {"op": "et_copy::_h2d_copy.out", "libs": ["device_copy_ops_aten_lib"]},
        {"op": "et_copy::_d2h_copy.out", "libs": ["device_copy_ops_aten_lib"]},
    ]  # never the portable lib, which registers them too but cannot be linked in ATen mode
    assert main(["registry", "--mode", "aten", "--libs", "device_copy_ops_aten_lib", "--ops", "aten::cumsum.out"]) == 0
    assert "fix: aten::cumsum.out: add native to --libs" in capsys.readouterr().out


def test_nothing_to_fix_when_the_linked_libs_register_every_op(capsys):
    code, result = run_json(capsys, "--mode", "aten")
    assert code == 0 and result["fixes"] == []


@pytest.mark.parametrize("mode, lib", [("portable", "quantized"), ("aten", "quantized_ops_aten_lib")])
def test_the_quantized_lib_registers_executorchs_quantized_out_variants(capsys, mode, lib):
    code, result = run_json(capsys, "--mode", mode, "--ops", "quantized_decomposed::*")
    registered = {r["op"]: r["kernel_name"] for r in result["rows"] if r["registered"]}
    assert code == 0 and {r["lib"] for r in result["rows"] if r["registered"]} == {lib}
    assert {
        "quantized_decomposed::quantize_per_tensor.out",
        "quantized_decomposed::dequantize_per_tensor.out",
        "quantized_decomposed::quantize_per_channel.out",
        "quantized_decomposed::dequantize_per_channel.out",
        "quantized_decomposed::choose_qparams.Tensor_out",
    } <= set(registered)
    assert registered["quantized_decomposed::dequantize_per_tensor.out"] == (
        "devcopy::quantized::dequantize_per_tensor_out"
    )


def test_without_the_quantized_lib_the_fix_names_it(capsys):
    code, result = run_json(capsys, "--libs", "portable", "--ops", "quantized_decomposed::dequantize_per_tensor.out")
    assert code == 0 and result["fixes"] == [
        {"op": "quantized_decomposed::dequantize_per_tensor.out", "libs": ["quantized"]}
    ]
