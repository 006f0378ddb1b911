"""docs/placement_pass.md is rendered by code from the committed data, never edited by hand."""

import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _benchmark_module():
    spec = importlib.util.spec_from_file_location("placement_pass", ROOT / "benchmarks" / "placement_pass.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_page_matches_a_render_of_the_committed_data():
    data = json.loads((ROOT / "docs" / "data" / "placement_pass.json").read_text())
    assert _benchmark_module().render(data) == (ROOT / "docs" / "placement_pass.md").read_text()


def test_every_size_compared_with_executorch_has_both_measures():
    data = json.loads((ROOT / "docs" / "data" / "placement_pass.json").read_text())
    compared = [row for row in data["rows"] if row.get("executorch")]
    assert compared and all(row["executorch"]["pass_s"] and row["executorch"]["end_to_end_s"] for row in compared)
