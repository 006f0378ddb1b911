"""Outputs of a devcopy run against eager PyTorch: what `devcopy run`, the widgets and the notebooks report."""
from __future__ import annotations

import torch


def compare_outputs(outputs, expected) -> tuple[bool, float]:
    """(every output matches eager within assert_close's default tolerance for its dtype, max |diff| in float64)."""
    ok, worst = len(outputs) == len(expected), 0.0
    for got, want in zip(outputs, expected):
        try:
            torch.testing.assert_close(got, want)
        except AssertionError:
            ok = False
        if got.shape == want.shape and got.numel():
            worst = max(worst, float((got.double() - want.double()).abs().max()))
        elif got.shape != want.shape:
            ok, worst = False, float("inf")
    return ok, worst
