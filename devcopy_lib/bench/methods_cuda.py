"""What is timed on CUDA: raw cudaMemcpy/cudaMemcpyAsync, torch, CuPy, devcopy's engine and allocator path.

Buffers are made once per size (outside timing) and filled with a non-zero pattern; methods that allocate by nature
(`.to('cuda')`, `.cpu()`, `cupy.asarray`, `.get()`) allocate inside the timed call, as a caller would see them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np

from .clocks import EventClock, WallClock
from .harness import Case

_DEFAULT = 4  # cudaMemcpyDefault


class CudaBench:
    """One size's buffers at a time and the cases timed on them, for a `CupyCudaAllocator`."""

    directions, memories, limits = ("h2d", "d2h", "both"), ("pageable", "pinned"), ""  # what it can time

    def __init__(self, allocator: Any) -> None:
        import cupy

        self.alloc, self.cupy, self.rt = allocator, cupy, cupy.cuda.runtime
        self.engine = allocator.engine
        self.torch = _cuda_torch()
        self.device = allocator.describe_devices()[allocator.current_index()]["name"]
        self.side = cupy.cuda.Stream(non_blocking=True)
        self._fork, self._join = (cupy.cuda.Event(disable_timing=True) for _ in range(2))
        self._size, self._bufs = None, None

    def clocks(self) -> dict:
        return {"events": EventClock(self.cupy), "wall": WallClock(self.rt.deviceSynchronize)}

    def cases(self, n: int, directions, memories) -> list[Case]:
        """Every applicable (method, direction, memory) at size n; `both` moves n each way (2n in all)."""
        out = []
        for direction in directions:
            for memory in memories:
                for name, build in self._methods():
                    if build(direction, memory, n, probe=True):
                        moved = 2 * n if direction == "both" else n
                        out.append(Case(name, direction, memory, moved, partial(build, direction, memory, n)))
        return out

    def release(self) -> None:
        self._size, self._bufs = None, None
        self.cupy.get_default_memory_pool().free_all_blocks()
        self.cupy.get_default_pinned_memory_pool().free_all_blocks()
        if self.torch is not None:
            self.torch.cuda.empty_cache()

    # ---- buffers ----------------------------------------------------------------------------------------------
    def _buffers(self, n: int) -> SimpleNamespace:
        if self._size != n:
            self.release()
            b = SimpleNamespace(dev=self.alloc.allocate(n), dev2=self.alloc.allocate(n))
            b.host = {
                "pageable": (_filled(np.empty(n, np.uint8)), _filled(np.empty(n, np.uint8), 0)),
                "pinned": (_filled(self.alloc.allocate_host(n)), _filled(self.alloc.allocate_host(n), 0)),
            }
            if self.torch is not None:
                b.t_dev = self.torch.empty(n, dtype=self.torch.uint8, device="cuda")
                b.t_pinned = self.torch.empty(n, dtype=self.torch.uint8, pin_memory=True).fill_(0xA5)
            self._size, self._bufs = n, b
        return self._bufs

    def _ends(self, direction: str, memory: str, n: int) -> tuple[int, int, SimpleNamespace]:
        """(dst, src) addresses of a one-way copy, and the buffers."""
        b = self._buffers(n)
        src, dst = b.host[memory]
        if direction == "h2d":
            return b.dev.address, src.ctypes.data, b
        return dst.ctypes.data, b.dev.address, b

    def _fork_join(self, on_null: Callable[[], Any], on_side: Callable[[int], Any]) -> Callable[[], None]:
        """Both directions at once: `on_null` on the legacy stream, `on_side` on a non-blocking stream, joined."""
        null, side, fork, join = self.cupy.cuda.Stream.null, self.side, self._fork, self._join

        def both() -> None:
            fork.record(null)
            side.wait_event(fork)
            on_null()
            on_side(side)
            join.record(side)
            null.wait_event(join)

        return both

    # ---- methods: build(direction, memory, n, probe) -> the call, or with probe=True whether it applies ---------
    def _methods(self) -> list[tuple[str, Callable]]:
        methods = [
            ("cudaMemcpy", self._memcpy),
            ("cudaMemcpyAsync", self._memcpy_async),
            ("devcopy engine", self._engine),
            ("devcopy allocator", self._allocator),
            ("cupy asarray/get", self._cupy),
        ]
        if self.torch is not None:
            methods += [("torch .to/.cpu", self._torch_alloc), ("torch copy_", self._torch_copy)]
        return methods

    def _memcpy(self, direction, memory, n, probe=False):
        if probe:
            return direction != "both"
        return partial(self.rt.memcpy, *self._ends(direction, memory, n)[:2], n, _DEFAULT)

    def _memcpy_async(self, direction, memory, n, probe=False):
        if probe:
            return memory == "pinned"
        if direction != "both":
            return partial(self.rt.memcpyAsync, *self._ends(direction, memory, n)[:2], n, _DEFAULT, 0)
        h2d_dst, h2d_src, b = self._ends("h2d", memory, n)
        d2h_dst = b.host[memory][1].ctypes.data
        return self._fork_join(
            partial(self.rt.memcpyAsync, h2d_dst, h2d_src, n, _DEFAULT, 0),
            lambda s: self.rt.memcpyAsync(d2h_dst, b.dev2.address, n, _DEFAULT, s.ptr),
        )

    def _engine(self, direction, memory, n, probe=False):
        if probe:
            return direction != "both" or memory == "pinned"
        if direction != "both":
            copy = self.engine.h2d if direction == "h2d" else self.engine.d2h
            return partial(copy, *self._ends(direction, memory, n)[:2], n)
        h2d_dst, h2d_src, b = self._ends("h2d", memory, n)
        d2h_dst = b.host[memory][1].ctypes.data
        null = self.cupy.cuda.Stream.null
        return self._fork_join(
            partial(self.engine.h2d_async, h2d_dst, h2d_src, n, null),
            lambda s: self.engine.d2h_async(d2h_dst, b.dev2.address, n, s),
        )

    def _allocator(self, direction, memory, n, probe=False):
        if probe:
            return direction != "both"
        b = self._buffers(n)
        src, dst = b.host[memory]
        if direction == "h2d":
            return partial(self.alloc.copy_host_to_device, b.dev, src, n)
        return partial(self.alloc.copy_device_to_host, dst, b.dev, n)

    def _cupy(self, direction, memory, n, probe=False):
        if probe:
            return direction != "both" and memory == "pageable"
        b = self._buffers(n)
        if direction == "h2d":
            return partial(self.cupy.asarray, b.host["pageable"][0])
        return self.alloc.device_array(b.dev, np.uint8, (n,)).get

    def _torch_alloc(self, direction, memory, n, probe=False):
        if probe:
            return direction != "both" and memory == "pageable"
        b = self._buffers(n)
        if direction == "h2d":
            return partial(self.torch.from_numpy(b.host["pageable"][0]).to, "cuda")
        return b.t_dev.cpu

    def _torch_copy(self, direction, memory, n, probe=False):
        if probe:
            return direction != "both" and memory == "pinned"
        b = self._buffers(n)
        if direction == "h2d":
            return partial(b.t_dev.copy_, b.t_pinned, non_blocking=True)
        return partial(b.t_pinned.copy_, b.t_dev, non_blocking=True)


def _filled(array: np.ndarray, value: int = 0xA5) -> np.ndarray:
    array.fill(value)  # touches every page; never time on untouched or all-zero sources
    return array


def _cuda_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None
