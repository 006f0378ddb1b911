"""Device identity: the type of a device and its index, and the `type[:index]` string form."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NoReturn

from ..errors import InvalidArgumentError, InvalidArgumentTypeError


class DeviceType(IntEnum):
    """ExecuTorch's device types (the values are ExecuTorch's)."""

    CPU = 0
    CUDA = 1

    @classmethod
    def _missing_(cls, value: Any) -> NoReturn:
        """Refuse a value that names no device type, with devcopy's kind and the valid ones."""
        valid = ", ".join(f"{t.name} ({t.value})" for t in cls)
        raise InvalidArgumentError(f"{value!r} is not a DeviceType; pass one of {valid}")


_VALID_TYPES = ", ".join(t.name for t in DeviceType)
MAX_DEVICE_INDEX = 127  # ExecuTorch's DeviceIndex is an int8_t (runtime/core/portable_type/device.h), as c10's is


@dataclass(frozen=True)
class Device:
    """A device: its type and index. `str()` gives `cpu` or `cuda:<index>`."""

    type: DeviceType
    index: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", DeviceType(self.type))
        if not isinstance(self.index, int) or isinstance(self.index, bool) or not 0 <= self.index <= MAX_DEVICE_INDEX:
            raise (InvalidArgumentError if isinstance(self.index, int) else InvalidArgumentTypeError)(
                f"Device index must be an int in 0..{MAX_DEVICE_INDEX} (a DeviceIndex is an int8), got {self.index!r}"
            )

    @classmethod
    def parse(cls, text: str | Device) -> Device:
        """Parse `type[:index]`, case-insensitively, index 0 when absent; a Device passes through."""
        if isinstance(text, Device):
            return text
        if not isinstance(text, str):
            raise InvalidArgumentTypeError(f"A device is a string like 'cuda:0' or 'cpu', got {text!r}")
        name, sep, index_text = text.strip().partition(":")
        try:
            dtype = DeviceType[name.strip().upper()]
        except KeyError:
            raise InvalidArgumentError(f"Unknown device type {name.strip()!r}. Valid types: {_VALID_TYPES}") from None
        if not sep:
            return cls(dtype, 0)
        index_text = index_text.strip()
        if not index_text.isdigit():
            raise InvalidArgumentError(
                f"Invalid device index {index_text!r} in {text!r}: the index is an integer >= 0, as in 'cuda:1'"
            )
        return cls(dtype, int(index_text))

    @property
    def is_cpu(self) -> bool:
        return self.type is DeviceType.CPU

    def __str__(self) -> str:
        return "cpu" if self.is_cpu and self.index == 0 else f"{self.type.name.lower()}:{self.index}"


CPU = Device(DeviceType.CPU, 0)
