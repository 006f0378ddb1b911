"""Exceptions raised by the device layer; the kernels map them onto ExecuTorch's error codes.

Every refusal of a public call carries one of devcopy's error kinds (docs/design.md §8): a bad argument is an
`InvalidArgumentError` (kind `usage`; `InvalidArgumentTypeError` when its type is wrong), a device pointer that is not
a live buffer of the allocator a `DeviceUsageError` (kind `device`), a full device `OutOfDeviceMemory`. They subclass
ValueError / TypeError / MemoryError, so code that caught those keeps working. The argument errors are every layer's:
they live in `devcopy_lib/errors.py`, and are imported here too.
"""

from ..errors import InvalidArgumentError as InvalidArgumentError  # the generic ones, importable from here too
from ..errors import InvalidArgumentTypeError as InvalidArgumentTypeError
from ..names import ErrorKind


class DeviceCopyError(RuntimeError):
    """A copy between host and device memory failed (ExecuTorch: Error::Internal at the kernel)."""

    kind = ErrorKind.DEVICE


class DeviceMemoryAccessError(RuntimeError):
    """Host code read or wrote device memory directly, i.e. a device copy is missing."""

    kind = ErrorKind.DEVICE


class DeviceUsageError(ValueError):
    """A device pointer that is not one of the allocator's live buffers (freed, another allocator's, a span past its
    end) or a closed allocator: refused before any native call."""

    kind = ErrorKind.DEVICE


class OutOfDeviceMemory(MemoryError):
    """The device could not hold an allocation, even after the allocator released its caches."""

    kind = ErrorKind.DEVICE
