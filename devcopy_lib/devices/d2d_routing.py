"""How a device-to-device copy goes: directly between peers where the backend can, else through host memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from .host_buffers import HostBuffer
from .pointers import DevicePtr

# How one device-to-device copy went (what copy_device_to_device returns and the statistics count).
PEER_ROUTE = "peer"  # names: one direct copy between devices (a route, not the placement strategy)
HOST_ROUTE = "host"  # D2H into staging host memory, then H2D
EMPTY_ROUTE = "empty"  # nothing to move (0 bytes)

CopyPeer = Callable[[DevicePtr, DevicePtr, int], None]  # a backend's `_copy_peer(dst, src, nbytes)`


class D2DRoutes(Protocol):
    """The public allocator calls a device-to-device copy is routed over (a `DeviceAllocator` has them all)."""

    def can_access_peer(self, a: int, b: int) -> bool: ...
    def allocate_host(self, nbytes: int, alignment: int = 64) -> np.ndarray: ...
    def copy_device_to_host(self, dst: HostBuffer, src: DevicePtr, nbytes: int, index: int = -1) -> None: ...
    def copy_host_to_device(self, dst: DevicePtr, src: HostBuffer, nbytes: int, index: int = -1) -> None: ...


def route_d2d(allocator: D2DRoutes, copy_peer: CopyPeer, dst: DevicePtr, src: DevicePtr, nbytes: int) -> str:
    """Copy `nbytes` (> 0, validated) from `src` to `dst` and say how: PEER_ROUTE (one direct copy, `copy_peer`) or
    HOST_ROUTE (D2H into staging host memory, then H2D, each counted as the public copies count)."""
    if allocator.can_access_peer(src.index, dst.index):
        copy_peer(dst, src, nbytes)
        return PEER_ROUTE
    staging = allocator.allocate_host(nbytes)
    allocator.copy_device_to_host(staging, src, nbytes, src.index)
    allocator.copy_host_to_device(dst, staging, nbytes, dst.index)
    return HOST_ROUTE
