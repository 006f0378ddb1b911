"""CopyTimingPanel: size range, direction, host memory kind, Run / Stop with progress, a live plot and the size x
method GB/s matrix, and notes on reading them (noise, IQR bars, why small copies are latency-bound). The sweep runs on
a worker thread, so the kernel (and every other widget) stays live."""

from __future__ import annotations

import base64
import threading
from typing import Any

import ipywidgets as w

from devcopy_lib.bench.plots import plot_bandwidth, to_png
from devcopy_lib.bench.sizes import format_bytes

from . import html
from .guard import shown_errors
from .timing_state import SweepBusy, SweepStopped, TimingState


class CopyTimingPanel(w.VBox):
    """The view over a `TimingState`; plot and matrix redraw after every size, the notes when the sweep ends.

    Run (`start()`) sweeps on a worker thread; `run()` sweeps on the caller's thread (scripts, tests)."""

    def __init__(self, state: TimingState | None = None, ceiling_gbps: float | None = None, **settings: Any) -> None:
        self.state = state or TimingState(**settings)
        self.ceiling_gbps = ceiling_gbps
        self.error: Exception | None = None
        self._worker: threading.Thread | None = None
        self._stop = threading.Event()
        s = self.state
        directions, memories, limits = s.offered()
        s.direction = s.direction if s.direction in directions else directions[-1]
        s.memory = s.memory if s.memory in memories else memories[-1]
        self.sizes = w.Text(
            value=s.sizes, description="sizes", placeholder="4K..64M or 4K,1M,64M", continuous_update=False
        )
        self.direction = w.Dropdown(options=directions, value=s.direction, description="direction")
        self.memory = w.Dropdown(options=memories, value=s.memory, description="host memory")
        self.limits = w.HTML(html.note(f"not offered here: {limits}", "devcopy-limits") if limits else "")
        self.quick = w.Checkbox(value=s.quick, description="quick (few samples)")
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.stop_button = w.Button(description="Stop", icon="stop", disabled=True)
        self.progress = w.IntProgress(value=0, min=0, max=1, description="sizes")
        self.status, self.table, self.error_html, self.notes = w.HTML(), w.HTML(), w.HTML(), w.HTML()
        self.plot = w.Output()
        self.run_button.add_class("devcopy-run")
        self.stop_button.add_class("devcopy-stop")
        wrap = w.Layout(**html.WRAP)
        super().__init__(
            [
                w.HBox([self.sizes, self.direction, self.memory], layout=wrap),
                self.limits,
                w.HBox([self.quick, self.run_button, self.stop_button, self.progress, self.status], layout=wrap),
                self.error_html,
                self.plot,
                self.notes,
                self.table,
            ]
        )
        self.add_class("devcopy-timing")
        self._wire()

    def _wire(self) -> None:
        """The one place controls are connected."""
        for widget in (self.sizes, self.direction, self.memory, self.quick):
            widget.observe(self._changed, names="value")
        self.run_button.on_click(lambda _: self.start())
        self.stop_button.on_click(lambda _: self.stop())

    def _changed(self, change: Any) -> None:
        s = self.state
        s.sizes, s.direction, s.memory = self.sizes.value, self.direction.value, self.memory.value
        s.quick = self.quick.value

    @property
    def busy(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def start(self) -> threading.Thread:
        """Sweep on a worker thread (the Run button); the panel shows busy until it ends or Stop is pressed."""
        if self._worker is not None and self._worker.is_alive():  # busy
            return self._worker
        worker = threading.Thread(target=self.run, name="devcopy-timing-sweep", daemon=True)
        self._worker = worker
        worker.start()
        return worker

    def close(self) -> None:
        """Stop a running sweep, close the allocators the panel made, then close the widget."""
        self.stop()
        if self._worker is not None:
            self._worker.join()
        self.state.close()
        super().close()

    def stop(self) -> None:
        """Ask the sweep to stop after the case being timed (the Stop button)."""
        self._stop.set()
        self.status.value = html.note("stopping after the current copy ...")

    def _progress(self, done: int, total: int, label: str) -> None:
        self.progress.max, self.progress.value = total, done
        self.status.value = html.note(f"{done}/{total} sizes, last {label}")

    def _draw(self, result: Any) -> None:
        """Replace the plot; setting the Output's outputs directly is safe from the worker thread."""
        png = base64.b64encode(to_png(plot_bandwidth(result, ceiling_gbps=self.ceiling_gbps))).decode()
        self.plot.outputs = (
            {"output_type": "display_data", "data": {"image/png": png, "text/plain": "plot"}, "metadata": {}},
        )

    def _busy(self, busy: bool) -> None:
        self.run_button.disabled, self.stop_button.disabled = busy, not busy
        for control in (self.sizes, self.direction, self.memory, self.quick):
            control.disabled = busy
        (self.add_class if busy else self.remove_class)("devcopy-busy")

    def _show_size(self, result: Any) -> None:
        """After each size: this run's plot and table so far (never the previous run's rows under a new plot)."""
        self._draw(result)
        columns, rows = self.state.matrix()
        self.table.value = html.table(rows, columns)

    @shown_errors
    def run(self) -> None:
        """Sweep the chosen sizes; status, error box, plot and table then belong to this run. A run refused before it
        starts (bad sizes or choices) says so in the status and leaves the last run's plot and table, named as such;
        a sweep already running is left alone (SweepBusy); Stop keeps the sizes already measured."""
        if self.state.running:
            raise SweepBusy()
        try:
            self.state.check()  # refused here, nothing of the last run is touched
        except ValueError:
            self.status.value = html.note(f"not run: see the error below{self._last_run()}")
            raise
        self._stop.clear()
        self._busy(True)
        self.error_html.value = self.table.value = self.notes.value = ""  # the last run's, not this one's
        self.plot.outputs = ()
        self.status.value = html.note("running ...")
        how = "done"
        try:
            self.state.run(self._progress, self._show_size, self._stop)
        except SweepStopped:
            how = "stopped"
        except Exception:
            self.status.value = html.note("failed: see the error below")
            raise
        finally:
            self._busy(False)
        self._finish(how)

    def _last_run(self) -> str:
        """'; plot and table are of the last run (4 B..64 B)' when one is shown, else ''."""
        result = self.state.result
        sizes = sorted({m.nbytes for m in result.measurements}) if result else []
        return (
            f"; plot and table are of the last run ({format_bytes(sizes[0])}..{format_bytes(sizes[-1])})"
            if sizes
            else ""
        )

    def _finish(self, how: str) -> None:
        """The run's table, its reading notes, then its status ("done" / "stopped" last: whoever waits for it - a
        person, the browser test - sees the table)."""
        result = self.state.result
        assert result is not None, "a sweep finishes with its result"
        columns, rows = self.state.matrix()
        self.table.value = html.table(rows, columns)
        self.notes.value = "".join(html.note(text, "devcopy-timing-note") for text in self.state.notes())
        sizes = sorted({m.nbytes for m in result.measurements}) or self.state.size_list()
        self.status.value = html.note(
            f"{how}: {len(result.measurements)} measurements on {result.backend}, GB/s by size, "
            f"{format_bytes(min(sizes))}..{format_bytes(max(sizes))}"
        )
