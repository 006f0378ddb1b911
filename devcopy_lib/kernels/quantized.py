"""The quantized kernels: ExecuTorch's quantized out variants (ops/quantized.yaml, after kernels/quantized/cpu/ in
ExecuTorch) for the portable and the ATen-mode runtime.

Each computes its functional `quantized_decomposed` op - the arithmetic the quantized model runs eagerly - and
copies the result into its planned `out` (ops/quantized.py, `computes_into_out`), through the same prepared-kernel
path as the portable CPU ops (kernels/portable_cpu.py): in portable mode on zero-copy host views, a failure
recorded as InvalidArgument naming the op; in ATen mode on torch tensors, a failure raised.
"""

from __future__ import annotations

from torchgen.model import FunctionSchema

from ..ops.quantized import computes_into_out, entries
from .portable_cpu import boxed_aten_kernel
from .prepared import PreparedKernel

# kernel_name (the part after `devcopy::quantized::`) -> runtime operator name, from ops/quantized.yaml
KERNELS = {kernel.kernel_name.rpartition("::")[2]: entry.name for entry in entries() for kernel in entry.kernels}


def quantized_kernel(name: str, schema: FunctionSchema, *, portable: bool) -> PreparedKernel:
    """The boxed kernel of quantized out variant `name` (`quantized_decomposed::dequantize_per_tensor.out`)."""
    return boxed_aten_kernel(name, schema, portable=portable, call=computes_into_out(name))
