"""Programs the pte tests share, built once per session through ExecuTorch's own pipeline (slow: seconds each).
Each fixture skips when ExecuTorch is not importable; tests that use them are marked `reference`."""

from __future__ import annotations

import functools
import importlib.util

import pytest
import torch


class SinAddMul(torch.nn.Module):
    """`sin(a + b) * b`: `add` delegated, `sin` and `mul` on the CPU."""

    def forward(self, a, b):
        return torch.sin(a + b) * b


class Reduce(torch.nn.Module):
    """A CPU-only program with a constant and non-tensor arguments (an int list, a bool)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))

    def forward(self, x):
        return (x * self.w).sum(dim=1, keepdim=True)


class LiftedScalar(torch.nn.Module):
    """`sin(x + 1) * 2.5`, on the CPU: the two Python scalars become 0-d constants (the int64 one padded to 16 bytes
    in the .pte's constant segment)."""

    def forward(self, x):
        return torch.sin(x + 1) * 2.5


INPUTS = (torch.randn(2, 3), torch.randn(2, 3))


@functools.cache
def sin_pte(target_device: str | None = "cuda:0") -> bytes:
    from devcopy_lib.pte.backend import executorch_pte

    return executorch_pte(SinAddMul(), INPUTS, ["add.Tensor"], target_device)


@functools.cache
def reduce_pte() -> bytes:
    from devcopy_lib.pte.backend import executorch_pte

    return executorch_pte(Reduce(), (torch.randn(2, 3),), [])


@functools.cache
def lifted_scalar_pte() -> bytes:
    from devcopy_lib.pte.backend import executorch_pte

    return executorch_pte(LiftedScalar(), (torch.randn(2, 3),), [])


@functools.cache
def pass_through_pte() -> bytes:
    """The same model through the reference's pass-through backend: a blob devcopy cannot execute."""
    from devcopy_lib.pte.executorch_reference import executorch_program

    return bytes(executorch_program(SinAddMul(), INPUTS, ["add.Tensor"]).buffer)


def _need_executorch() -> None:
    if importlib.util.find_spec("executorch") is None:
        pytest.skip("needs ExecuTorch 1.5.1: install the `reference` extra")


@pytest.fixture(scope="session")
def sin_bytes() -> bytes:
    _need_executorch()
    return sin_pte()


@pytest.fixture(scope="session")
def sin_program(sin_bytes):
    from devcopy_lib.pte.reader import open_pte

    return open_pte(sin_bytes)


@pytest.fixture
def sin_path(sin_bytes, tmp_path) -> str:
    """The sin program as a .pte file: its path, for the calls that open one."""
    path = tmp_path / "sin.pte"
    path.write_bytes(sin_bytes)
    return str(path)


@pytest.fixture(scope="session")
def sin_instruction_names() -> list[str]:
    """The sin program's instructions by name, in order: both inputs copied to the device, the delegate, its output
    copied back, then sin and mul on the CPU."""
    return [
        "et_copy::_h2d_copy.out",
        "et_copy::_h2d_copy.out",
        "delegate_0",
        "et_copy::_d2h_copy.out",
        "aten::sin.out",
        "aten::mul.out",
    ]


@pytest.fixture(scope="session")
def reduce_bytes() -> bytes:
    _need_executorch()
    return reduce_pte()


@pytest.fixture(scope="session")
def lifted_scalar_bytes() -> bytes:
    _need_executorch()
    return lifted_scalar_pte()


@pytest.fixture(scope="session")
def sin_model():
    """(module, example inputs) of the sin(a + b) * b program."""
    return SinAddMul(), INPUTS


@pytest.fixture(scope="session")
def pass_through_bytes() -> bytes:
    _need_executorch()
    return pass_through_pte()
