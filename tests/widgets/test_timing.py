"""CopyTimingPanel: controls edit the state; Run sweeps size by size with progress, a plot and the table."""
import pytest

from devcopy_widgets import CopyTimingPanel, TimingState
from devcopy_lib.bench.plots import to_png
from devcopy_widgets.timing_plot import bandwidth_figure
from devcopy_widgets.timing_state import ceilings, is_baseline


@pytest.fixture(scope="module")
def ran():
    panel = CopyTimingPanel(sizes="4,16,64")
    panel.direction.value = "h2d"
    panel.run()
    return panel


def test_controls_edit_the_state():
    panel = CopyTimingPanel()
    panel.sizes.value, panel.direction.value, panel.memory.value, panel.quick.value = "4K,1M", "d2h", "pageable", False
    assert (panel.state.sizes, panel.state.direction, panel.state.memory, panel.state.quick) == (
        "4K,1M", "d2h", "pageable", False)
    assert panel.state.size_list() == [4096, 1 << 20]


def test_run_reports_progress_per_size_and_fills_the_table(ran):
    assert ran.error is None
    assert (ran.progress.value, ran.progress.max) == (3, 3)
    rows = ran.state.rows()
    assert {r["bytes"] for r in rows} == {4, 16, 64}
    assert {r["direction"] for r in rows} == {"h2d"}
    assert set(rows[0]) == {"method", "direction", "memory", "bytes", "clock", "median_s", "iqr_s", "gbps"}
    assert "devcopy allocator" in ran.table.value and not ran.run_button.disabled


def test_plot_has_a_line_per_method_and_the_ceiling(ran):
    axes = bandwidth_figure(ran.state.result).axes[0]
    labels = [line.get_label() for line in axes.get_lines()]
    assert any(label.startswith("devcopy allocator h2d") for label in labels)
    assert any("ceiling" in label or "peak" in label for label in labels)


def test_baselines_are_the_methods_that_are_not_devcopy(ran):
    methods = {m.method for m in ran.state.result.measurements}
    assert {m for m in methods if is_baseline(m)} == methods - {m for m in methods if m.startswith("devcopy")}
    assert ceilings(ran.state.result, 12.5) == [(12.5, "ceiling 12.5 GB/s")]


def test_on_cuda_the_ceilings_are_the_link_and_the_measured_cudaMemcpyAsync_peak():
    from devcopy_lib.bench.harness import SweepResult
    from devcopy_lib.bench.measurement import Measurement

    result = SweepResult("cupy", "NVIDIA H200", [Measurement("cudaMemcpyAsync", "h2d", "pinned", 1 << 30, "wall",
                                                             [0.02])])
    (link, link_label), (measured, label) = ceilings(result)
    assert link == 64.0 and "PCIe 5.0 x16" in link_label
    assert measured == pytest.approx((1 << 30) / 0.02 / 1e9) and "cudaMemcpyAsync pinned" in label


def test_a_bad_size_is_shown_in_the_panel():
    panel = CopyTimingPanel(sizes="4Q")
    panel.run()
    assert "Bad size" in panel.error_html.value and panel.state.result is None


def test_an_unknown_direction_names_the_valid_ones():
    with pytest.raises(ValueError, match="Valid: h2d, d2h, both, all"):
        TimingState(direction="up").choices()


def test_the_plot_is_a_png_whatever_the_matplotlib_backend(ran):
    assert to_png(bandwidth_figure(ran.state.result)).startswith(b"\x89PNG")
