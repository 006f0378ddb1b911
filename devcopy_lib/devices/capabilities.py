"""What a backend can do, as data: the layers above `devices/` ask these instead of a backend's name."""

from __future__ import annotations

import abc
from dataclasses import dataclass


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, asked by every layer above `devices/` instead of the backend's name."""

    real_device: bool  # device memory is a real accelerator's: torch views it through DLPack, device work is async
    device_clock: bool  # `event_timer()` measures on the device's own clock (CUDA events)
    pinned_host: bool  # `allocate_host` returns page-locked memory, so copies with it skip staging
    peer_copy: bool = False  # `_copy_peer` copies device to device directly (where `_peer_access` allows the pair)
    graphs: bool = False  # device work can be recorded as a CUDA graph (torch's CUDAGraph; copies: devices/graph_copy)


class DeviceTimer(abc.ABC):
    """Times one region on the device clock: `with timer: ...` then `timer.seconds()`."""

    @abc.abstractmethod
    def __enter__(self) -> None: ...

    @abc.abstractmethod
    def __exit__(self, *exc: object) -> None: ...

    @abc.abstractmethod
    def seconds(self) -> float: ...
