"""docs/benchmarks.md is exactly what benchmarks/render_docs.py renders from the committed data."""

from pathlib import Path

from generated_page import benchmark_module

ROOT = Path(__file__).resolve().parents[2]


def _render_docs():
    return benchmark_module("render_docs")


def test_benchmarks_md_matches_a_fresh_render_of_the_committed_data():
    docs = _render_docs()
    result, simulated = docs.load(docs.CUDA_DATA), docs.load(docs.SIM_DATA)
    from devcopy_lib.bench.cost_model import CostModel

    expected = docs.render_markdown(result, simulated, docs.with_method_copies(CostModel.fit(result)))
    page = (ROOT / "docs/benchmarks.md").read_text()
    assert page == expected, "rerun: python benchmarks/render_docs.py"  # exact: the page prints rounded figures


def test_the_packaged_cost_model_prices_pinned_copies_as_a_loaded_method_measured_them():
    """Pinned lines come from the profiled method copies (CUDA events), pageable ones from the sweep; each profiled
    copy of >= 1 MiB within 15% of its prediction."""
    import json

    from devcopy_lib.bench.cost_model import CostModel, default_model

    docs = _render_docs()
    fitted = docs.with_method_copies(CostModel.fit(docs.load(docs.CUDA_DATA)))
    assert fitted.close_to(default_model(), rel=1e-9), "rerun: python benchmarks/render_docs.py"
    assert fitted.source["pinned_lines_from"]["clock"] == "events"
    run = json.loads((ROOT / "docs/data/call_overhead_cupy.json").read_text())
    copies = docs._call_overhead_module().profiled_copies(run)
    assert len(copies) >= 8
    for c in copies:
        direction = "h2d" if "_h2d_" in c["op"] else "d2h"
        assert abs(fitted.predict(direction, c["bytes"], c["memory"]) / c["measured_s"] - 1) <= 0.15, c


def test_out_of_sample_small_copies_are_priced_near_their_fixed_cost_and_every_band_says_its_error():
    """The small-copy line no longer overstates a copy under 4 KiB (1.75x with the 1 MiB-up line): median within
    25% on every check run; the packaged model carries one error band per size band of pinned copies."""
    import statistics

    from devcopy_lib.bench.cost_model import default_model

    docs = _render_docs()
    model = default_model()
    for run in docs.check_runs():
        small = [c for c in docs.profiled_copies(run, smallest=0) if c["bytes"] < 4096 and c["memory"] == "pinned"]
        ratios = [model.predict("h2d" if "_h2d_" in c["op"] else "d2h", c["bytes"]) / c["measured_s"] for c in small]
        assert not ratios or abs(statistics.median(ratios) - 1) <= 0.25, run["meta"]
    assert [(b.low_bytes, b.high_bytes) for b in model.checks] == [(0, 1 << 20), (1 << 20, None)]
    page = (ROOT / "docs/benchmarks.md").read_text()
    assert all(f"- {band.text}" in page for band in model.checks)


def test_page_states_every_target_and_links_the_placement_report():
    text = (ROOT / "docs/benchmarks.md").read_text()
    for phrase in (
        "0.95x cudaMemcpyAsync",
        ">= 2x torch .to('cuda')",
        ">= 3x cudaMemcpy",
        ">= 1.5x cudaMemcpy",
        ">= 10x torch .cpu()",
        ">= 0.97x raw bidirectional cudaMemcpyAsync",
        "4 KiB h2d through the allocator path",
        "0.8x numpy copyto",
        "(placement_pass.md)",
    ):
        assert phrase in text
    for row in text.splitlines():
        if row.endswith("| **no** |"):
            assert "by " in text.split("**Missed**")[1]  # a missed target says by how much and why


def test_committed_data_names_machine_gpu_date_command_and_versions():
    import json

    data = json.loads((ROOT / "docs/data/copy_bandwidth.json").read_text())
    assert {"machine", "gpu", "date", "command", "versions"} <= set(data) and "H200" in data["gpu"]
    assert all(row["samples"] for row in data["rows"])


def test_the_readme_quotes_the_prices_and_bandwidths_the_data_gives():
    """The README's numbers come from the committed run: one 64 B H2D priced for each backend, and the 1 GiB pageable
    H2D bandwidths of the staging pipeline and of cudaMemcpy (wall clock)."""
    from devcopy_lib.bench.cost_model import price_copy

    readme = " ".join((ROOT / "README.md").read_text().split())
    cupy, simulated = price_copy("h2d", 64, backend="cupy"), price_copy("h2d", 64, backend="simulated")
    assert f"64 B H2D: {cupy.text} with CuPy's {cupy.memory} host buffers" in readme
    assert f"{simulated.text} for the simulated backend's {simulated.memory} ones, {simulated.clock} clock" in readme
    docs = _render_docs()
    result = docs.load(docs.CUDA_DATA)
    ours = [result.find(m, "h2d", "pageable", 1 << 30, "wall").gbps for m in ("devcopy engine", "devcopy allocator")]
    memcpy = result.find("cudaMemcpy", "h2d", "pageable", 1 << 30, "wall").gbps
    assert f"1 GiB at {min(ours):.0f}-{max(ours):.0f} GB/s H2D" in readme and f"against {memcpy:.1f} GB/s" in readme
