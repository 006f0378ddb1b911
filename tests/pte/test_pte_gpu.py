"""ExecuTorch's own .pte run on the CuPy backend (H200): its cuda:0 buffer allocated by CuPy through the registered
allocator, the et_copy kernels moving real bytes, outputs equal eager in both modes - where ExecuTorch's CPU runtime
refuses the same bytes. Needs CUDA + CuPy and ExecuTorch 1.5.1 (`pytest -m gpu tests/pte`)."""

import pytest
import torch

from devcopy_lib import compare_outputs, load_method, make_allocator, models, open_pte, pte_program, scoped_allocators
from devcopy_lib.cli import main

pytestmark = [pytest.mark.gpu, pytest.mark.reference]


@pytest.fixture(scope="module")
def cpu_between():
    from devcopy_lib import executorch_pte

    module, _ = models.cpu_between()
    inputs = (torch.randn(512, 512), torch.randn(512, 512))
    return module, inputs, executorch_pte(module, inputs, target_device="cuda:0")


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_pte_runs_on_cupy_equal_to_eager(cpu_between, mode):
    module, inputs, data = cpu_between
    program = open_pte(data)
    with make_allocator("cupy") as allocator, scoped_allocators(allocator):
        with load_method(pte_program(program), mode) as method:
            outputs = method(*inputs)
            assert method.copies_executed == {"h2d": 4, "d2h": 2}
            assert method.arena_sizes["cuda:0"] == program.buffer_sizes[2]  # ExecuTorch's device buffer, on CuPy
        assert allocator.backend == "cupy"
    with torch.no_grad():
        ok, err = compare_outputs(outputs, [module(*inputs)])
    assert ok, err


def test_devcopy_run_pte_on_cupy(cpu_between, tmp_path, capsys):
    import json

    path = tmp_path / "cpu_between.pte"
    path.write_bytes(cpu_between[2])
    assert main(["run", str(path), "--backend", "cupy", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] and result["backend"] == "cupy" and result["arena_bytes"]["cuda:0"] > 0
