"""CupyCudaAllocator: round trips through the copy engine, pinned memory, device index handling, CUDA error decoding."""

import numpy as np
import pytest

from devcopy_lib.devices.cuda_status import CudaError, cuda_status
from devcopy_lib.devices.cupy_cuda import _OnDevice

MiB = 1 << 20
ROUND_TRIP_SIZES = [
    0,
    1,
    4095,
    4096,
    (256 << 10) + 1,
    4 * MiB - 1,
    32 * MiB - 1,
    32 * MiB,
    32 * MiB + 1,
    100 * MiB + 3,
    256 * MiB,
]


@pytest.fixture(scope="module")
def cuda():
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    return CupyCudaAllocator()


def _random(n, seed=0):
    return np.random.default_rng(seed + n).integers(0, 256, n, dtype=np.uint8)


@pytest.mark.gpu
@pytest.mark.parametrize("memory", ["pageable", "pinned"])
@pytest.mark.parametrize("n", ROUND_TRIP_SIZES)
def test_round_trip_is_exact(cuda, memory, n):
    src = _random(n)
    if memory == "pinned":
        host, out = cuda.allocate_host(n), cuda.allocate_host(n)
        host[:] = src
    else:
        host, out = src, np.empty(n, np.uint8)
    out.fill(0x5A)
    ptr = cuda.allocate(n)
    cuda.copy_host_to_device(ptr, host, n, 0)
    if n:
        assert np.array_equal(cuda.device_array(ptr, np.uint8, (n,)).get(), src)
    cuda.copy_device_to_host(out, ptr, n, 0)
    assert np.array_equal(out, src)
    cuda.deallocate(ptr)


@pytest.mark.gpu
def test_copies_at_an_offset_land_at_the_offset(cuda):
    ptr = cuda.allocate(64)
    cuda.copy_host_to_device(ptr, np.zeros(64, np.uint8), 64)
    cuda.copy_host_to_device(ptr + 8, np.full(8, 9, np.uint8), 8)
    assert cuda.device_array(ptr, np.uint8, (64,)).get().tolist() == [0] * 8 + [9] * 8 + [0] * 48


@pytest.mark.gpu
def test_allocate_host_is_pinned_and_tracked(cuda):
    import torch

    pinned = cuda.allocate_host(4 * MiB, alignment=256)
    assert pinned.ctypes.data % 256 == 0 and cuda.is_pinned(pinned)
    assert not cuda.is_pinned(np.empty(4 * MiB, np.uint8))
    assert cuda.is_pinned(torch.empty(4 * MiB, dtype=torch.uint8, pin_memory=True).numpy())


@pytest.mark.gpu
def test_async_copies_order_on_their_streams_and_tickets_complete(cuda):
    import cupy

    n = 64 * MiB
    src, out = cuda.allocate_host(n), cuda.allocate_host(n)
    src[:] = _random(n)
    ptr = cuda.allocate(n)
    stream = cupy.cuda.Stream(non_blocking=True)
    cuda.copy_host_to_device_async(ptr, src, n, stream).wait()
    ticket = cuda.copy_device_to_host_async(out, ptr, n, stream)
    ticket.wait()
    assert ticket.done and np.array_equal(out, src)


@pytest.mark.gpu
def test_async_copies_are_checked_and_counted_as_the_public_copies(cuda):
    """They go through the base template: the same checks, and the statistics count them once enqueued."""
    ptr, host = cuda.allocate(4096), cuda.allocate_host(4096)
    h2d, d2h, h2d_bytes = cuda.stats.h2d_count, cuda.stats.d2h_count, cuda.stats.h2d_bytes
    cuda.copy_host_to_device_async(ptr, host, 4096).wait()
    cuda.copy_device_to_host_async(host, ptr, 1024).wait()
    assert (cuda.stats.h2d_count, cuda.stats.d2h_count, cuda.stats.h2d_bytes) == (h2d + 1, d2h + 1, h2d_bytes + 4096)
    assert cuda.stats.last_d2h.size == 1024
    with pytest.raises(ValueError, match="do not fit"):
        cuda.copy_host_to_device_async(ptr, np.zeros(8192, np.uint8), 8192)
    with pytest.raises(ValueError, match="read-only"):
        cuda.copy_device_to_host_async(_frozen(16), ptr, 16)
    assert (cuda.stats.h2d_count, cuda.stats.d2h_count) == (h2d + 1, d2h + 1)
    cuda.deallocate(ptr)


def _frozen(n):
    array = np.zeros(n, np.uint8)
    array.setflags(write=False)
    return array


@pytest.mark.gpu
def test_pageable_async_source_may_change_after_return(cuda):
    n = 40 * MiB
    src = _random(n)
    expected = src.copy()
    ptr = cuda.allocate(n)
    ticket = cuda.copy_host_to_device_async(ptr, src, n)
    src[:] = 0  # staged before return: the copy must not see this
    ticket.wait()
    assert np.array_equal(cuda.device_array(ptr, np.uint8, (n,)).get(), expected)


@pytest.mark.gpu
def test_concurrent_copies_from_threads_are_each_exact(cuda, run_concurrently):
    n, errors = 48 * MiB + 5, []

    def worker(seed):
        src, out = _random(n, seed), np.empty(n, np.uint8)
        ptr = cuda.allocate(n)
        for _ in range(3):
            cuda.copy_host_to_device(ptr, src, n)
            cuda.copy_device_to_host(out, ptr, n)
            if not np.array_equal(out, src):
                errors.append(seed)

    run_concurrently(worker)
    assert errors == []


