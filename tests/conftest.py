"""Shared fixtures: a scoped simulated accelerator, a thread helper that hands worker failures to the test, and the
skip rules for GPU, reference and deep tests."""

from __future__ import annotations

import importlib.util
import threading

import pytest

from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.devices.backend import cuda_available

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
    exception in the test (a thread's exception would otherwise be only a warning)."""

    def run(worker, threads: int = 4, timeout_s: float = 120.0) -> None:
        start = threading.Barrier(threads)
        errors: list[BaseException] = []

        def guarded(seed: int) -> None:
            try:
                start.wait(timeout_s)
                worker(seed)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread below
                errors.append(exc)

        pool = [threading.Thread(target=guarded, args=(seed,), name=f"worker-{seed}") for seed in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join(timeout_s)
        if any(thread.is_alive() for thread in pool):
            raise TimeoutError(f"a worker thread was still running after {timeout_s} s")
        if errors:
            raise errors[0]

    return run
