"""The public copies' small-copy path: the common case is recognised in a few attribute reads (no NumPy dict, no
record per repeated call), everything else falls back to the full checks and their messages, and the block is still
marked busy for the copy."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from devcopy_lib.devices import SimulatedCudaAllocator
from devcopy_lib.devices.errors import DeviceUsageError, InvalidArgumentError
from devcopy_lib.devices.host_buffers import array_address, quick_host_address
from devcopy_lib.devices.validation import quick_copy_address


@pytest.mark.parametrize(
    "array",
    [
        np.zeros(1, np.uint8),
        np.zeros(4096, np.float32),
        np.zeros(1 << 20, np.uint8)[5:],
        np.zeros((8, 8), np.int64).T,  # not contiguous: still an address
        np.frombuffer(bytearray(64), np.uint8),
    ],
)
def test_array_address_is_numpys_own(array):
    assert array_address(array) == array.__array_interface__["data"][0]


def _common():
    sim = SimulatedCudaAllocator()
    return sim, sim.allocate(64), np.zeros(64, np.uint8)


def test_the_common_case_takes_the_quick_checks():
    sim, ptr, host = _common()
    assert quick_copy_address(sim._blocks.live, ptr, host, 64, -1, False) == host.ctypes.data
    assert quick_copy_address(sim._blocks.live, ptr + 8, host, 56, 0, True) == host.ctypes.data


@pytest.mark.parametrize(
    "case",
    [
        "nbytes-numpy-int",
        "nbytes-zero",
        "nbytes-too-many-for-device",
        "nbytes-too-many-for-host",
        "index-other-device",
        "index-float",
        "index-bool",
        "pointer-freed",
        "pointer-other-allocator",
        "host-read-only-destination",
        "host-not-contiguous",
        "host-object-dtype",
        "host-bytearray",
        "host-subclass",
    ],
)
def test_anything_uncommon_falls_back_to_the_full_checks(case):
    sim, ptr, host = _common()
    nbytes, index, writable = 64, -1, False
    if case == "nbytes-numpy-int":
        nbytes = np.int64(64)
    elif case == "nbytes-zero":
        nbytes = 0
    elif case == "nbytes-too-many-for-device":
        ptr, host = ptr + 1, np.zeros(128, np.uint8)
    elif case == "nbytes-too-many-for-host":
        host = np.zeros(63, np.uint8)
    elif case == "index-other-device":
        index = 1
    elif case == "index-float":
        index = -1.0
    elif case == "index-bool":
        index = False
    elif case == "pointer-freed":
        sim.deallocate(ptr)
    elif case == "pointer-other-allocator":
        ptr = SimulatedCudaAllocator().allocate(64)
    elif case == "host-read-only-destination":
        host.flags.writeable, writable = False, True
    elif case == "host-not-contiguous":
        host = np.zeros(128, np.uint8)[::2]
    elif case == "host-object-dtype":
        host = np.empty(64, object)
    elif case == "host-bytearray":
        host = bytearray(64)
    elif case == "host-subclass":
        host = np.zeros(64, np.uint8).view(np.matrix)
    assert quick_copy_address(sim._blocks.live, ptr, host, nbytes, index, writable) == 0
    assert quick_host_address(host, 64, writable) == 0 or not case.startswith("host")


@pytest.mark.parametrize(
    ("copy", "error", "match"),
    [
        ("freed", DeviceUsageError, "already freed"),
        ("span", DeviceUsageError, "do not fit"),
        ("closed", DeviceUsageError, "was closed"),
        ("read-only", InvalidArgumentError, "read-only"),
    ],
)
def test_the_fallback_still_names_the_problem(copy, error, match):
    sim, ptr, host = _common()
    if copy == "freed":
        sim.deallocate(ptr)
    elif copy == "closed":
        sim.close()
    elif copy == "read-only":
        host.flags.writeable = False
    nbytes = 65 if copy == "span" else 64
    with pytest.raises(error, match=match):
        if copy == "read-only":
            sim.copy_device_to_host(host, ptr, nbytes)
        else:
            sim.copy_host_to_device(ptr, np.zeros(nbytes, np.uint8), nbytes)


def test_a_repeated_copy_keeps_its_record_and_a_new_one_records_anew():
    sim, ptr, host = _common()
    sim.copy_host_to_device(ptr, host, 64)
    first = sim.stats.last_h2d
    sim.copy_host_to_device(ptr, host, 64)
    assert sim.stats.last_h2d is first and sim.stats.h2d_count == 2 and sim.stats.h2d_bytes == 128
    sim.copy_host_to_device(ptr, host, 32)
    assert sim.stats.last_h2d is not first and (sim.stats.last_h2d.size, sim.stats.last_h2d.src) == (32, host)
    sim.copy_device_to_host(host, ptr, 16, 0)
    assert (sim.stats.last_d2h.dst, sim.stats.last_d2h.size, sim.stats.last_d2h.index) == (host, 16, 0)


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_the_block_is_busy_while_the_quick_path_copies(monkeypatch, direction):
    sim, ptr, host = _common()
    seen = []
    hook = "_copy_in" if direction == "h2d" else "_copy_out"
    monkeypatch.setattr(sim, hook, lambda *args: seen.append(list(ptr.block.running)))
    if direction == "h2d":
        sim.copy_host_to_device(ptr, host, 64)
    else:
        sim.copy_device_to_host(host, ptr, 64)
    assert seen == [[threading.get_ident()]] and ptr.block.running == []
