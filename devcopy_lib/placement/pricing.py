"""How placement prices a copy: `CostModel` is the protocol the report, the cross-device pairs and the pass take
(any object with `predict(direction: "h2d" | "d2h" | "d2d", nbytes: int) -> float` seconds; bench.cost_model's
`CopyPricer` is the one devcopy ships, docs/benchmarks.md "Prices"), and `predict_seconds` / `predict_error` ask it
once, the same way for every caller. Placement never imports `bench`: the pricer is handed in.
"""

from __future__ import annotations

from typing import Protocol

from ..names import DIRECTIONS


class CostModel(Protocol):
    """A copy's price: seconds for `nbytes` in `direction` (KeyError / ValueError: no price for that direction)."""

    def predict(self, direction: str, nbytes: int) -> float: ...


def predict_seconds(cost_model: CostModel | None, direction: str, nbytes: int) -> float | None:
    """A copy's seconds by `cost_model`; None without a model, for a node that is no copy, or for a direction the
    model has no line for (a measured model has no d2d line)."""
    if cost_model is None or direction not in DIRECTIONS:
        return None
    try:
        return float(cost_model.predict(direction, nbytes))
    except (KeyError, ValueError):
        return None


def predict_error(cost_model: CostModel | None, direction: str, nbytes: int) -> float | None:
    """The out-of-sample error of `predict_seconds`'s price, where the model says one (bench.cost_model's
    `CopyPricer.error`); None otherwise."""
    error = getattr(cost_model, "error", None)
    if not callable(error) or predict_seconds(cost_model, direction, nbytes) is None:
        return None
    band = error(direction, nbytes)
    return None if band is None else float(band)


__all__ = ["CostModel", "predict_error", "predict_seconds"]
