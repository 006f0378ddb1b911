"""Outputs of a devcopy run against eager PyTorch: what `devcopy run`, the widgets and the notebooks report."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def compare_outputs(outputs: Sequence[torch.Tensor], expected: Sequence[torch.Tensor]) -> tuple[bool, float]:
    """(every output matches eager within assert_close's default tolerance for its dtype, max |diff| in float64).
    NaN where eager has NaN and inf where eager has the same inf are equal (difference 0); a count or shape
    mismatch gives (False, inf)."""
    if len(outputs) != len(expected):
        return False, float("inf")
    ok, worst = True, 0.0
    for got, want in zip(outputs, expected, strict=True):
        if got.shape != want.shape:
            return False, float("inf")
        try:
            torch.testing.assert_close(got, want, equal_nan=True)
        except AssertionError:
            ok = False
        if got.numel():
            diff = _max_abs_diff(got.double(), want.double())
            worst = diff if diff > worst or diff != diff else worst  # a NaN difference sticks
    return ok, worst


def _max_abs_diff(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| where equal values (same inf, NaN with NaN) count 0; NaN on one side only gives NaN."""
    same = (got == want) | (got.isnan() & want.isnan())
    return float(torch.where(same, 0.0, (got - want).abs()).max())
