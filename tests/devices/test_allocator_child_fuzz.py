"""Hostile calls through every public entry point of an allocator, run in a child process (tests/devices/fuzz_child.py)
so that a call that kills the process cannot kill pytest: Hypothesis draws each argument from the values the entry
point takes or from hostile ones (ints taken for addresses, negative and huge numbers, floats, None, strings, freed and
foreign pointers, offsets past the end, object arrays, sparse tensors). The child must never die, every refusal must
carry one of devcopy's error kinds, and a call with a hostile argument must be refused. The `cupy` variant runs the
same on the H200 (`pytest -m gpu`)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devcopy_lib.devices import DeviceAllocator

CHILD = Path(__file__).with_name("fuzz_child.py")
SIZES = (0, 8, 64, 4096)  # fuzz_child.SIZES: the live buffers' sizes, by position
BACKENDS = ["simulated", pytest.param("cupy", marks=pytest.mark.gpu)]


class Child:
    """The child process, restarted after a death (which the test reports)."""

    def __init__(self, backend: str) -> None:
        self.backend, self.process = backend, None

    def ask(self, request: object) -> object:
        if self.process is None:
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            self.process = subprocess.Popen(
                [sys.executable, str(CHILD), self.backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
            )
        self.process.stdin.write((json.dumps(request) + "\n").encode())
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            code, self.process = self.process.wait(), None
            raise AssertionError(f"the child died (exit {code}; a negative code is a signal) on {request!r}")
        return json.loads(answer)

    def close(self) -> None:
        if self.process is not None:
            self.process.stdin.close()
            self.process.wait(60)


@pytest.fixture
def child(request):
    process = Child(request.param)
    yield process
    process.close()


# ---- arguments: (description, hostile) ---------------------------------------------------------------------------
def _ok(strategy):
    return strategy.map(lambda d: (d, False))


def _bad(strategy):
    return strategy.map(lambda d: (d, True))


def _int(values):
    return values.map(lambda n: {"int": n})


JUNK_BUT_NONE = st.one_of(
    st.floats(allow_nan=True).map(lambda x: {"float": x}),
    st.text(max_size=4).map(lambda s: {"str": s}),
    st.booleans().map(lambda b: {"bool": b}),
)
JUNK = st.one_of(JUNK_BUT_NONE, st.just({"none": 0}))
HUGE = st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 63))
ADDRESS_INT = _int(st.one_of(st.integers(-(1 << 64), 1 << 64), st.sampled_from([8, 64, 4096, 1 << 40])))


def _count(largest, junk=JUNK):
    return st.one_of(_ok(_int(st.integers(0, largest))), _bad(st.one_of(_int(HUGE), junk)))


def _index(junk=JUNK):
    return st.one_of(
        _ok(_int(st.sampled_from([-1, 0]))),
        _bad(st.one_of(_int(st.integers(max_value=-2)), _int(st.integers(min_value=128)), junk)),
    )


COUNT, SMALL_COUNT, INDEX = _count(4200), _count(4096), _index()
ALIGNMENT = st.one_of(
    _ok(_int(st.sampled_from([1, 8, 64, 256]))),
    _bad(st.one_of(_int(st.sampled_from([0, -64, 3, 100, 1 << 20])), JUNK)),
)


OFFSET_EDGES = st.sampled_from([-4096, -64, -8, -1, 9, 65, 4097])  # just outside a buffer, or one page before it


def _live_ptr(draw_k_offset):
    k, offset = draw_k_offset
    return {"ptr": [k, offset]}, not 0 <= offset <= SIZES[k % len(SIZES)]


PTR = st.one_of(
    st.tuples(st.integers(0, 3), st.one_of(st.integers(0, 64), OFFSET_EDGES, st.integers(-8192, 8192))).map(_live_ptr),
    _bad(
        st.one_of(
            ADDRESS_INT,
            JUNK,
            st.integers(0, 64).map(lambda o: {"freed": o}),
            st.just({"foreign": 0}),
            st.integers(0, 64).map(lambda n: {"host": ["ndarray", n]}),
        )
    ),
)
HOST = st.one_of(
    _ok(
        st.tuples(
            st.sampled_from(["ndarray", "float_array", "bytearray", "bytes", "readonly", "tensor", "strided"]),
            st.integers(0, 4200),
        ).map(lambda kn: {"host": list(kn)})
    ),
    _bad(
        st.one_of(
            ADDRESS_INT,
            JUNK,
            st.tuples(st.sampled_from(["objects", "list", "sparse"]), st.integers(0, 64)).map(
                lambda kn: {"host": list(kn)}
            ),
            st.tuples(st.integers(0, 3), st.integers(0, 8)).map(lambda ko: {"ptr": list(ko)}),
        )
    ),
)
DIRECTION = st.one_of(
    _ok(st.sampled_from(["h2d", "d2h"]).map(lambda s: {"str": s})),
    _bad(st.one_of(st.sampled_from(["d2d", "H2D", ""]).map(lambda s: {"str": s}), JUNK, _int(st.integers()))),
)
DTYPE = st.one_of(
    _ok(st.sampled_from(["uint8", "float32", "int64", "float16"]).map(lambda s: {"dtype": s})),
    _bad(st.one_of(st.sampled_from(["junk", "object", "V0", "O"]).map(lambda s: {"dtype": s}), st.just({"none": 0}))),
)
SHAPE = st.one_of(
    _ok(st.lists(st.integers(0, 70), max_size=3).map(lambda s: {"shape": s})),
    _ok(st.integers(0, 5000).map(lambda n: {"shape": n})),
    _bad(
        st.one_of(
            st.lists(st.integers(max_value=-1), min_size=1, max_size=2).map(lambda s: {"shape": s}),
            st.sampled_from([[1.5], [True], "ab"]).map(lambda s: {"shape": s}),
            st.just({"none": 0}),
            st.floats().map(lambda x: {"float": x}),
        )
    ),
)
# where None is a valid value ("the current device", "all of it"), it is never drawn as junk
INDEX_OR_NONE = st.one_of(_index(JUNK_BUT_NONE), st.just(({"none": 0}, False)))
COUNT_OR_NONE = st.one_of(_count(4096, JUNK_BUT_NONE), st.just(({"none": 0}, False)))
ADDRESS = st.one_of(
    _ok(st.tuples(st.integers(0, 1), st.integers(0, 64)).map(lambda ko: {"addr": list(ko)})),
    _bad(st.one_of(ADDRESS_INT, JUNK)),
)
OWNER = st.one_of(_ok(st.integers(0, 1).map(lambda k: {"owner": k})), _bad(st.one_of(_int(st.integers()), JUNK)))

# every public entry point -> the strategies of its arguments, in order
ENTRY_POINTS = {
    "allocate": [SMALL_COUNT, INDEX, ALIGNMENT],
    "deallocate": [PTR, INDEX],
    "copy_host_to_device": [PTR, HOST, COUNT, INDEX],
    "copy_device_to_host": [HOST, PTR, COUNT, INDEX],
    "copy_host_to_device_async": [PTR, HOST, COUNT],
    "copy_device_to_host_async": [HOST, PTR, COUNT],
    "copy_device_to_device": [PTR, PTR, COUNT],
    "planned_copy": [DIRECTION, PTR, HOST, COUNT, INDEX, COUNT],
    "device_array": [PTR, DTYPE, SHAPE, INDEX_OR_NONE],
    "borrow": [ADDRESS, SMALL_COUNT, INDEX, OWNER],
    "release_cached": [INDEX],
    "can_access_peer": [INDEX, INDEX],
    "device": [INDEX],
    "is_pinned": [HOST, COUNT_OR_NONE],
    "allocate_host": [SMALL_COUNT, ALIGNMENT],
}
# public methods that take no caller value to check: asked, not fuzzed
NOTHING_TO_FUZZ = {"close", "synchronize", "event_timer", "describe_devices", "device_type", "live_allocations"}
NOTHING_TO_FUZZ |= {"device_count", "current_index"}  # the topology hooks
NOTHING_TO_FUZZ |= {"count_copy"}  # the counters' entry for the copy paths; it takes a record, moves no bytes


def _call(method: str):
    return st.tuples(*ENTRY_POINTS[method]).map(
        lambda args: (method, [d for d, _ in args], any(hostile for _, hostile in args))
    )


CALLS = st.lists(st.sampled_from(sorted(ENTRY_POINTS)).flatmap(_call), min_size=3, max_size=12)


def test_the_fuzz_reaches_every_public_entry_point():
    public = {name for name, _ in inspect.getmembers(DeviceAllocator, inspect.isfunction) if not name.startswith("_")}
    assert public - NOTHING_TO_FUZZ == set(ENTRY_POINTS)


@pytest.mark.parametrize("child", BACKENDS, indirect=True)
def test_hostile_calls_never_kill_the_process_and_are_refused_with_devcopy_kinds(child):
    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(CALLS)
    def check(calls):
        answers = child.ask([[method, described] for method, described, _ in calls])
        for (method, described, hostile), answer in zip(calls, answers, strict=True):
            where = f"{method}({', '.join(map(json.dumps, described))}) -> {answer}"
            assert answer[0] == "ok" or answer[1] is not None, f"refused without a devcopy kind: {where}"
            assert not (hostile and answer[0] == "ok"), f"a hostile call was accepted: {where}"

    check()


@pytest.mark.parametrize("child", BACKENDS, indirect=True)
def test_deallocate_racing_a_64_mib_copy_waits_for_it(child):
    """Another thread copies 64 MiB into a buffer while it is freed: each copy either completes (deallocate waited
    for it) or is refused as a use after free (kind `device`); nothing leaks, the process lives."""
    answer = child.ask(["race", 64 << 20, 3])
    assert set(answer["ended"]) <= {"copied", "refused:device"}
    assert sum(answer["ended"].values()) == 12
    assert answer["live"] == 0
