"""CudaBench reaches CUDA only through the devices layer: it refuses another backend's allocator before touching
CuPy, and on CUDA its raw reference copies (devices/cupy_raw.py) land their bytes."""

from __future__ import annotations

import numpy as np
import pytest

from devcopy_lib.bench.methods_cuda import CudaBench
from devcopy_lib.devices import SimulatedCudaAllocator


def test_cuda_bench_refuses_an_allocator_without_cupys_engine():
    with pytest.raises(TypeError, match="got a simulated allocator; time it with SimulatedBench"):
        CudaBench(SimulatedCudaAllocator())


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["cudaMemcpy", "cudaMemcpyAsync", "devcopy engine"])
def test_raw_and_engine_copies_land_both_ways_at_once(method):
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    bench = CudaBench(CupyCudaAllocator())
    n = 1 << 20
    directions = ("both",) if method != "cudaMemcpy" else ("h2d",)
    (case,) = [c for c in bench.cases(n, directions, ("pinned",)) if c.method == method]
    case.make()()
    bench.raw.device_synchronize()
    b = bench._buffers(n)
    assert np.array_equal(bench.alloc.device_array(b.dev, np.uint8, (n,)).get(), b.host["pinned"][0])
    assert set(bench.clocks()) == {"events", "wall"}
    bench.release()
