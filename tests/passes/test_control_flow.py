"""Control flow (torch.cond, torch.while_loop) is refused by name, from the library and the CLI, never a traceback
(docs/differences.md: ExecuTorch keeps such ops on the CPU; devcopy's programs have no jump instructions)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from devcopy_lib import export_and_lower
from devcopy_lib.passes.lower import UnsupportedModelError


class Cond(torch.nn.Module):
    def forward(self, x, y):
        z = x + y
        return torch.cond(z.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (z,)) * y


class WhileLoop(torch.nn.Module):
    def forward(self, x):
        _, out = torch._higher_order_ops.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + 1.0), (0, x))
        return out * 2


@pytest.mark.parametrize(
    "model, inputs, construct",
    [
        (Cond(), (torch.randn(4), torch.randn(4)), "torch.cond"),
        (WhileLoop(), (torch.randn(4),), "torch.while_loop"),
    ],
)
def test_control_flow_is_refused_naming_the_construct(model, inputs, construct):
    with pytest.raises(UnsupportedModelError, match=rf"is {construct} \(control flow over subgraphs\)") as info:
        export_and_lower(model, inputs)
    assert info.value.kind == "unsupported_model" and "Export one branch" in str(info.value)


def test_the_cli_reports_cond_as_unsupported_model_with_exit_1(tmp_path):
    path = tmp_path / "cond_model.py"
    path.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,))\n"
        "def build():\n    return M(), (torch.randn(4),)\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "devcopy_lib", "place", f"{path}:build", "--json"], capture_output=True, text=True
    )
    assert run.returncode == 1, run.stderr
    error = json.loads(run.stdout)["error"]
    assert error["kind"] == "unsupported_model" and "torch.cond" in error["message"]
