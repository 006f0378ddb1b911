"""Exceptions raised by the device layer; the kernels map them onto ExecuTorch's error codes."""

from ..names import ErrorKind


class DeviceCopyError(RuntimeError):
    """A copy between host and device memory failed (ExecuTorch: Error::Internal at the kernel)."""

    kind = ErrorKind.DEVICE


class DeviceMemoryAccessError(RuntimeError):
    """Host code read or wrote device memory directly, i.e. a device copy is missing."""

    kind = ErrorKind.DEVICE
