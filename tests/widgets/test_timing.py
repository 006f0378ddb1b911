"""CopyTimingPanel: controls edit the state; Run sweeps size by size on a worker thread with progress, Stop, a plot
and the size x method GB/s matrix; the backend's impossible options are not offered, and say why."""

import re
import threading

import pytest
from devcopy_widgets import CopyTimingPanel, TimingState, timing_state

from devcopy_lib.bench import sweep as sweep_module
from devcopy_lib.bench.plots import ceilings, gbps_matrix, is_baseline, plot_bandwidth, to_png


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
        "4K,1M",
        "d2h",
        "pageable",
        False,
    )
    assert panel.state.size_list() == [4096, 1 << 20]
    assert panel.sizes.continuous_update is False


def test_run_reports_progress_per_size_and_fills_the_matrix(ran):
    assert ran.error is None
    assert (ran.progress.value, ran.progress.max) == (3, 3)
    assert {m.nbytes for m in ran.state.result.measurements} == {4, 16, 64}
    assert {m.direction for m in ran.state.result.measurements} == {"h2d"}
    columns, rows = ran.state.matrix()
    assert [row["size"] for row in rows] == ["4 B", "16 B", "64 B"]
    assert columns[0] == "size" and "devcopy allocator h2d pageable" in columns[1]
    assert "devcopy allocator" in ran.table.value and not ran.run_button.disabled
    assert "done: " in ran.status.value and "4 B..64 B" in ran.status.value


