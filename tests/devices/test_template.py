"""The DeviceAllocator template: every copy path it offers checks and counts in one place, backends implement the
hooks of BackendHooks only, and the stream-ordered copies work (synchronously) on a backend without streams."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from devcopy_lib.devices import DeviceAllocator, SimulatedCudaAllocator
from devcopy_lib.devices.capabilities import Capabilities
from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator
from devcopy_lib.devices.hooks import BackendHooks


@pytest.fixture
def sim():
    return SimulatedCudaAllocator()


def _copy_paths() -> set[str]:
    """The public methods of the template that move bytes (a new one must be added to COPY_CALLS below)."""
    return {n for n, _ in inspect.getmembers(DeviceAllocator, inspect.isfunction) if n.startswith("copy_")} | {
        "planned_copy"
    }


# name -> (how to call it on a 16-byte device buffer `ptr` and a host array `host`, the counter it must raise)
COPY_CALLS = {
    "copy_host_to_device": (lambda a, ptr, host: a.copy_host_to_device(ptr, host, 16), "h2d_count"),
    "copy_device_to_host": (lambda a, ptr, host: a.copy_device_to_host(host, ptr, 16), "d2h_count"),
    "copy_host_to_device_async": (lambda a, ptr, host: a.copy_host_to_device_async(ptr, host, 16).wait(), "h2d_count"),
    "copy_device_to_host_async": (lambda a, ptr, host: a.copy_device_to_host_async(host, ptr, 16).wait(), "d2h_count"),
    "copy_device_to_device": (lambda a, ptr, host: a.copy_device_to_device(a.allocate(16, 1), ptr, 16), "d2d_count"),
    "planned_copy": (lambda a, ptr, host: a.planned_copy("h2d", ptr, host, 16)(16), "h2d_count"),
}


def test_every_copy_path_the_template_offers_is_listed():
    assert _copy_paths() == set(COPY_CALLS), "a new copy path: add it to COPY_CALLS so its counting is tested"


@pytest.mark.parametrize("name", sorted(COPY_CALLS))
def test_every_copy_path_is_counted(sim, name):
    call, counter = COPY_CALLS[name]
    ptr = sim.allocate(16)
    before = getattr(sim.stats, counter)
    call(sim, ptr, np.arange(16, dtype=np.uint8))
    assert getattr(sim.stats, counter) == before + 1


PUBLIC = {
    "allocate",
    "deallocate",
    "borrow",
    "release_cached",
    "count_copy",
    "can_access_peer",
    "device_array",
    *COPY_CALLS,
}
# Everything `DeviceAllocator` itself defines is the template around the hooks (the hooks live in BackendHooks).
TEMPLATE = {n for n in vars(DeviceAllocator) if not (n.startswith("__") and n.endswith("__")) and n != "_abc_impl"}


@pytest.mark.parametrize("backend", [SimulatedCudaAllocator, CupyCudaAllocator])
def test_backends_implement_hooks_and_leave_the_template_alone(backend):
    """A backend that overrides a template method skips its checks or its statistics (CuPy's async copies did)."""
    assert PUBLIC <= TEMPLATE
    assert TEMPLATE & set(vars(backend)) == set()


def test_the_template_defines_no_hook_and_the_hooks_no_public_call():
    """The hooks are `BackendHooks`' alone (what a backend writes), the public calls `DeviceAllocator`'s."""
    assert TEMPLATE & set(vars(BackendHooks)) == set()
    assert PUBLIC & set(dir(BackendHooks)) == set()


def test_async_copies_land_and_return_a_done_ticket_without_streams(sim):
    data = np.arange(32, dtype=np.uint8)
    ptr = sim.allocate(32, 2)
    ticket = sim.copy_host_to_device_async(ptr, data, 32)
    assert ticket.done
    out = np.zeros(32, np.uint8)
    assert sim.copy_device_to_host_async(out, ptr, 32).done
    assert np.array_equal(out, data)
    s = sim.stats
    assert (s.h2d_count, s.h2d_bytes, s.d2h_count, s.d2h_bytes) == (1, 32, 1, 32)
    assert (s.last_h2d.dst, s.last_h2d.src, s.last_h2d.index) == (ptr, data, 2)
    assert (s.last_d2h.dst, s.last_d2h.src, s.last_d2h.size) == (out, ptr, 32)


def test_zero_byte_async_copies_are_counted_and_done(sim):
    ptr = sim.allocate(0)
    assert sim.copy_host_to_device_async(ptr, np.empty(0, np.uint8), 0).done
    assert (sim.stats.h2d_count, sim.stats.h2d_bytes) == (1, 0)


H2D, D2H = "copy_host_to_device_async: ", "copy_device_to_host_async: "


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda a, ptr: a.copy_host_to_device_async(ptr, np.zeros(64, np.uint8), 64), H2D + "64 bytes do not fit"),
        (lambda a, ptr: a.copy_host_to_device_async(ptr, np.zeros(4, np.uint8), 16), H2D + "16 bytes requested but"),
        (lambda a, ptr: a.copy_host_to_device_async(None, np.zeros(16, np.uint8), 16), H2D + "null pointer"),
        (lambda a, ptr: a.copy_host_to_device_async(ptr, 0, 16), H2D + "null pointer"),
        (lambda a, ptr: a.copy_host_to_device_async(ptr, np.zeros(16, np.uint8), -1), "nbytes must be an int"),
        (lambda a, ptr: a.copy_device_to_host_async(np.zeros(16, np.uint8)[::-1], ptr, 16), D2H + "host buffer is not"),
        (lambda a, ptr: a.copy_device_to_host_async(_read_only(16), ptr, 16), D2H + "host destination is read-only"),
        (
            lambda a, ptr: a.copy_device_to_host_async(np.zeros(16, np.uint8), "0x10", 16),
            D2H + "expected a DevicePtr from allocate(), got str",
        ),
        (lambda a, ptr: a.copy_device_to_host_async(0, ptr, 16), D2H + "null pointer"),
        (lambda a, ptr: a.copy_device_to_host_async(np.zeros(4, np.uint8), ptr, 16), D2H + "16 bytes requested but"),
    ],
)
def test_async_copies_are_checked_as_the_public_copies_and_failures_are_not_counted(sim, bad, message):
    """Each refusal names the call that refused (the message starts with it) and counts nothing."""
    ptr = sim.allocate(16)
    with pytest.raises(ValueError) as info:
        bad(sim, ptr)
    assert str(info.value).startswith(message)
    assert (sim.stats.h2d_count, sim.stats.d2h_count) == (0, 0)


