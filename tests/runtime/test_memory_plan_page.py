"""docs/memory_plan.md is rendered by code from the committed data, never edited by hand; the data shows the
indexed planner beating the quadratic scan it replaced, with the same plans."""

from generated_page import benchmark_module, committed_data, page


def test_page_matches_a_render_of_the_committed_data():
    assert benchmark_module("memory_plan").render(committed_data("memory_plan")) == page("memory_plan")


def test_every_program_from_1k_to_10k_nodes_planned_as_before_and_faster():
    rows = committed_data("memory_plan")["rows"]
    assert {r["nodes"] for r in rows} >= {1000, 2000, 5000, 10000}
    for row in rows:
        assert row["same_plan"] is True, row
        assert 0 < row["plan_s"] < row["before_s"], row


def test_a_bounded_live_set_plans_in_near_linear_time():
    data = committed_data("memory_plan")
    module = benchmark_module("memory_plan")
    for shape in ("chain", "window"):
        assert module.exponent(data["rows"], shape, "plan_s") < 1.5, shape
