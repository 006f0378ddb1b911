"""A copy interrupted (Ctrl-C, a stop signal) between marking its buffer busy and unmarking it leaves no marker that
`deallocate` or `close` waits on forever: `devcopy bench` closes its allocator in a `finally` after SIGTERM, and hung
there when the interrupt landed in that window."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from devcopy_lib.devices import SimulatedCudaAllocator


def _returns_within(fn, seconds: float = 10.0) -> bool:
    """Whether `fn()` returns within `seconds` (run in a daemon thread, so a hang fails the test instead of CI)."""
    done = threading.Event()
    threading.Thread(target=lambda: (fn(), done.set()), daemon=True).start()
    return done.wait(seconds)


@pytest.mark.parametrize("copy", ["copy_host_to_device", "copy_host_to_device_async"])
def test_an_interrupt_while_counting_a_copy_still_unmarks_the_buffer(monkeypatch, copy):
    alloc = SimulatedCudaAllocator()
    ptr = alloc.allocate(64)

    def interrupted(*args):
        raise KeyboardInterrupt

    # the synchronous copies count by their parts (their small-copy path), the stream-ordered ones by a record
    monkeypatch.setattr(alloc.stats, "count_call", interrupted)
    monkeypatch.setattr(alloc.stats, "count_copy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        getattr(alloc, copy)(ptr, np.zeros(64, np.uint8), 64)
    assert ptr.block.running == []
    assert _returns_within(alloc.close)


@pytest.mark.parametrize("free", ["deallocate", "close"])
def test_a_marker_left_by_this_threads_interrupted_copy_does_not_hang_its_free(free):
    """An interrupt right after `pin` put the marker in (the `try` never entered): the same thread then frees."""
    alloc = SimulatedCudaAllocator()
    ptr = alloc.allocate(64)
    done = threading.Event()

    def interrupted_then_freed():
        alloc._blocks.pin(ptr.block, "copy_host_to_device")  # the marker of a copy that Ctrl-C stopped right here
        alloc.deallocate(ptr) if free == "deallocate" else alloc.close()
        done.set()

    threading.Thread(target=interrupted_then_freed, daemon=True).start()
    assert done.wait(10.0)


def test_a_copy_running_in_another_thread_is_still_waited_for():
    """The marker of another thread is a running copy: the free waits until that copy unmarks the buffer."""
    alloc = SimulatedCudaAllocator()
    ptr = alloc.allocate(64)
    pinned, freed, early = threading.Event(), threading.Event(), []

    def copy_in_flight():
        marker = alloc._blocks.pin(ptr.block, "copy_host_to_device")
        pinned.set()
        early.append(freed.wait(0.3))  # True: the free did not wait for this copy
        alloc._blocks.unpin(ptr.block, marker)

    worker = threading.Thread(target=copy_in_flight, daemon=True)
    worker.start()
    pinned.wait(5)
    assert _returns_within(lambda: (alloc.deallocate(ptr), freed.set()))
    worker.join(5)
    assert early == [False]
