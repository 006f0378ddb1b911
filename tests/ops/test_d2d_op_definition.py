"""devcopy's `et_copy::_d2d_copy` is defined in a FRAGMENT whichever of ExecuTorch and devcopy is imported first."""

import subprocess
import sys

import pytest

CHECK = (
    "import torch; x = torch.arange(3.0); "
    "assert torch.equal(torch.ops.et_copy._d2d_copy(x), x); "
    "assert torch.equal(torch.ops.et_copy._h2d_copy(x), x); print('ok')"
)


@pytest.mark.parametrize(
    "imports",
    [  # devcopy alone: tests/kernels/test_d2d_copy.py, in process
        "import executorch.exir; import devcopy_lib.ops.aot",
        "import devcopy_lib.ops.aot; import executorch.exir",
    ],
)
def test_d2d_is_defined_in_either_import_order(imports):
    pytest.importorskip("executorch", reason="the `reference` extra (ExecuTorch 1.5.1) is not installed")
    done = subprocess.run([sys.executable, "-c", f"{imports}; {CHECK}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-2000:]
