"""What is timed on CUDA: raw cudaMemcpy/cudaMemcpyAsync, torch, CuPy, devcopy's engine and allocator path.

Buffers are made once per size (outside timing) and filled with a non-zero pattern; methods that allocate by nature
(`.to('cuda')`, `.cpu()`, `cupy.asarray`, `.get()`) allocate inside the timed call, as a caller would see them. The
raw CUDA calls come from the devices layer (`devices/cupy_raw.py`), device time from the allocator's `event_timer`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np

from ..devices.allocator import DeviceAllocator
from ..devices.capabilities import DeviceTimer
from ..devices.cupy_cuda import CupyCudaAllocator
from ..devices.cupy_raw import RawCuda
from ..names import Direction
from .clocks import Clock, WallClock
from .harness import Case
from .targets import RAW_SYNC, REUSED

# build(direction, memory, n, probe=False) -> the call to time, or with probe=True whether the method applies
Build = Callable[..., Any]


class CudaBench:
    """One size's buffers at a time and the cases timed on them, for a `CupyCudaAllocator`."""

    # what it can time; "reused pageable": the same pageable buffers copied again and again through the allocator,
    # which registers them in place (devices/host_registration.py); "pageable" times them unregistered
    directions, memories, limits = (Direction.H2D, Direction.D2H, "both"), ("pageable", "pinned", REUSED), ""

    def __init__(self, allocator: DeviceAllocator) -> None:
        if not isinstance(allocator, CupyCudaAllocator):
            raise TypeError(
                f"CudaBench times CUDA through CuPy's copy engine, got a {allocator.backend} allocator; "
                "time it with SimulatedBench (bench/methods_sim.py)"
            )
        self.alloc, self.raw = allocator, RawCuda()
        self.engine = allocator.engine
        self.torch = _cuda_torch()
        self.device = allocator.describe_devices()[allocator.current_index()]["name"]
        self._size: int | None = None
        self._bufs: SimpleNamespace | None = None

    def clocks(self) -> dict[str, Clock]:
        """The device clock (the allocator's event timer) and the wall clock around a device synchronize."""
        return {"events": _TimerClock(self.alloc.event_timer()), "wall": WallClock(self.raw.device_synchronize)}

    def cases(self, n: int, directions: Sequence[str], memories: Sequence[str]) -> list[Case]:
        """Every applicable (method, direction, memory) at size n; `both` moves n each way (2n in all)."""
        out = []
        for direction in directions:
            for memory in memories:
                for name, build in self._methods():
                    if (memory != REUSED or build == self._allocator) and build(direction, memory, n, probe=True):
                        moved = 2 * n if direction == "both" else n
                        out.append(Case(name, direction, memory, moved, partial(build, direction, memory, n)))
        return out

    def release(self) -> None:
        """Drop this size's buffers and give cached device and pinned memory back (CuPy's pools, torch's cache)."""
        self._size, self._bufs = None, None
        self.alloc.release_cached()
        if self.torch is not None:
            self.torch.cuda.empty_cache()

    # ---- buffers ----------------------------------------------------------------------------------------------
    def _buffers(self, n: int) -> SimpleNamespace:
        """Size n's buffers, made on first use (outside timing), replacing another size's."""
        if self._bufs is None or self._size != n:
            self.release()
            b = SimpleNamespace(dev=self.alloc.allocate(n), dev2=self.alloc.allocate(n))
            b.host = {
                "pageable": (_filled(np.empty(n, np.uint8)), _filled(np.empty(n, np.uint8), 0)),
                "pinned": (_filled(self.alloc.allocate_host(n)), _filled(self.alloc.allocate_host(n), 0)),
                REUSED: (_filled(np.empty(n, np.uint8)), _filled(np.empty(n, np.uint8), 0)),
            }
            if self.torch is not None:
                b.t_dev = self.torch.empty(n, dtype=self.torch.uint8, device="cuda")
                b.t_pinned = self.torch.empty(n, dtype=self.torch.uint8, pin_memory=True).fill_(0xA5)
            self._size, self._bufs = n, b
            return b
        return self._bufs

    def _ends(self, direction: str, memory: str, n: int) -> tuple[int, int, SimpleNamespace]:
        """(dst, src) addresses of a one-way copy, and the buffers."""
        b = self._buffers(n)
        src, dst = b.host[memory]
        if direction == Direction.H2D:
            return b.dev.address, src.ctypes.data, b
        return dst.ctypes.data, b.dev.address, b

    # ---- methods: build(direction, memory, n, probe) -> the call, or with probe=True whether it applies ---------
    def _methods(self) -> list[tuple[str, Build]]:
        """(name, build) of every method timed on CUDA (torch's only where torch sees CUDA)."""
        methods: list[tuple[str, Build]] = [
            ("cudaMemcpy", self._memcpy),
            ("cudaMemcpyAsync", self._memcpy_async),
            (RAW_SYNC, self._memcpy_async_sync),
            ("devcopy engine", self._engine),
            ("devcopy allocator", self._allocator),
            ("cupy asarray/get", self._cupy),
        ]
        if self.torch is not None:
            methods += [("torch .to/.cpu", self._torch_alloc), ("torch copy_", self._torch_copy)]
        return methods

    def _memcpy(self, direction: str, memory: str, n: int, probe: bool = False) -> Any:
        if probe:
            return direction != "both"
        return partial(self.raw.memcpy, *self._ends(direction, memory, n)[:2], n)

    def _memcpy_async(self, direction: str, memory: str, n: int, probe: bool = False) -> Any:
        if probe:
            return memory == "pinned"
        if direction != "both":
            return partial(self.raw.memcpy_async, *self._ends(direction, memory, n)[:2], n)
        h2d_dst, h2d_src, b = self._ends(Direction.H2D, memory, n)
        d2h_dst = b.host[memory][1].ctypes.data
        return self.raw.fork_join(
            partial(self.raw.memcpy_async, h2d_dst, h2d_src, n),
            lambda s: self.raw.memcpy_async(d2h_dst, b.dev2.address, n, s),
        )

    def _memcpy_async_sync(self, direction: str, memory: str, n: int, probe: bool = False) -> Any:
        """The raw form of the allocator's synchronous pinned copy: the baseline of the small-copy targets."""
        if probe:
            return memory == "pinned" and direction != "both"
        return partial(self.raw.memcpy_async_sync, *self._ends(direction, memory, n)[:2], n)

    def _engine(self, direction: str, memory: str, n: int, probe: bool = False) -> Any:
        if probe:
            return direction != "both" or memory == "pinned"
        if direction != "both":
            copy = self.engine.h2d if direction == Direction.H2D else self.engine.d2h
            return partial(copy, *self._ends(direction, memory, n)[:2], n)
        h2d_dst, h2d_src, b = self._ends(Direction.H2D, memory, n)
        d2h_dst = b.host[memory][1].ctypes.data
        return self.raw.fork_join(
            partial(self.engine.h2d_async, h2d_dst, h2d_src, n, self.raw.legacy_stream),
            lambda s: self.engine.d2h_async(d2h_dst, b.dev2.address, n, s),
        )

    def _allocator(self, direction: str, memory: str, n: int, probe: bool = False) -> Any:
        """The public copy; registration of reused buffers on for "reused pageable" only (the harness makes each
        case right before timing it), so "pageable" stays the unregistered path."""
        if probe:
            return direction != "both"
        b = self._buffers(n)
        if self.alloc.registrations is not None:
            self.alloc.registrations.enabled = memory == REUSED
        src, dst = b.host[memory]
        if direction == Direction.H2D:
            return partial(self.alloc.copy_host_to_device, b.dev, src, n)
        return partial(self.alloc.copy_device_to_host, dst, b.dev, n)

    def _cupy(self, direction: str, memory: str, n: int, probe: bool = False) -> Any:
        if probe:
            return direction != "both" and memory == "pageable"
        b = self._buffers(n)
        if direction == Direction.H2D:
            return partial(self.raw.cupy_upload, b.host["pageable"][0])
        return self.alloc.device_array(b.dev, np.uint8, (n,)).get

    def _torch_alloc(self, direction: str, memory: str, n: int, probe: bool = False) -> Any:
        if probe:
            return direction != "both" and memory == "pageable"
        b = self._buffers(n)
        if direction == Direction.H2D:
            return partial(self.torch.from_numpy(b.host["pageable"][0]).to, "cuda")
        return b.t_dev.cpu

    def _torch_copy(self, direction: str, memory: str, n: int, probe: bool = False) -> Any:
        if probe:
            return direction != "both" and memory == "pinned"
        b = self._buffers(n)
        if direction == Direction.H2D:
            return partial(b.t_dev.copy_, b.t_pinned, non_blocking=True)
        return partial(b.t_pinned.copy_, b.t_dev, non_blocking=True)


class _TimerClock:
    """The harness's device clock ("events") over the allocator's reusable device timer (CUDA events recorded on the
    current stream, made once, outside the timed span)."""

    name = "events"

    def __init__(self, timer: DeviceTimer | None) -> None:
        if timer is None:
            raise RuntimeError("CudaBench needs an allocator with a device clock (capabilities.device_clock)")
        self._timer = timer

    def start(self) -> None:
        """Record the start event."""
        self._timer.__enter__()

    def stop(self, token: None) -> float:
        """Record the end event and return the device seconds between the two."""
        self._timer.__exit__(None, None, None)
        return self._timer.seconds()


def _filled(array: np.ndarray, value: int = 0xA5) -> np.ndarray:
    array.fill(value)  # touches every page; never time on untouched or all-zero sources
    return array


def _cuda_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None
