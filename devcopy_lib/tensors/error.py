"""`Error`: ExecuTorch's runtime error codes (runtime/core/error.h), so kernels and loaders report the same kinds."""

from __future__ import annotations

from enum import IntEnum


class Error(IntEnum):
    """Status codes with ExecuTorch's values; `Ok` is 0, every other member is a failure kind."""

    Ok = 0x00
    Internal = 0x01
    InvalidState = 0x02
    EndOfMethod = 0x03
    AlreadyLoaded = 0x04
    NotSupported = 0x10
    NotImplemented = 0x11
    InvalidArgument = 0x12
    InvalidType = 0x13
    OperatorMissing = 0x14
    RegistrationExceedingMaxKernels = 0x15
    RegistrationAlreadyRegistered = 0x16
    NotFound = 0x20
    MemoryAllocationFailed = 0x21
    AccessFailed = 0x22
    InvalidProgram = 0x23
    InvalidExternalData = 0x24
    OutOfResources = 0x25
    DelegateInvalidCompatibility = 0x30
    DelegateMemoryAllocationFailed = 0x31
    DelegateInvalidHandle = 0x32
