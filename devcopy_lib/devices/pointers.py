"""Device pointers: `DeviceBlock` (one allocation, opaque to host code) and `DevicePtr` (a block plus a byte offset).

A block's extent (index, size, address, the memory that backs it) is fixed when it is made, and a pointer's offset
always lies inside its block: no caller can point a copy outside an allocation (docs/reliability.md, "Allocators").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np

from ..names import device_string
from .errors import DeviceMemoryAccessError, DeviceUsageError, InvalidArgumentError, InvalidArgumentTypeError


def _refuse_fixed(name: str) -> NoReturn:
    """Refuse setting a block's fixed attribute `name`."""
    raise DeviceUsageError(f"DeviceBlock.{name} is fixed when the allocator makes the block; allocate a new buffer")


class DeviceBlock:
    """One device allocation. `handle` is the backend's object that owns the memory (kept alive by the block); the
    extent (`index`, `nbytes`, `address`, `handle`) is read-only. `running` holds one marker per copy running on the
    block (the id of the thread running it) and `pending` the stream-ordered copies not yet waited for: the
    allocator frees a block only once both are empty."""

    __slots__ = ("_index", "_nbytes", "_address", "_handle", "freed", "serial", "borrowed", "running", "pending")
    _serials = itertools.count(1)

    def __init__(self, index: int, nbytes: int, address: int, handle: Any, borrowed: bool = False) -> None:
        self._index, self._nbytes, self._address, self._handle = index, nbytes, address, handle
        self.freed, self.borrowed = False, borrowed
        self.running: list[int] = []
        self.pending: list[Any] = []
        self.serial = next(self._serials)

    @property
    def index(self) -> int:
        """The device index the block lives on."""
        return self._index

    @index.setter
    def index(self, value: int) -> NoReturn:
        _refuse_fixed("index")

    @property
    def nbytes(self) -> int:
        """The block's size in bytes."""
        return self._nbytes

    @nbytes.setter
    def nbytes(self, value: int) -> NoReturn:
        _refuse_fixed("nbytes")

    @property
    def address(self) -> int:
        """The device address of the block's first byte."""
        return self._address

    @address.setter
    def address(self, value: int) -> NoReturn:
        _refuse_fixed("address")

    @property
    def handle(self) -> Any:
        """The backend's object that owns the memory (None once freed)."""
        return self._handle

    @handle.setter
    def handle(self, value: Any) -> NoReturn:
        _refuse_fixed("handle")

    def drop_handle(self) -> None:
        """Let go of the backing memory (a backend's `_free`): the block is freed."""
        self._handle = None

    def __array__(self, *args: object, **kwargs: object) -> NoReturn:
        """Refuse NumPy's host read: device memory reaches the host only through a D2H copy."""
        raise DeviceMemoryAccessError(
            f"Host code tried to read device memory ({device_string(self.index)}, {self.nbytes} bytes) directly. "
            "Device memory reaches the host only through a D2H copy (et_copy::_d2h_copy.out)."
        )


@dataclass(frozen=True)
class DevicePtr:
    """A pointer into a device allocation: the block plus a byte offset in 0..block size. `ptr + n` advances it."""

    block: DeviceBlock
    offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.block, DeviceBlock):
            raise InvalidArgumentTypeError(
                f"DevicePtr points into a DeviceBlock, got {type(self.block).__name__}; use the pointer "
                "allocate() returns (or ptr + n)"
            )
        offset = self.offset
        if not isinstance(offset, (int, np.integer)) or isinstance(offset, bool):
            raise InvalidArgumentTypeError(
                f"A DevicePtr offset is a whole number of bytes, got {offset!r} ({type(offset).__name__})"
            )
        if not 0 <= offset <= self.block.nbytes:
            raise InvalidArgumentError(
                f"Pointer offset {offset} is outside its allocation of {self.block.nbytes} bytes; "
                f"use an offset in 0..{self.block.nbytes}"
            )
        object.__setattr__(self, "offset", int(offset))

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
            raise InvalidArgumentTypeError(
                f"A DevicePtr advances by a whole number of bytes, got {n!r} ({type(n).__name__})"
            )
        return DevicePtr(self.block, self.offset + int(n))

    def __array__(self, *args: object, **kwargs: object) -> NoReturn:
        """Refuse NumPy's host read, as the block does."""
        self.block.__array__()

    def __repr__(self) -> str:
        return f"DevicePtr({device_string(self.index)}, 0x{self.address:x}, {self.nbytes} bytes left)"
