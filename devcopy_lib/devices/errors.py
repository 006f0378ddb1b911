"""Exceptions raised by the device layer; the kernels map them onto ExecuTorch's error codes."""


class DeviceCopyError(RuntimeError):
    """A copy between host and device memory failed (ExecuTorch: Error::Internal at the kernel)."""

    kind = "device"


class DeviceMemoryAccessError(RuntimeError):
    """Host code read or wrote device memory directly, i.e. a device copy is missing."""

    kind = "device"
