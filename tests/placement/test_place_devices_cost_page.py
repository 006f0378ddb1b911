"""docs/place_devices_cost.md is rendered by code from the committed data, never edited by hand."""

from generated_page import benchmark_module, committed_data, page


def test_page_matches_a_render_of_the_committed_data():
    assert benchmark_module("place_devices_cost").render(committed_data("place_devices_cost")) == page(
        "place_devices_cost"
    )


def test_every_row_has_each_timing_and_the_comparison_costs_no_more_than_before():
    data = committed_data("place_devices_cost")
    module = benchmark_module("place_devices_cost")
    before = {(r["model"], r["strategy"]): r["place_comparison_s"] for r in data["before"]["rows"]}
    for row in data["rows"]:
        assert all(row[key] > 0 for key in module.TIMINGS), row
        assert row["pass_s"] <= row["place_s"], row  # the pass is part of placing
        assert row["place_comparison_s"] < before[(row["model"], row["strategy"])], row
