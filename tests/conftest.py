"""Shared fixtures: a scoped simulated accelerator, a thread helper that hands worker failures to the test, and the
skip rules for GPU, reference and deep tests."""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading

import pytest
import torch

from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.devices.backend import cuda_available
from devcopy_lib.devices.device import DeviceType
from devcopy_lib.devices.registry import get_device_allocator
from devcopy_lib.load import load_method

HAS_CUDA = cuda_available()
HAS_EXECUTORCH = importlib.util.find_spec("executorch") is not None


def pytest_addoption(parser):
    parser.addoption(
        "--deep",
        action="store_true",
        default=False,
        help="also run the tests marked `deep` (long, randomized property tests: `make test-deep`)",
    )


def pytest_collection_modifyitems(config, items):
    no_gpu = pytest.mark.skip(reason="needs CUDA + CuPy: run `pytest -m gpu` on the H200 (device tool)")
    no_et = pytest.mark.skip(reason="needs ExecuTorch 1.5.1: install the `reference` extra (not on the CUDA machine)")
    shallow = pytest.mark.skip(reason="a deep property test (many random examples): run `make test-deep`")
    deep = config.getoption("--deep", default=False)
    for item in items:
        if "deep" in item.keywords and not deep:
            item.add_marker(shallow)
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(no_gpu)
        if "reference" in item.keywords and not HAS_EXECUTORCH:
            item.add_marker(no_et)


@pytest.fixture
def sim():
    """A fresh simulated CUDA allocator, registered only for the test's duration."""
    allocator = SimulatedCudaAllocator()
    with scoped_allocators(allocator):
        yield allocator


@pytest.fixture
def run_concurrently():
    """Runs `worker(seed)` on several threads started together, joins them all, then re-raises the first worker's
    exception in the test (a thread's exception would otherwise be only a warning). `switch_interval`, when given, is
    the interpreter's thread switch interval meanwhile: a tiny one makes the workers interleave often."""

    def run(worker, threads: int = 4, timeout_s: float = 120.0, switch_interval: float | None = None) -> None:
        start = threading.Barrier(threads)
        errors: list[BaseException] = []

        def guarded(seed: int) -> None:
            try:
                start.wait(timeout_s)
                worker(seed)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread below
                errors.append(exc)

        pool = [threading.Thread(target=guarded, args=(seed,), name=f"worker-{seed}") for seed in range(threads)]
        previous = sys.getswitchinterval()
        if switch_interval is not None:
            sys.setswitchinterval(switch_interval)
        try:
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join(timeout_s)
        finally:
            sys.setswitchinterval(previous)
        if any(thread.is_alive() for thread in pool):
            raise TimeoutError(f"a worker thread was still running after {timeout_s} s")
        if errors:
            raise errors[0]

    return run


def _random_like(inputs: tuple[torch.Tensor, ...], seed: int) -> tuple[torch.Tensor, ...]:
    """New inputs of the same sizes: random floats; integer ones (token ids) shuffled, so they stay valid."""
    generator = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(x.shape, generator=generator).to(x.dtype)
        if x.is_floating_point()
        else x.reshape(-1)[torch.randperm(x.numel(), generator=generator)].view(x.shape)
        for x in inputs
    )


def _calls(method, input_sets) -> tuple[list, tuple[int, int]]:  # noqa: ANN001
    """The method's outputs for each input set, and the (H2D, D2H) copies the CUDA allocator counted meanwhile."""
    stats = get_device_allocator(DeviceType.CUDA).stats
    before = (stats.h2d_count, stats.d2h_count)
    outputs = [method(*xs) for xs in input_sets]
    return outputs, (stats.h2d_count - before[0], stats.d2h_count - before[1])


def _replays_equal_uncaptured(placed, inputs, mode: str = "portable", libs=None) -> dict:  # noqa: ANN001
    """Load `placed` captured and uncaptured on the registered CUDA allocator, call both on three input sets and
    assert equal outputs (the same kernels: exactly equal) and equal counters (the method's and the allocator's);
    returns the captured method's summary."""
    input_sets = [_random_like(inputs, seed) for seed in range(3)]
    with load_method(placed, mode, libs, capture=False) as plain, load_method(placed, mode, libs) as captured:
        assert captured.capture["pending"]
        expected, plain_moves = _calls(plain, input_sets)
        got, captured_moves = _calls(captured, input_sets)
        for call, (outputs, reference) in enumerate(zip(got, expected, strict=True)):
            for a, b in zip(outputs, reference, strict=True):
                assert torch.equal(a, b), f"call {call}: a captured output differs from the uncaptured one"
        assert captured.copies_executed == plain.copies_executed
        assert captured.caller_copies == plain.caller_copies
        assert captured_moves == plain_moves  # the replayed copies are counted by the allocator too
        summary = captured.capture
    assert not summary["pending"]
    return summary


@pytest.fixture
def replays_equal_uncaptured():
    """`check(placed, inputs, mode="portable", libs=None) -> summary`: graph replay equals the uncaptured run
    (runtime/capture.py) on the registered CUDA allocator, outputs and counters alike."""
    return _replays_equal_uncaptured


@pytest.fixture
def exact_float32():
    """float32 matmuls and convolutions computed in float32 on the GPU (no TF32), so device results match eager on
    the CPU; restored afterwards. Through torch.set_float32_matmul_precision, which every torch since 1.12 has
    (torch.backends.cuda.matmul.allow_tf32 is gone from recent builds)."""
    matmul = torch.get_float32_matmul_precision()
    cudnn = torch.backends.cudnn.allow_tf32
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.set_float32_matmul_precision(matmul)
    torch.backends.cudnn.allow_tf32 = cudnn


# ---- ExecuTorch programs the tests share, built once per session through ExecuTorch's own pipeline (seconds each);
# each fixture skips when ExecuTorch is not importable; tests that use them are marked `reference`.


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
def sin_path(sin_bytes, tmp_path_factory) -> str:
    """The sin program as a .pte file of its own (outside the test's tmp_path, which tests check for what they
    wrote): its path, for the calls that open one."""
    path = tmp_path_factory.mktemp("pte") / "sin.pte"
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
