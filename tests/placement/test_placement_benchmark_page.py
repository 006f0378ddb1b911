"""docs/placement_pass.md is rendered by code from the committed data, never edited by hand."""

from generated_page import benchmark_module, committed_data, page


def test_page_matches_a_render_of_the_committed_data():
    data = committed_data("placement_pass")
    assert benchmark_module("placement_pass").render(data) == page("placement_pass")


def test_every_size_compared_with_executorch_has_both_measures():
    data = committed_data("placement_pass")
    compared = [row for row in data["rows"] if row.get("executorch")]
    assert compared and all(row["executorch"]["pass_s"] and row["executorch"]["end_to_end_s"] for row in compared)
