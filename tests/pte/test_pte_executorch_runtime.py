"""ExecuTorch's own CPU runtime (`portable_lib`) on the same bytes devcopy runs: it refuses a device-placed program
at the first call (no CUDA allocator in the CPU wheel) and runs a CPU-only one to the outputs devcopy's runtime
gives; its C++ log comes back as data, not on the process's stderr."""

import pytest
import torch

from devcopy_lib import load_method, open_pte, pte_inputs, pte_program, run_in_executorch
from devcopy_lib.pte import executorch_runtime as pte_executorch

pytestmark = pytest.mark.reference


def test_executorch_refuses_the_device_placed_program_at_the_first_call(sin_bytes, sin_program, capfd):
    run = run_in_executorch(sin_bytes, pte_inputs(sin_program), sin_program.operators)
    assert run.available and run.loaded and not run.ok and run.outputs is None
    assert run.registered == 240 + 19 and run.missing == []  # portable_lib's and the quantized lib devcopy loads
    assert "error: 0x20" in run.error
    assert any("No device allocator registered for device type 1" in line for line in run.log)
    assert "the first call failed" in run.summary() and "No device allocator registered" in run.summary()
    assert "No device allocator" not in capfd.readouterr().err  # caught, not written through


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_cpu_only_program_gives_executorchs_outputs_in_devcopy(reduce_bytes, mode):
    program = open_pte(reduce_bytes)
    inputs = pte_inputs(program, seed=3)
    theirs = run_in_executorch(reduce_bytes, inputs, program.operators)
    assert theirs.ok and theirs.error == "" and "loaded and ran" in theirs.summary()
    with load_method(pte_program(program), mode) as method:
        ours = method(*inputs)
    assert len(ours) == len(theirs.outputs)
    for a, b in zip(ours, theirs.outputs, strict=True):
        torch.testing.assert_close(a, b)


def test_a_program_executorch_cannot_read_is_a_failure_in_the_result(sin_bytes):
    run = run_in_executorch(sin_bytes[:200], [])
    assert run.available and not run.ok and "0x" in run.error and "failed" in run.summary()


def test_without_executorch_the_result_says_so(monkeypatch):
    monkeypatch.setattr(pte_executorch.importlib.util, "find_spec", lambda name: None)
    run = run_in_executorch(b"", [])
    assert not run.available and not run.ok and "not importable" in run.summary()
    assert pte_executorch.executorch_operators() is None
