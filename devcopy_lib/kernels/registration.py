"""devcopy's kernels for the `et_copy` `.out` overloads, registered with `torch.library` so eager calls run them.

In a FRAGMENT (it coexists with whoever DEF'd the namespace), on backend keys CPU (the trace-time meaning: `out`
resized to `self` and overwritten) and CUDA (the ATen-mode kernel, device rule `tensor`: the CUDA tensor says which
GPU). A backend-key kernel wins over ExecuTorch's CompositeImplicitAutograd one, also outside inference mode, so eager
`torch.ops.et_copy._h2d_copy.out(cpu, out=cuda)` copies through the registered DeviceAllocator. Simulated device
tensors reach the same kernels through `register_eager_kernel`. Importing `devcopy_lib.kernels` registers them.
"""

from __future__ import annotations

import torch

from ..names import COPY_OP, DeviceRule
from ..ops.aot import NAMESPACE
from ..tensors.aten_tensor import register_eager_kernel
from .device_copy import aten_kernel_for

_OUT_OPS = tuple(op.schema_name for op in COPY_OP.values())


def _trace_time_copy(self: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
    """All-CPU call (tracing, tests): the `.out` meaning at trace time, `out` resized to `self` and overwritten."""
    out.resize_(self.shape).copy_(self)
    return out


def _register() -> torch.library.Library:
    # torch.library's Library and impl carry no annotations in torch's stubs
    lib = torch.library.Library(NAMESPACE, "FRAGMENT")  # type: ignore[no-untyped-call]
    for name in _OUT_OPS:
        kernel = aten_kernel_for(name, DeviceRule.TENSOR)
        lib.impl(name, _trace_time_copy, "CPU")  # type: ignore[no-untyped-call]
        lib.impl(name, lambda self, *, out, _kernel=kernel: _kernel(self, out), "CUDA")  # type: ignore[no-untyped-call]
        register_eager_kernel(f"{NAMESPACE}::{name}", kernel)
    return lib


_library = _register()  # kept alive: dropping it unregisters the kernels
