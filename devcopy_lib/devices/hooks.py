"""`BackendHooks`: what a backend implements, and nothing else - the device topology, memory, copies, device code's
view, and the capability queries with their defaults. The public interface around it (validation, statistics, the
registration cache, planned copies) is `DeviceAllocator` in `allocator.py`; a backend subclasses that and writes
only these hooks (docs/design.md §4).
"""

from __future__ import annotations

import abc
from typing import Any

import numpy as np

from ..names import Direction, device_string
from .capabilities import Capabilities, DeviceTimer
from .copy_engine import CopyTicket
from .host_buffers import check_alignment, check_count, host_size
from .planned_copy import Transfer
from .pointers import DeviceBlock, DevicePtr
from .validation import borrowed_owner

DONE = CopyTicket(None)  # what a synchronous copy path returns for an async call: already landed


class BackendHooks(abc.ABC):
    """The hooks of one backend. Every hook gets validated arguments (live pointers, spans that fit, a resolved
    device index, a host address that holds the bytes) and never counts: the template around it does both."""

    capabilities = Capabilities(real_device=False, device_clock=False, pinned_host=False)

    @property
    def backend(self) -> str:
        """The backend's name, for messages and reports (code asks `capabilities`, never the name)."""
        return type(self).__name__

    # ---- required: topology, memory, copies, device code's view ---------------------------------------------
    @abc.abstractmethod
    def device_count(self) -> int | None:
        """How many device indices exist; None for any number (the simulated accelerator)."""

    @abc.abstractmethod
    def current_index(self) -> int:
        """The device index -1 stands for (cudaGetDevice)."""

    @abc.abstractmethod
    def _allocate(self, nbytes: int, index: int, alignment: int) -> DeviceBlock:
        """A new block of `nbytes` on device `index`; MemoryError when the device is full (retried once after
        `_trim`)."""

    @abc.abstractmethod
    def _free(self, block: DeviceBlock) -> None:
        """Give a block's memory back (no copy uses it any more)."""

    @abc.abstractmethod
    def _copy_in(self, dst: DevicePtr, src_address: int, nbytes: int, index: int) -> None:
        """Copy `nbytes` (> 0) from host address `src_address` to `dst`, running on device `index`."""

    @abc.abstractmethod
    def _copy_out(self, dst_address: int, src: DevicePtr, nbytes: int, index: int) -> None:
        """Copy `nbytes` (> 0) from `src` to host address `dst_address`, running on device `index`."""

    @abc.abstractmethod
    def _device_view(self, ptr: DevicePtr, dtype: np.dtype[Any], shape: tuple[int, ...]) -> Any:
        """Device code's view of the span at `ptr` (see `DeviceAllocator.device_array`)."""

    # ---- optional, with defaults ------------------------------------------------------------------------------
    def _copy_in_async(self, dst: DevicePtr, src_address: int, nbytes: int, stream: Any) -> CopyTicket:
        """Enqueue `_copy_in` on `stream`; by default the copy runs now and the ticket is done."""
        self._copy_in(dst, src_address, nbytes, dst.index)
        return DONE

    def _copy_out_async(self, dst_address: int, src: DevicePtr, nbytes: int, stream: Any) -> CopyTicket:
        """Enqueue `_copy_out` on `stream`; by default the copy runs now and the ticket is done."""
        self._copy_out(dst_address, src, nbytes, src.index)
        return DONE

    def _planned_transfer(self, direction: str, ptr: DevicePtr, address: int, capacity: int, index: int) -> Transfer:
        """What a PlannedCopy runs, `transfer(nbytes)`: by default the copy hooks; a backend may return a faster
        direct path for what was validated."""
        if direction == Direction.H2D:
            return lambda nbytes: self._copy_in(ptr, address, nbytes, index)
        return lambda nbytes: self._copy_out(address, ptr, nbytes, index)

    def _peer_access(self, src_index: int, dst_index: int) -> bool:
        """Whether devices `src_index` and `dst_index` (distinct) can copy directly; by default: no."""
        return False

    def _copy_peer(self, dst: DevicePtr, src: DevicePtr, nbytes: int) -> None:
        """A direct device-to-device copy (cudaMemcpyPeerAsync), offered with `capabilities.peer_copy`."""
        raise NotImplementedError(f"{self.backend} has no direct device-to-device copy (capabilities.peer_copy)")

    def _borrowed_handle(self, address: int, nbytes: int, index: int, owner: Any) -> Any:
        """What a borrowed block keeps once `[address, address + nbytes)` is known to lie inside the device memory
        `owner` holds on device `index`: by default a CUDA torch tensor or a `__cuda_array_interface__` object."""
        return borrowed_owner(address, nbytes, index, owner)

    def _trim(self, index: int) -> None:
        """Release cached memory on device `index` (pools override this)."""
        return None  # nothing cached on a host-memory backend

    def _close(self) -> None:
        """Release what the backend owns (a copy engine's threads); called once."""
        return None  # nothing owned on a host-memory backend

    # ---- capability queries, public, with defaults -------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for every piece of device work enqueued on this backend's devices (synchronous backends: nothing)."""
        return None  # nothing pending on a synchronous backend

    def event_timer(self) -> DeviceTimer | None:
        """A timer on the device clock for work on the current stream, or None where the backend has no clock."""
        return None

    def is_pinned(self, host: Any, nbytes: int | None = None) -> bool:
        """Whether `nbytes` of a host buffer (None: all of it) are page-locked, so copies with it skip staging."""
        host_size(host, nbytes, "is_pinned")
        return False

    def allocate_host(self, nbytes: int, alignment: int = 64) -> np.ndarray:
        """Host memory for planned CPU buffers and staging: a uint8 array (CUDA backends return pinned memory)."""
        check_count("nbytes", nbytes)
        check_alignment(alignment, 1 << 12)
        raw = np.empty(nbytes + alignment, dtype=np.uint8)
        start = (-raw.ctypes.data) % alignment
        return raw[start : start + nbytes]

    def describe_devices(self) -> list[dict[str, str]]:
        """One row per device this backend sees: `{"device": "cuda:0", "name": ...}`."""
        return [{"device": device_string(i), "name": self.backend} for i in range(self.device_count() or 1)]
