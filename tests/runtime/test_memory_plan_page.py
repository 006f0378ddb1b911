"""docs/memory_plan.md is rendered by code from the committed data, never edited by hand; the data shows the
indexed planner beating the quadratic scan it replaced, with the same plans."""

import importlib.util
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _benchmark_module():
    spec = importlib.util.spec_from_file_location("memory_plan_benchmark", ROOT / "benchmarks" / "memory_plan.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _data():
    return json.loads((ROOT / "docs" / "data" / "memory_plan.json").read_text())


def test_page_matches_a_render_of_the_committed_data():
    assert _benchmark_module().render(_data()) == (ROOT / "docs" / "memory_plan.md").read_text()


def test_every_program_from_1k_to_10k_nodes_planned_as_before_and_faster():
    rows = _data()["rows"]
    assert {r["nodes"] for r in rows} >= {1000, 2000, 5000, 10000}
    for row in rows:
        assert row["same_plan"] is True, row
        assert 0 < row["plan_s"] < row["before_s"], row


def test_a_bounded_live_set_plans_in_near_linear_time():
    data = _data()
    module = _benchmark_module()
    for shape in ("chain", "window"):
        assert module.exponent(data["rows"], shape, "plan_s") < 1.5, shape
