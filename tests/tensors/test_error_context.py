"""Error codes are ExecuTorch's; KernelRuntimeContext records failures."""

from __future__ import annotations

import pytest

from devcopy_lib.tensors.context import KernelRuntimeContext
from devcopy_lib.tensors.error import Error


def test_error_codes_match_executorch():
    assert (
        Error.Ok,
        Error.Internal,
        Error.NotSupported,
        Error.InvalidArgument,
        Error.OperatorMissing,
        Error.NotFound,
        Error.InvalidProgram,
    ) == (0, 1, 0x10, 0x12, 0x14, 0x20, 0x23)


@pytest.mark.reference
def test_error_codes_match_the_installed_header():
    import importlib.util
    import re
    from pathlib import Path

    package = Path(importlib.util.find_spec("executorch").submodule_search_locations[0])
    header = package / "include/executorch/runtime/core/error.h"
    if not header.exists():
        pytest.skip(f"{header} is not shipped in this ExecuTorch wheel")
    codes = {
        name: int(value, 16) for name, value in re.findall(r"^\s*(\w+) = (0x[0-9a-fA-F]+)", header.read_text(), re.M)
    }
    assert codes and all(Error[name] == value for name, value in codes.items())


def test_context_starts_ok_and_records_failure():
    ctx = KernelRuntimeContext()
    assert ctx.failure_state() is Error.Ok
    ctx.fail(Error.NotFound, "no allocator")
    assert ctx.failure_state() is Error.NotFound and ctx.message == "no allocator"


def test_fail_with_ok_is_refused():
    with pytest.raises(ValueError, match="meaningless"):
        KernelRuntimeContext().fail(Error.Ok)
