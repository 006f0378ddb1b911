"""The cost model: least-squares fit with known latency and bandwidth, JSON round trip, the shipped H200 default."""

import json
from pathlib import Path

import pytest

from devcopy_lib.bench.cost_model import FIT_METHOD, CostModel, default_model, fit_line, predict
from devcopy_lib.bench.harness import SweepResult
from devcopy_lib.bench.measurement import Measurement

ROOT = Path(__file__).resolve().parents[2]
SIZES = [4 << (2 * i) for i in range(14)]


def _synthetic(latency, gbps):
    return [latency + n / (gbps * 1e9) for n in SIZES]


def test_fit_recovers_known_latency_and_bandwidth():
    line = fit_line(SIZES, _synthetic(12e-6, 25.0))
    assert line.latency_s == pytest.approx(12e-6, rel=1e-6) and line.bandwidth_gbps == pytest.approx(25.0, rel=1e-6)
    assert max(abs(r) for r in line.residuals) < 1e-4


def test_fit_from_a_sweep_gives_one_line_per_direction_and_memory():
    rows = [
        Measurement(FIT_METHOD, d, mem, n, "wall", [t, t, t])
        for d, mem, lat, bw in [("h2d", "pinned", 10e-6, 50.0), ("d2h", "pageable", 20e-6, 20.0)]
        for n, t in zip(SIZES, _synthetic(lat, bw), strict=True)
    ]
    model = CostModel.fit(SweepResult("cupy", "gpu", rows))
    assert model.predict("h2d", 1 << 30) == pytest.approx(10e-6 + (1 << 30) / 50e9, rel=1e-6)
    assert model.predict("d2h", 4096, "pageable") == pytest.approx(20e-6 + 4096 / 20e9, rel=1e-6)
    assert model.predict("h2d", 0) == 0.0  # exact: zero bytes cost nothing, by definition


def test_save_and_load_round_trip(tmp_path):
    model = CostModel({("h2d", "pinned"): fit_line(SIZES, _synthetic(5e-6, 40.0))}, {"device": "x"})
    model.save(str(tmp_path / "m.json"))
    again = CostModel.load(str(tmp_path / "m.json"))
    assert again.lines == model.lines and again.source == {"device": "x"}  # exact: a JSON round trip keeps every bit


def test_unknown_direction_or_memory_lists_the_valid_ones():
    model = CostModel({("h2d", "pinned"): fit_line(SIZES, _synthetic(5e-6, 40.0))})
    with pytest.raises(ValueError, match=r"direction='d2d', memory='pinned'. Valid: \['h2d/pinned'\]"):
        model.predict("d2d", 8)


def test_fit_needs_two_sizes_and_a_sweep_with_the_method():
    with pytest.raises(ValueError, match="two distinct sizes"):
        fit_line([8], [1e-6])
    with pytest.raises(ValueError, match=f"No '{FIT_METHOD}' measurements"):
        CostModel.fit(SweepResult("cupy", "gpu", []))


def test_default_models_pageable_lines_are_the_fit_of_the_committed_h200_sweep():
    """(Its pinned lines come from a loaded method's copies: tests/bench/test_render_docs.py.)"""
    data = json.loads((ROOT / "docs/data/copy_bandwidth.json").read_text())
    refit = CostModel.fit(SweepResult.from_dict(data))
    for direction in ("h2d", "d2h"):
        assert refit.lines[(direction, "pageable")].close_to(default_model().lines[(direction, "pageable")], rel=1e-9)
    assert 50 < default_model().lines[("h2d", "pinned")].bandwidth_gbps < 60
    assert predict("h2d", 1 << 30) > predict("h2d", 1 << 20) > predict("h2d", 4) > 0