def test_a_zero_byte_async_read_is_done_and_counted_on_its_pointers_device(sim):
    ptr = sim.allocate(0, index=3)
    assert sim.copy_device_to_host_async(np.empty(0, np.uint8), ptr, 0).done
    assert (sim.stats.d2h_count, sim.stats.d2h_bytes, sim.stats.last_d2h.index) == (1, 0, 3)


def test_async_copies_refuse_a_freed_pointer(sim):
    ptr = sim.allocate(16)
    sim.deallocate(ptr)
    with pytest.raises(ValueError, match="already freed"):
        sim.copy_device_to_host_async(np.zeros(16, np.uint8), ptr, 0)


def _read_only(n):
    array = np.zeros(n, np.uint8)
    array.setflags(write=False)
    return array


def test_a_backend_without_peer_copy_hops_through_host():
    class NoPeers(SimulatedCudaAllocator):
        capabilities = Capabilities(real_device=False, device_clock=False, pinned_host=False, peer_copy=False)

    sim = NoPeers()
    src, dst = sim.allocate(8, 0), sim.allocate(8, 1)
    assert not sim.can_access_peer(0, 0)
    assert sim.copy_device_to_device(dst, src, 8) == "host"
    assert sim.stats.d2d_host_hops == 1


def test_release_cached_trims_the_resolved_device_and_refuses_a_closed_allocator():
    trimmed = []

    class Pool(SimulatedCudaAllocator):
        def _trim(self, index: int) -> None:
            trimmed.append(index)

    sim = Pool()
    sim.set_current_index(3)
    sim.release_cached()
    sim.release_cached(1)
    assert trimmed == [3, 1]
    sim.close()
    with pytest.raises(ValueError, match="release_cached: .* was closed"):
        sim.release_cached()


def test_the_public_copies_read_a_read_only_source_and_record_what_they_moved(sim):
    """H2D only reads its host source (a read-only array is fine); each copy records dst, src, size and index."""
    ptr = sim.allocate(16, index=2)
    source = _read_only(16)
    sim.copy_host_to_device(ptr, source, 16, 2)
    assert sim.copy_host_to_device_async(ptr, source, 16).done
    out = np.zeros(16, np.uint8)
    sim.copy_device_to_host(out, ptr, 16, 2)
    last = sim.stats.last_d2h
    assert (last.dst, last.src, last.size, last.index) == (out, ptr, 16, 2)
    assert (sim.stats.h2d_count, sim.stats.d2h_count, sim.stats.d2h_bytes) == (2, 1, 16)


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda a, ptr: a.copy_host_to_device(ptr, 0, 16), "copy_host_to_device: null pointer"),
        (
            lambda a, ptr: a.copy_device_to_host(np.zeros(4, np.uint8), ptr, 16),
            "copy_device_to_host: 16 bytes requested",
        ),
        (lambda a, ptr: a.copy_device_to_host(np.zeros(16, np.uint8), None, 16), "copy_device_to_host: null pointer"),
    ],
)
def test_the_public_copies_name_themselves_when_they_refuse(sim, bad, message):
    ptr = sim.allocate(16)
    with pytest.raises(ValueError) as info:
        bad(sim, ptr)
    assert str(info.value).startswith(message)


def test_device_resolves_its_index():
    sim = SimulatedCudaAllocator()
    sim.set_current_index(3)
    assert (str(sim.device(2)), str(sim.device()), str(sim.device(-1))) == ("cuda:2", "cuda:3", "cuda:3")


def test_allocate_names_what_it_refuses_and_keeps_the_peak():
    sim = SimulatedCudaAllocator()
    with pytest.raises(ValueError, match=r"^nbytes must be an int >= 0, got -1; pass a byte count in 0\.\.2\*\*63-1$"):
        sim.allocate(-1)
    first = sim.allocate(32)
    sim.allocate(64)
    sim.deallocate(first)
    assert (sim.stats.peak_bytes, sim.stats.live_bytes) == (96, 64)
    sim.close()
    with pytest.raises(ValueError, match=r"^allocate: this simulated allocator was closed; make a new one"):
        sim.allocate(8)


class _TwoDevices(SimulatedCudaAllocator):
    """A backend that sees a fixed number of devices, as CuPy does (the simulated one sees any number)."""

    def device_count(self) -> int:
        return 2


def test_a_backend_with_a_fixed_device_count_refuses_the_index_past_it():
    two = _TwoDevices()
    assert two.allocate(8, index=1).index == 1
    with pytest.raises(ValueError, match=r"device index 2 is out of range: .* sees 2 device\(s\), valid 0\.\.1$"):
        two.allocate(8, index=2)
