"""The CuPy peer hooks on one GPU: `cudaMemcpyPeer` with source and destination on the same device (legal), the
host-hop fallback forced, and the refusals (a device that does not exist, no peer access). Two-GPU peer copies are
tests/test_two_devices.py's."""

import numpy as np
import pytest

MiB = 1 << 20
pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    return CupyCudaAllocator()


def _filled(cuda, data):
    ptr = cuda.allocate(data.nbytes, 0)
    cuda.copy_host_to_device(ptr, data, data.nbytes, 0)
    return ptr


def _read(cuda, ptr, n):
    out = np.zeros(n, np.uint8)
    cuda.copy_device_to_host(out, ptr, n, ptr.index)
    return out


@pytest.mark.parametrize("n", [1, 4096, 3 * MiB + 5])
def test_same_device_peer_copy_is_direct_and_exact(cuda, n):
    data = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    src, dst = _filled(cuda, data), cuda.allocate(n, 0)
    hops, h2d, d2h = cuda.stats.d2d_host_hops, cuda.stats.h2d_count, cuda.stats.d2h_count
    assert cuda.can_access_peer(0, 0)
    assert cuda.copy_device_to_device(dst, src, n) == "peer"
    assert (cuda.stats.d2d_host_hops, cuda.stats.h2d_count, cuda.stats.d2h_count) == (hops, h2d, d2h)
    assert np.array_equal(_read(cuda, dst, n), data)


def test_forced_host_hop_is_exact_and_counted(cuda, monkeypatch):
    n = 2 * MiB + 3
    data = np.random.default_rng(7).integers(0, 256, n, dtype=np.uint8)
    src, dst = _filled(cuda, data), cuda.allocate(n, 0)
    monkeypatch.setattr(cuda, "can_access_peer", lambda a, b: False)
    hops, h2d, d2h = cuda.stats.d2d_host_hops, cuda.stats.h2d_count, cuda.stats.d2h_count
    assert cuda.copy_device_to_device(dst, src, n) == "host"
    assert (cuda.stats.d2d_host_hops - hops, cuda.stats.h2d_count - h2d, cuda.stats.d2h_count - d2h) == (1, 1, 1)
    assert np.array_equal(_read(cuda, dst, n), data)


def test_a_device_that_does_not_exist_is_refused(cuda):
    missing = cuda.device_count()
    with pytest.raises(ValueError, match="out of range"):
        cuda.can_access_peer(0, missing)
    with pytest.raises(ValueError, match="out of range"):
        cuda.allocate(16, index=missing)