def test_the_state_runs_the_library_sweep_and_shows_each_size_once_it_is_whole(monkeypatch):
    calls, seen = [], []
    real = sweep_module.run_plan

    def recording(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(timing_state, "run_plan", recording)
    state = TimingState(sizes="4,16", direction="h2d")
    state.run(
        progress=lambda done, total, label: seen.append((done, total, label)),
        on_size=lambda result: seen.append(sorted({m.nbytes for m in result.measurements})),
    )
    assert len(calls) == 1 and calls[0]["close"] is False  # one loop, the library's; the bench stays for the next run
    assert seen == [(1, 2, "4 B"), [4], (2, 2, "16 B"), [4, 16]]
    per_size = len(state.result.measurements) // 2
    assert [m.nbytes for m in state.result.measurements] == [4] * per_size + [16] * per_size
    state.close()


def test_the_simulated_backend_offers_only_what_it_can_time_and_says_why():
    panel = CopyTimingPanel()
    assert "both" not in panel.direction.options and panel.memory.options == ("pageable",)
    assert "pinned and both need CUDA" in panel.limits.value
    with pytest.raises(ValueError, match="Nothing to time for direction 'all' and host memory 'pinned'.*need CUDA"):
        TimingState(memory="pinned", sizes="4K").run()


def test_one_bench_and_allocator_per_backend_across_sizes_and_runs(monkeypatch):
    made = []
    real = sweep_module.make_allocator
    monkeypatch.setattr(sweep_module, "make_allocator", lambda *a: made.append(a) or real(*a))
    state = TimingState(sizes="4,16,64", direction="h2d")
    state.run()
    state.run()
    assert len(made) == 1 and len(state.result.measurements) == 6
    allocator = state.bench().alloc
    state.close()
    assert allocator.closed and state.bench().alloc is not allocator


def test_closing_the_panel_closes_its_allocator():
    panel = CopyTimingPanel(sizes="4")
    panel.run()
    allocator = panel.state.bench().alloc
    panel.close()
    assert allocator.closed


def test_run_happens_on_a_worker_thread_and_stop_keeps_what_was_measured():
    panel = CopyTimingPanel(sizes="4..64M", quick=False)
    first_size = threading.Event()
    shown = panel._progress
    panel._progress = lambda *args: (shown(*args), first_size.set())
    worker = panel.start()
    assert worker is not threading.current_thread()
    assert first_size.wait(60) and panel.busy
    assert "devcopy-busy" in panel._dom_classes and panel.run_button.disabled and not panel.stop_button.disabled
    panel.stop()
    worker.join(60)
    assert not panel.busy and "devcopy-busy" not in panel._dom_classes and not panel.run_button.disabled
    assert "stopped: " in panel.status.value and panel.error is None
    measured = {m.nbytes for m in panel.state.result.measurements}
    assert 4 in measured and (64 << 20) not in measured and len(panel.state.result.measurements) > 0
    assert panel.table.value.count("<tr>") == len(measured) + 1


def test_the_plot_has_iqr_bars_binary_ticks_and_a_legend_outside_naming_the_ceiling(ran):
    fig = plot_bandwidth(ran.state.result)
    ax = fig.axes[0]
    assert ax.get_legend() is None and len(fig.legends) == 1
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "devcopy allocator" in names and any("peak" in n for n in names)
    assert any(c.has_yerr for c in ax.containers)
    ticks = [label.get_text() for label in ax.get_xticklabels()]
    assert ticks == ["4 B", "16 B", "64 B"]
    assert ax.get_yaxis().get_label().get_text().startswith("GB/s")


def test_baselines_are_the_methods_that_are_not_devcopy(ran):
    methods = {m.method for m in ran.state.result.measurements}
    assert {m for m in methods if is_baseline(m)} == methods - {m for m in methods if m.startswith("devcopy")}
    assert ceilings(ran.state.result, 12.5) == [(12.5, "ceiling 12.5 GB/s")]


def test_on_cuda_the_ceilings_are_the_link_and_the_measured_cudaMemcpyAsync_peak():
    from devcopy_lib.bench.harness import SweepResult
    from devcopy_lib.bench.measurement import Measurement

    result = SweepResult(
        "cupy",
        "NVIDIA H200",
        [Measurement("cudaMemcpyAsync", "h2d", "pinned", 1 << 30, "wall", [0.02])],
        {"simulated": False},
    )
    (link, link_label), (measured, label) = ceilings(result)
    assert link == 64.0 and "PCIe 5.0 x16" in link_label
    assert measured == pytest.approx((1 << 30) / 0.02 / 1e9) and "cudaMemcpyAsync pinned" in label


def test_the_matrix_is_sorted_by_size_with_devcopy_first():
    from devcopy_lib.bench.harness import SweepResult
    from devcopy_lib.bench.measurement import Measurement

    result = SweepResult(
        "cupy",
        "H200",
        [
            Measurement(method, "h2d", "pinned", n, "wall", [n / 1e10])
            for n in (1 << 20, 4096)
            for method in ("cupy", "devcopy engine")
        ],
    )
    columns, rows = gbps_matrix(result)
    assert columns == ["size", "devcopy engine h2d pinned", "cupy h2d pinned"]
    assert rows == [
        {"size": "4 KiB", "devcopy engine h2d pinned": "10.00", "cupy h2d pinned": "10.00"},
        {"size": "1 MiB", "devcopy engine h2d pinned": "10.00", "cupy h2d pinned": "10.00"},
    ]


def test_a_bad_size_is_shown_in_the_panel_beside_the_last_good_table():
    panel = CopyTimingPanel(sizes="4Q")
    panel.run()
    assert "Bad size" in panel.error_html.value and panel.state.result is None
    assert not panel.run_button.disabled and "devcopy-busy" not in panel._dom_classes
    panel.sizes.value = "4,16"
    panel.run()
    good = panel.table.value
    panel.sizes.value = "16..4"
    panel.run()
    assert "Bad size range" in panel.error_html.value and panel.table.value == good and "16 B" in good


def test_an_unknown_direction_names_the_valid_ones():
    with pytest.raises(ValueError, match="Valid: h2d, d2h, both, all"):
        TimingState(direction="up").choices()


def test_the_plot_is_a_png_whatever_the_matplotlib_backend(ran):
    assert to_png(plot_bandwidth(ran.state.result)).startswith(b"\x89PNG")
    assert re.match(r"iVBOR", ran.plot.outputs[0]["data"]["image/png"])


@pytest.mark.gpu
def test_on_cuda_pinned_memory_and_both_are_offered_and_one_bench_serves_every_run(monkeypatch):
    monkeypatch.setenv("DEVCOPY_BACKEND", "cupy")
    panel = CopyTimingPanel(sizes="4K,1M", direction="both", memory="pinned")
    assert "both" in panel.direction.options and "pinned" in panel.memory.options and panel.limits.value == ""
    bench = panel.state.bench()
    panel.run()
    panel.run()
    assert panel.error is None and panel.state.bench() is bench
    assert {(m.direction, m.memory) for m in panel.state.result.measurements} == {("both", "pinned")}
    fig = plot_bandwidth(panel.state.result)
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("PCIe 5.0 x16" in n for n in names)


def test_a_bad_size_after_a_run_never_says_running_and_names_the_table_as_the_last_runs():
    panel = CopyTimingPanel(sizes="4,16", direction="h2d")
    panel.run()
    good = panel.table.value
    panel.sizes.value = "4K..1X"
    panel.run()
    assert "Bad size &#x27;1X&#x27;" in panel.error_html.value and "running" not in panel.status.value
    assert "not run" in panel.status.value and "last run (4 B..16 B)" in panel.status.value
    assert panel.table.value == good and not panel.run_button.disabled


def test_during_a_run_error_box_and_table_belong_to_that_run():
    panel = CopyTimingPanel(sizes="4,16", direction="h2d")
    panel.run()
    panel.sizes.value = "4K..1X"
    panel.run()
    assert panel.error is not None
    seen = []
    show = panel._show_size
    panel._show_size = lambda result: (show(result), seen.append((panel.error_html.value, panel.table.value)))
    panel.sizes.value = "256,1024"
    panel.run()
    error_box, table = seen[0]
    assert error_box == "" and "256 B" in table and "16 B" not in table and "1 KiB" not in table
    assert panel.error is None and "done: " in panel.status.value


def test_a_second_sweep_on_one_state_is_refused_while_the_first_runs():
    state = TimingState(sizes="4,16", direction="h2d")
    inside, release = threading.Event(), threading.Event()
    first = threading.Thread(target=state.run, kwargs={"on_size": lambda result: (inside.set(), release.wait(30))})
    first.start()
    try:
        assert inside.wait(30) and state.running
        with pytest.raises(timing_state.SweepBusy, match="already running on this timing panel.*Wait for it") as info:
            state.run()
        assert info.value.kind == "usage"
    finally:
        release.set()
        first.join(60)
    assert not state.running and {m.nbytes for m in state.result.measurements} == {4, 16}
    state.run()  # the next one runs
    state.close()


def test_the_panel_refuses_a_second_sweep_without_touching_the_running_ones_view():
    panel = CopyTimingPanel(sizes="4..64M", quick=False)
    first_size = threading.Event()
    shown = panel._progress
    panel._progress = lambda *args: (shown(*args), first_size.set())
    worker = panel.start()
    try:
        assert first_size.wait(60)
        status = panel.status.value
        panel.run()
        assert "already running" in panel.error_html.value and panel.status.value == status and panel.busy
    finally:
        panel.stop()
        worker.join(60)
    assert "stopped: " in panel.status.value


def test_the_panel_and_the_plot_say_timings_are_noisy(ran):
    notes = ran.notes.value
    assert "noisy" in notes and "interquartile range (IQR)" in notes
    title = plot_bandwidth(ran.state.result)._suptitle.get_text()
    assert "IQR" in title and "noisy" in title


def test_small_copies_are_explained_as_latency_bound_with_the_numbers():
    from devcopy_lib.bench.harness import SweepResult
    from devcopy_lib.bench.measurement import Measurement
    from devcopy_lib.bench.plots import reading_notes

    result = SweepResult(
        "simulated",
        "host",
        [
            Measurement("devcopy allocator", "h2d", "pageable", 4096, "wall", [4e-6] * 5),
            Measurement("numpy copyto", "h2d", "pageable", 4096, "wall", [0.5e-6] * 5),
            Measurement("devcopy allocator", "h2d", "pageable", 1 << 20, "wall", [40e-6, 41e-6, 90e-6, 39e-6]),
        ],
    )
    notes = reading_notes(result)
    assert notes[-1].startswith(
        "Small copies are latency-bound: at 4 KiB one copy through devcopy allocator takes 4.0 us against 0.5 us for "
        "numpy copyto, so its GB/s is lower (1.02 against 8.19)."
    )
    assert any("1 of 3 measurements spread" in n for n in notes)  # the 1 MiB samples are far apart
    fast = SweepResult("simulated", "host", [Measurement("devcopy allocator", "h2d", "pageable", 4096, "wall", [1e-7])])
    assert not any("latency-bound" in n for n in reading_notes(fast))
