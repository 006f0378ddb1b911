"""docs/place_devices_cost.md is rendered by code from the committed data, never edited by hand."""

import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _benchmark_module():
    spec = importlib.util.spec_from_file_location("place_devices_cost", ROOT / "benchmarks" / "place_devices_cost.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _data():
    return json.loads((ROOT / "docs" / "data" / "place_devices_cost.json").read_text())


def test_page_matches_a_render_of_the_committed_data():
    assert _benchmark_module().render(_data()) == (ROOT / "docs" / "place_devices_cost.md").read_text()


def test_every_row_has_each_timing_and_the_comparison_costs_no_more_than_before():
    data = _data()
    module = _benchmark_module()
    before = {(r["model"], r["strategy"]): r["place_comparison_s"] for r in data["before"]["rows"]}
    for row in data["rows"]:
        assert all(row[key] > 0 for key in module.TIMINGS), row
        assert row["pass_s"] <= row["place_s"], row  # the pass is part of placing
        assert row["place_comparison_s"] < before[(row["model"], row["strategy"])], row
