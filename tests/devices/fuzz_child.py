"""The child process of tests/devices/test_allocator_child_fuzz.py: it runs described allocator calls, hostile ones
included, and reports how each ended, so that a call that kills the process (a signal) cannot take pytest with it.

    python tests/devices/fuzz_child.py simulated|cupy

Each stdin line is a JSON list of calls `[method, [arg, ...]]`, each argument a description (see `build`); the child
answers one JSON line: per call `["ok"]`, `["refused", kind, type name]` (kind None for an exception that carries no
devcopy kind) or `["unbuilt", kind, type name]` when building an argument already refused (a `DevicePtr` with a bad
offset). A `["race", nbytes, rounds]` line frees a buffer while another thread copies into it, and reports how the
copies ended. Every line starts from fresh buffers on one allocator.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import numpy as np

from devcopy_lib.devices.pointers import DevicePtr
from devcopy_lib.names import ERROR_KINDS

SIZES = (0, 8, 64, 4096)  # the live buffers of every line, by position; one more is allocated and freed at once


def make_allocator(backend: str) -> Any:
    if backend == "cupy":
        from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

        return CupyCudaAllocator()
    from devcopy_lib.devices.simulated import SimulatedCudaAllocator

    return SimulatedCudaAllocator()


class Line:
    """One line's world: live buffers, a freed one, another allocator's, host buffers and borrowable owners."""

    def __init__(self, allocator: Any, other: Any, backend: str) -> None:
        self.allocator, self.backend = allocator, backend
        self.live = [allocator.allocate(n) for n in SIZES]
        self.freed = allocator.allocate(64)
        allocator.deallocate(self.freed)
        self.foreign = other.allocate(64)
        self.owners = [self._owner(n) for n in (64, 4096)]

    def _owner(self, nbytes: int) -> Any:
        if self.backend == "cupy":
            import cupy

            return cupy.zeros(nbytes, cupy.uint8)
        return np.zeros(nbytes, np.uint8)

    def owner_address(self, k: int) -> int:
        owner = self.owners[k % len(self.owners)]
        return int(owner.data.ptr) if self.backend == "cupy" else int(owner.ctypes.data)

    def close(self) -> None:
        for ptr in self.live:
            if not ptr.block.freed:
                self.allocator.deallocate(ptr)


def host(kind: str, nbytes: int) -> Any:
    """A host-side argument of `kind` with room for `nbytes` (or deliberately not)."""
    import torch

    nbytes = max(0, min(nbytes, 1 << 16))
    return {
        "ndarray": lambda: np.zeros(nbytes, np.uint8),
        "float_array": lambda: np.zeros(-(-nbytes // 4), np.float32),
        "bytearray": lambda: bytearray(nbytes),
        "bytes": lambda: bytes(nbytes),  # read-only: a D2H destination is refused
        "readonly": lambda: np.frombuffer(bytes(nbytes), np.uint8),
        "strided": lambda: np.zeros(2 * nbytes, np.uint8)[::2],
        "objects": lambda: np.full(max(1, nbytes // 8), None, dtype=object),
        "tensor": lambda: torch.zeros(nbytes, dtype=torch.uint8),
        "sparse": lambda: torch.zeros(max(1, nbytes), dtype=torch.uint8).to_sparse(),
        "list": lambda: [0] * nbytes,
    }[kind]()


def build(arg: Any, line: Line) -> Any:
    """The value an argument description stands for: `{"int": n}`, `{"float": x}`, `{"str": s}`, `{"none": 0}`,
    `{"bool": b}`, `{"ptr": [k, offset]}` (live buffer k), `{"freed": offset}`, `{"foreign": 0}` (another
    allocator's), `{"host": [kind, nbytes]}`, `{"dtype": name}`, `{"shape": [...]}`, `{"owner": k}`, `{"addr": [k,
    offset]}` (an address inside owner k)."""
    ((tag, value),) = arg.items()
    if tag == "ptr":
        k, offset = value
        return DevicePtr(line.live[k % len(line.live)].block, offset)
    if tag == "freed":
        return DevicePtr(line.freed.block, value)
    if tag == "foreign":
        return line.foreign
    if tag == "host":
        return host(*value)
    if tag == "owner":
        return line.owners[value % len(line.owners)]
    if tag == "addr":
        return line.owner_address(value[0]) + value[1]
    if tag == "none":
        return None
    if tag == "shape":
        return tuple(value) if isinstance(value, list) else value
    return value  # int, float, str, bool, dtype name


def call(line: Line, method: str, args: list[Any]) -> None:
    """Run one described call; a planned copy is also run, a borrow copies into what it borrowed."""
    allocator = line.allocator
    if method == "planned_copy":
        planned = allocator.planned_copy(*args[:5])
        planned(args[5])
    elif method == "borrow":
        with allocator.borrow(*args[:4]) as ptr:
            allocator.copy_host_to_device(ptr, np.ones(ptr.nbytes, np.uint8), ptr.nbytes)
    elif method.endswith("_async"):
        getattr(allocator, method)(*args).wait()
    else:
        getattr(allocator, method)(*args)


def outcome(exc: BaseException) -> str | None:
    """The devcopy kind an exception carries (MemoryError: `device`, as the CLI classifies it), else None."""
    kind = getattr(exc, "kind", None)
    if kind is None and isinstance(exc, MemoryError):
        kind = "device"
    return str(kind) if kind in ERROR_KINDS else None


def run_line(allocator: Any, other: Any, backend: str, calls: list[Any]) -> list[list[Any]]:
    line = Line(allocator, other, backend)
    results: list[list[Any]] = []
    for method, described in calls:
        try:
            args = [build(a, line) for a in described]
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which judges it
            results.append(["unbuilt", outcome(exc), type(exc).__name__])
            continue
        try:
            call(line, method, args)
            results.append(["ok"])
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which judges it
            results.append(["refused", outcome(exc), type(exc).__name__, str(exc)[:200]])
    line.close()
    return results


def race(allocator: Any, nbytes: int, rounds: int) -> dict[str, Any]:
    """Free a buffer while another thread copies `nbytes` into it, `rounds` times; how the copies ended."""
    source = np.ones(nbytes, np.uint8)
    ended: dict[str, int] = {}
    for _ in range(rounds):
        ptr = allocator.allocate(nbytes)
        started = threading.Event()

        def copy(ptr: Any = ptr, started: threading.Event = started) -> None:
            started.set()
            for _ in range(4):
                try:
                    allocator.copy_host_to_device(ptr, source, nbytes)
                    name = "copied"
                except Exception as exc:  # noqa: BLE001 - counted by kind below
                    name = f"refused:{outcome(exc)}"
                ended[name] = ended.get(name, 0) + 1

        thread = threading.Thread(target=copy)
        thread.start()
        started.wait()
        allocator.deallocate(ptr)
        thread.join()
    return {"ended": ended, "live": allocator.live_allocations()}


def main() -> None:
    backend = sys.argv[1]
    allocator, other = make_allocator(backend), make_allocator(backend)
    for text in sys.stdin:
        request = json.loads(text)
        if request[0] == "race":
            answer: Any = race(allocator, request[1], request[2])
        else:
            answer = run_line(allocator, other, backend, request)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
