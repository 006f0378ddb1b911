"""Property-based fuzz of the allocator API: random sequences of allocate / copy / free on a few device indices with
bad values mixed in. Invariants after every step: counters balance (allocations - frees = live, bytes too), every
refused call changed nothing, and every live buffer holds exactly what was last copied into it (no neighbour
corrupted)."""

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, invariant, precondition, rule

from devcopy_lib.devices import SimulatedCudaAllocator

INDICES = st.integers(0, 2)
BAD_INDEX = st.sampled_from(["junk", 1.5, None, -2, True])
BAD_COUNT = st.sampled_from([-1, 1.0, "8", None, True])


class AllocatorMachine(RuleBasedStateMachine):
    buffers = Bundle("buffers")
    freed = Bundle("freed")

    def __init__(self):
        super().__init__()
        self.alloc = SimulatedCudaAllocator()
        self.shadow = {}  # serial -> (ptr, expected bytes)
        self.calls = {"allocate": 0, "deallocate": 0, "h2d": 0, "d2h": 0, "h2d_bytes": 0, "d2h_bytes": 0}

    # ---- valid calls -------------------------------------------------------------------------------------------
    @rule(target=buffers, nbytes=st.integers(0, 256), index=INDICES, alignment=st.sampled_from([1, 8, 64, 256]))
    def allocate(self, nbytes, index, alignment):
        ptr = self.alloc.allocate(nbytes, index, alignment)
        assert ptr.index == index and ptr.address % alignment == 0
        self.calls["allocate"] += 1
        self.shadow[ptr.block.serial] = (ptr, np.zeros(nbytes, np.uint8))
        return ptr

    @rule(ptr=buffers, data=st.data(), minus_one=st.booleans())
    def copy_in(self, ptr, data, minus_one):
        expected = self.shadow[ptr.block.serial][1]
        offset = data.draw(st.integers(0, len(expected)))
        n = data.draw(st.integers(0, len(expected) - offset))
        payload = np.frombuffer(data.draw(st.binary(min_size=n, max_size=n)), np.uint8).copy()
        self.alloc.copy_host_to_device(ptr + offset, payload, n, -1 if minus_one else ptr.index)
        expected[offset : offset + n] = payload
        self.calls["h2d"] += 1
        self.calls["h2d_bytes"] += n

    @rule(ptr=buffers)
    def copy_out(self, ptr):
        expected = self.shadow[ptr.block.serial][1]
        out = np.full(len(expected), 0xEE, np.uint8)
        self.alloc.copy_device_to_host(out, ptr, len(expected), ptr.index)
        assert out.tobytes() == expected.tobytes()
        self.calls["d2h"] += 1
        self.calls["d2h_bytes"] += len(expected)

    @rule(target=freed, ptr=consumes(buffers), explicit=st.booleans())
    def free(self, ptr, explicit):
        self.alloc.deallocate(ptr, ptr.index if explicit else -1)
        del self.shadow[ptr.block.serial]
        self.calls["deallocate"] += 1
        return ptr

    # ---- refused calls: each raises and changes nothing ---------------------------------------------------------
    def _refused(self, call, *errors):
        before = (self._counters(), self.alloc.live_allocations())
        expected = tuple(errors) or (ValueError,)
        try:
            call()
        except expected:
            pass
        else:
            raise AssertionError("a bad call was accepted")
        assert (self._counters(), self.alloc.live_allocations()) == before

    @rule(ptr=buffers, other=INDICES)
    def wrong_index(self, ptr, other):
        if other != ptr.index:
            n = ptr.nbytes
            self._refused(lambda: self.alloc.copy_host_to_device(ptr, np.ones(n, np.uint8), n, other))
            self._refused(lambda: self.alloc.copy_device_to_host(np.ones(n, np.uint8), ptr, n, other))
            self._refused(lambda: self.alloc.deallocate(ptr, other))

    @rule(ptr=buffers, index=BAD_INDEX)
    def junk_index(self, ptr, index):
        self._refused(lambda: self.alloc.deallocate(ptr, index))
        self._refused(lambda: self.alloc.copy_host_to_device(ptr, np.ones(1, np.uint8), 0, index))

    @rule(ptr=buffers, count=BAD_COUNT)
    def junk_count(self, ptr, count):
        self._refused(lambda: self.alloc.copy_host_to_device(ptr, np.ones(8, np.uint8), count, ptr.index))
        self._refused(lambda: self.alloc.allocate(count))

    @rule(ptr=buffers, extra=st.integers(1, 64))
    def overflow(self, ptr, extra):
        n = ptr.nbytes + extra
        self._refused(lambda: self.alloc.copy_host_to_device(ptr, np.ones(n, np.uint8), n, ptr.index))
        self._refused(lambda: ptr + n)

    @rule(ptr=buffers, step=st.sampled_from([1.5, "1", None]))
    def fractional_step(self, ptr, step):
        self._refused(lambda: ptr + step, TypeError)

    @rule(ptr=freed, n=st.integers(0, 8))
    def use_after_free(self, ptr, n):
        self._refused(lambda: self.alloc.copy_host_to_device(ptr, np.ones(8, np.uint8), n, -1))
        self._refused(lambda: self.alloc.copy_device_to_host(np.ones(8, np.uint8), ptr, n, -1))
        self._refused(lambda: self.alloc.deallocate(ptr))

    @precondition(lambda self: len(self.shadow) < 12)
    @rule(index=INDICES)
    def huge(self, index):
        self._refused(lambda: self.alloc.allocate(1 << 60, index), MemoryError)

    # ---- invariants ----------------------------------------------------------------------------------------------
    def _counters(self):
        s = self.alloc.stats
        return (s.allocate_count, s.deallocate_count, s.h2d_count, s.d2h_count, s.h2d_bytes, s.d2h_bytes, s.live_bytes)

    @invariant()
    def counters_balance(self):
        c = self.calls
        assert self._counters() == (
            c["allocate"],
            c["deallocate"],
            c["h2d"],
            c["d2h"],
            c["h2d_bytes"],
            c["d2h_bytes"],
            sum(len(e) for _, e in self.shadow.values()),
        )
        assert self.alloc.live_allocations() == len(self.shadow) == c["allocate"] - c["deallocate"]

    @invariant()
    def addresses_stay_in_their_index_range(self):
        for ptr, _ in self.shadow.values():
            assert (ptr.index + 1) << 40 <= ptr.address < (ptr.index + 2) << 40

    def teardown(self):
        for ptr, expected in self.shadow.values():  # every neighbour still holds what was written into it
            out = np.empty(len(expected), np.uint8)
            self.alloc.copy_device_to_host(out, ptr, len(expected), ptr.index)
            assert out.tobytes() == expected.tobytes()
        self.alloc.close()
        assert self.alloc.live_allocations() == 0 and self.alloc.stats.live_bytes == 0


TestAllocatorFuzz = AllocatorMachine.TestCase
TestAllocatorFuzz.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