@pytest.mark.gpu
def test_index_selects_the_device_and_restores_the_current_one(cuda):
    import cupy

    before = cupy.cuda.runtime.getDevice()
    ptr = cuda.allocate(16, index=0)
    cuda.copy_host_to_device(ptr, np.ones(16, np.uint8), 16, index=0)
    assert cupy.cuda.runtime.getDevice() == before and ptr.index == 0
    with pytest.raises(ValueError, match="out of range"):
        cuda.allocate(16, index=cuda.device_count())


@pytest.mark.gpu
def test_out_of_memory_is_a_memory_error_naming_the_size(cuda):
    with pytest.raises(MemoryError, match=str(1 << 50)):
        cuda.allocate(1 << 50)


@pytest.mark.gpu
def test_a_failing_cuda_call_is_decoded_with_its_name():
    import cupy

    with pytest.raises(CudaError, match="cudaErrorInvalidValue") as info:
        with cuda_status("copy 8 bytes"):
            cupy.cuda.runtime.memcpy(0, 0, 8, 4)
    assert info.value.name == "cudaErrorInvalidValue" and "copy 8 bytes" in str(info.value)


@pytest.mark.gpu
@pytest.mark.parametrize("offset", [0, 64])
def test_a_refused_cuda_call_leaves_no_error_for_torchs_next_kernel(cuda, offset):
    """A failure handled here (a host range registered twice, or overlapping one) is not raised again by torch's
    next kernel-launch check, which reads the thread's last CUDA error."""
    import cupy
    import torch

    host = np.zeros(1 << 16, dtype=np.uint8)
    address = host.ctypes.data
    cupy.cuda.runtime.hostRegister(address, host.nbytes, 0)
    try:
        with pytest.raises(CudaError):
            with cuda_status("register again"):
                cupy.cuda.runtime.hostRegister(address + offset, 4096, 0)
        assert float((torch.ones(4, device="cuda") + 1).sum()) == 8.0
    finally:
        cupy.cuda.runtime.hostUnregister(address)


@pytest.mark.gpu
def test_describe_devices_gives_real_gpu_names(cuda):
    rows = cuda.describe_devices()
    assert rows[0]["device"] == "cuda:0" and "simulated" not in rows[0]["name"] and rows[0]["name"]


@pytest.mark.gpu
def test_close_stops_the_owned_copy_engine_and_frees_device_memory():
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    with CupyCudaAllocator() as cuda:
        ptr = cuda.allocate(1 << 20)
        engine = cuda.engine
    assert cuda.closed and ptr.block.freed and cuda.live_allocations() == 0
    with pytest.raises(RuntimeError, match="shutdown"):
        engine._pool.submit(int)
    with pytest.raises(ValueError, match="allocator was closed"):
        cuda.allocate(8)


@pytest.mark.gpu
def test_a_copy_given_another_index_is_refused(cuda):
    ptr = cuda.allocate(16, index=0)
    wrong = 1 if cuda.device_count() > 1 else 5
    with pytest.raises(ValueError, match=r"lives on cuda:0 but index 1 was passed|index 5 is out of range"):
        cuda.copy_host_to_device(ptr, np.ones(16, np.uint8), 16, index=wrong)
    assert cuda.stats.last_h2d.dst is not ptr


@pytest.mark.gpu
def test_device_code_reading_another_devices_buffer_fails_loudly(cuda):
    if cuda.device_count() < 2:
        pytest.skip("needs two CUDA devices (cuda:0 memory read as cuda:1)")
    ptr = cuda.allocate(16, index=0)
    with pytest.raises(ValueError, match="lives on cuda:0 but index 1 was passed"):
        cuda.device_array(ptr, np.float32, (4,), index=1)


# ---- CPU-side: the device switch and the status decoder, with fakes ----------------------------------------------
class _FakeRuntime:
    def __init__(self, current):
        self.current, self.calls = current, []

    def getDevice(self):  # noqa: N802 - CUDA's name
        return self.current

    def setDevice(self, index):  # noqa: N802
        self.calls.append(index)
        self.current = index


def test_on_device_switches_and_restores():
    rt = _FakeRuntime(current=1)
    with _OnDevice(rt, 0):
        assert rt.current == 0
    assert rt.calls == [0, 1] and rt.current == 1


def test_on_device_makes_no_call_when_already_current():
    rt = _FakeRuntime(current=0)
    with _OnDevice(rt, 0):
        pass
    assert rt.calls == []


def _cuda_exception(text, status):
    kind = type("CUDARuntimeError", (RuntimeError,), {"__module__": "cupy_backends.cuda.api.runtime"})
    exc = kind(text)
    exc.status = status
    return exc


def test_status_decoder_names_the_error_and_what_failed():
    with pytest.raises(CudaError, match=r"copy 4 bytes failed: cudaErrorInvalidValue \(invalid argument, status 1\)"):
        with cuda_status("copy 4 bytes"):
            raise _cuda_exception("cudaErrorInvalidValue: invalid argument", 1)


def test_status_decoder_turns_out_of_memory_into_memory_error():
    with pytest.raises(MemoryError, match="allocate 8 bytes: CUDA is out of memory"):
        with cuda_status("allocate 8 bytes"):
            raise _cuda_exception("cudaErrorMemoryAllocation: out of memory", 2)


def test_status_decoder_leaves_other_exceptions_alone():
    with pytest.raises(KeyError, match="x"):
        with cuda_status("anything"):
            raise KeyError("x")
