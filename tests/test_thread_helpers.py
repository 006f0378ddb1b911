"""The tests' thread helper hands a worker's failure to the test: a copy engine that refuses to run off the main
thread must make a concurrent-copy test fail, not pass with a warning."""

import threading

import numpy as np
import pytest

from devcopy_lib.devices.copy_engine import CopyEngine, EngineConfig
from devcopy_lib.devices.host_transport import HostTransport


class MainThreadOnlyEngine(CopyEngine):
    """A broken engine: every copy asked for from a thread other than the main one raises."""

    def h2d(self, dst, src, nbytes, stream=None):
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(f"copy from non-main thread {threading.current_thread().name}")
        return super().h2d(dst, src, nbytes, stream)


@pytest.fixture
def engine():
    engine = MainThreadOnlyEngine(HostTransport(), EngineConfig(threads=2))
    yield engine
    engine.close()


def _copy(engine, seed):
    src = np.arange(64 + seed, dtype=np.uint8)
    dst = np.zeros_like(src)
    engine.h2d(dst.ctypes.data, src.ctypes.data, src.nbytes)
    assert np.array_equal(dst, src)


def test_the_engine_works_on_the_main_thread(engine):
    _copy(engine, 0)


def test_a_worker_exception_fails_the_test(engine, run_concurrently):
    with pytest.raises(RuntimeError, match="copy from non-main thread worker-"):
        run_concurrently(lambda seed: _copy(engine, seed))


def test_a_worker_assertion_fails_the_test(run_concurrently):
    def worker(seed):
        assert seed != 2, "worker 2 saw wrong data"

    with pytest.raises(AssertionError, match="worker 2 saw wrong data"):
        run_concurrently(worker)


def test_every_worker_runs_when_none_fails(run_concurrently):
    seen = []
    run_concurrently(seen.append, threads=3)
    assert sorted(seen) == [0, 1, 2]
