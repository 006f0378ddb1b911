"""What the command says about itself: bare `devcopy` lists the subcommands; the CLI's known noise stays quiet."""

from __future__ import annotations

import json
import warnings

from devcopy_lib.cli import COMMANDS, main

INPUT_WRITER = """
import torch
from devcopy_lib.models.extras import _warn_fallback


class Add(torch.nn.Module):
    def forward(self, a, b):
        return a + b


def factory():
    _warn_fallback("operator torchvision::nms does not exist")  # what importing a CUDA torchvision on a CPU torch says
    return Add(), (torch.randn(3), torch.randn(3))
"""


def test_devcopy_with_no_arguments_lists_the_subcommands(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "give a subcommand" in err and all(name in err for name in COMMANDS)
    assert main(["--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "usage" and all(name in error["message"] for name in COMMANDS)


def test_the_torchvision_fallback_note_is_not_repeated_by_every_run(capsys, tmp_path):
    path = tmp_path / "tv.py"
    path.write_text(INPUT_WRITER)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["run", f"{path}:factory", "--backend", "simulated", "--json"]) == 0
    assert not [w for w in caught if "compiled ops did not load" in str(w.message)]
    assert "compiled ops did not load" not in capsys.readouterr().err
