"""The cases that once crashed or answered wrongly through the public allocator API, each refused now before any
native call with devcopy's error kind and a message naming the value and the fix; and `deallocate` waiting for a copy
running on the buffer in another thread."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from devcopy_lib.devices import (
    Device,
    DevicePtr,
    DeviceType,
    SimulatedCudaAllocator,
    get_device_allocator,
    register_device_allocator,
    scoped_allocators,
)
from devcopy_lib.devices.backend import make_allocator, select_backend
from devcopy_lib.devices.copy_engine import EngineConfig
from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator
from devcopy_lib.devices.errors import DeviceUsageError, InvalidArgumentError, InvalidArgumentTypeError


@pytest.fixture
def sim():
    allocator = SimulatedCudaAllocator()
    yield allocator
    allocator.close()


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (lambda a, p: a.copy_host_to_device(p, 64, 64), InvalidArgumentTypeError, "got int 64; a bare int is never"),
        (lambda a, p: a.copy_device_to_host(8, p, 8), InvalidArgumentTypeError, "got int 8; a bare int is never"),
        (lambda a, p: a.copy_host_to_device(p, -4096, 8), InvalidArgumentTypeError, "got int -4096"),
        (lambda a, p: a.copy_host_to_device(1 << 40, np.zeros(8), 8), InvalidArgumentTypeError, "an int is never"),
        (lambda a, p: DevicePtr(p.block, -4096), InvalidArgumentError, "offset -4096 is outside its allocation of 64"),
        (
            lambda a, p: a.device_array(p, np.float32, (-1,)),
            InvalidArgumentError,
            r"shape must be ints >= 0, got \(-1,\)",
        ),
        (lambda a, p: a.device_array(p, "junk", (2,)), InvalidArgumentTypeError, "dtype 'junk' is not a NumPy dtype"),
        (lambda a, p: a.device_array(p, object, (2,)), InvalidArgumentTypeError, "not a NumPy dtype of plain data"),
        (lambda a, p: a.allocate(8, alignment=True), InvalidArgumentError, "alignment must be a power of two"),
        (lambda a, p: a.allocate_host(8, alignment=0), InvalidArgumentError, "alignment must be a power of two"),
        (lambda a, p: a.copy_host_to_device(p, np.full(8, None), 8), InvalidArgumentTypeError, "dtype object"),
        (lambda a, p: a.copy_host_to_device(p, torch.ones(8).to_sparse(), 8), InvalidArgumentTypeError, "to_dense"),
        (lambda a, p: a.planned_copy("h2d", p, np.zeros(64, np.uint8), 64)(1.5), InvalidArgumentTypeError, "got 1.5"),
    ],
)
def test_the_crashing_calls_are_refused_with_a_kind_and_the_fix(sim, bad, error, message):
    ptr = sim.allocate(64)
    with pytest.raises(error, match=message) as info:
        bad(sim, ptr)
    assert info.value.kind == "usage"
    assert (sim.stats.h2d_count, sim.stats.d2h_count, sim.live_allocations()) == (0, 0, 1)


def test_borrow_takes_only_a_span_of_its_owners_memory(sim):
    owner = np.zeros(64, np.uint8)
    with pytest.raises(InvalidArgumentError, match="nbytes must be an int >= 0, got -5"):
        sim.borrow(owner.ctypes.data, -5, 0, owner).__enter__()
    with pytest.raises(InvalidArgumentTypeError, match="got owner NoneType"):
        sim.borrow(owner.ctypes.data, 8, 0, None).__enter__()
    with pytest.raises(InvalidArgumentError, match="not inside the owner's memory"):
        sim.borrow(owner.ctypes.data + 60, 8, 0, owner).__enter__()
    with sim.borrow(owner.ctypes.data + 8, 8, 0, owner) as ptr:
        sim.copy_host_to_device(ptr, np.full(8, 7, np.uint8), 8)
    assert owner.tolist() == [0] * 8 + [7] * 8 + [0] * 48
    with pytest.raises(DeviceUsageError, match="already freed"):
        sim.copy_host_to_device(ptr, np.zeros(8, np.uint8), 8)


def test_a_blocks_extent_cannot_be_changed_by_hand(sim):
    ptr = sim.allocate(64)
    for name, value in (("nbytes", 1 << 30), ("handle", np.zeros(1, np.uint8)), ("address", 0)):
        with pytest.raises(DeviceUsageError, match=f"DeviceBlock.{name} is fixed"):
            setattr(ptr.block, name, value)
    sim.copy_host_to_device(ptr, np.zeros(64, np.uint8), 64)


class _HeldCopy(SimulatedCudaAllocator):
    """A backend whose host-to-device copy waits for `release` and checks its memory is still there."""

    def __init__(self):
        super().__init__()
        self.entered, self.release, self.saw = threading.Event(), threading.Event(), []

    def _copy_in(self, dst, src_address, nbytes, index):
        self.entered.set()
        self.release.wait(30)
        self.saw.append(dst.block.handle is not None)
        super()._copy_in(dst, src_address, nbytes, index)


def test_deallocate_waits_for_a_copy_running_on_the_buffer_and_refuses_new_ones():
    sim = _HeldCopy()
    ptr = sim.allocate(64)
    copier = threading.Thread(target=sim.copy_host_to_device, args=(ptr, np.ones(64, np.uint8), 64))
    copier.start()
    assert sim.entered.wait(30)
    freer = threading.Thread(target=sim.deallocate, args=(ptr,))
    freer.start()
    freer.join(0.2)
    assert freer.is_alive()  # waiting for the copy
    with pytest.raises(DeviceUsageError, match="already freed"):  # the buffer is refused to new copies already
        sim.copy_device_to_host(np.zeros(64, np.uint8), ptr, 64)
    sim.release.set()
    copier.join(30)
    freer.join(30)
    assert sim.saw == [True]  # the copy ran on live memory
    assert (sim.stats.h2d_count, sim.stats.deallocate_count, sim.live_allocations()) == (1, 1, 0)


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (lambda: SimulatedCudaAllocator(peer_access=5), InvalidArgumentTypeError, "got 5. Pass True, False, or pairs"),
        (lambda: SimulatedCudaAllocator(peer_access=[(0, -1)]), InvalidArgumentError, r"got \[\(0, -1\)\]"),
        (lambda: Device(5, 0), InvalidArgumentError, r"5 is not a DeviceType; pass one of CPU \(0\), CUDA \(1\)"),
        (
            lambda: Device(DeviceType.CUDA, 1.5),
            InvalidArgumentTypeError,
            r"index must be an int in 0..127 \(a DeviceIndex is an int8\), got 1.5",
        ),
        (lambda: Device.parse(5), InvalidArgumentTypeError, "A device is a string like 'cuda:0'"),
        (lambda: Device.parse("tpu:0"), InvalidArgumentError, "Unknown device type 'tpu'"),
        (lambda: get_device_allocator(9), InvalidArgumentError, "9 is not a DeviceType"),
        (lambda: register_device_allocator(5), InvalidArgumentTypeError, "got int; pass make_allocator()"),
        (lambda: scoped_allocators(None).__enter__(), InvalidArgumentTypeError, "expected a DeviceAllocator"),
        (lambda: CupyCudaAllocator(config=5), InvalidArgumentTypeError, "config must be an EngineConfig or None"),
        (lambda: EngineConfig(threads="8"), InvalidArgumentError, "EngineConfig.threads must be an int >= 1"),
        (lambda: select_backend(5), InvalidArgumentTypeError, "backend must be a name"),
        (lambda: make_allocator("tpu"), InvalidArgumentError, "Unknown backend 'tpu'"),
    ],
)
def test_device_constructors_refuse_wrong_arguments_with_the_usage_kind(bad, error, message):
    with pytest.raises(error, match=message) as info:
        bad()
    assert info.value.kind == "usage"


@pytest.mark.gpu
def test_cupy_borrow_takes_only_a_span_of_a_cuda_tensor():
    cuda = CupyCudaAllocator()
    owner = torch.zeros(16, dtype=torch.uint8, device="cuda")
    with pytest.raises(InvalidArgumentError, match="not inside the owner's memory"):
        cuda.borrow(owner.data_ptr() + 8, 16, 0, owner).__enter__()
    with pytest.raises(InvalidArgumentTypeError, match="owner must hold the device memory"):
        cuda.borrow(owner.data_ptr(), 8, 0, torch.zeros(16, dtype=torch.uint8)).__enter__()
    with cuda.borrow(owner.data_ptr() + 8, 8, 0, owner) as ptr:
        cuda.copy_host_to_device(ptr, np.full(8, 3, np.uint8), 8)
    assert owner.cpu().tolist() == [0] * 8 + [3] * 8
    cuda.close()
