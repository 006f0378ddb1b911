"""Device pointers: `DeviceBlock` (one allocation, opaque to host code) and `DevicePtr` (a block plus a byte offset)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from .errors import DeviceMemoryAccessError


class DeviceBlock:
    """One device allocation. `handle` is the backend's object that owns the memory (kept alive by the block)."""

    __slots__ = ("index", "nbytes", "address", "handle", "freed", "serial", "borrowed")
    _serials = itertools.count(1)

    def __init__(self, index: int, nbytes: int, address: int, handle: Any, borrowed: bool = False) -> None:
        self.index, self.nbytes, self.address, self.handle = index, nbytes, address, handle
        self.freed, self.borrowed = False, borrowed
        self.serial = next(self._serials)

    def __array__(self, *args: object, **kwargs: object) -> NoReturn:
        """Refuse NumPy's host read: device memory reaches the host only through a D2H copy."""
        raise DeviceMemoryAccessError(
            f"Host code tried to read device memory (cuda:{self.index}, {self.nbytes} bytes) directly. "
            "Device memory reaches the host only through a D2H copy (et_copy::_d2h_copy.out)."
        )


@dataclass(frozen=True)
class DevicePtr:
    """A pointer into a device allocation: the block plus a byte offset. `ptr + n` advances it."""

    block: DeviceBlock
    offset: int = 0

    @property
    def index(self) -> int:
        """The device index the allocation lives on."""
        return self.block.index

    @property
    def address(self) -> int:
        """The device address this pointer points at."""
        return self.block.address + self.offset

    @property
    def nbytes(self) -> int:
        """Bytes from this pointer to the end of its allocation."""
        return self.block.nbytes - self.offset

    def __add__(self, n: int) -> DevicePtr:
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
            raise TypeError(f"A DevicePtr advances by a whole number of bytes, got {n!r} ({type(n).__name__})")
        n = int(n)
        if not 0 <= self.offset + n <= self.block.nbytes:
            raise ValueError(f"Pointer offset {self.offset + n} is outside its allocation of {self.block.nbytes} bytes")
        return DevicePtr(self.block, self.offset + n)

    def __array__(self, *args: object, **kwargs: object) -> NoReturn:
        """Refuse NumPy's host read, as the block does."""
        self.block.__array__()

    def __repr__(self) -> str:
        return f"DevicePtr(cuda:{self.index}, 0x{self.address:x}, {self.nbytes} bytes left)"
