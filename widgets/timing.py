"""CopyTimingPanel: size range, direction, host memory kind, Run with progress, a live plot and the result table."""
from __future__ import annotations

import ipywidgets as w
from IPython.display import Image, display

from devcopy_lib.bench.plots import to_png
from devcopy_lib.bench.sizes import format_size

from . import html
from .guard import shown_errors
from .timing_plot import bandwidth_figure
from .timing_state import DIRECTION_CHOICES, MEMORY_CHOICES, TABLE_COLUMNS, TimingState


class CopyTimingPanel(w.VBox):
    """The view over a `TimingState`; the plot redraws after every size, the table when the sweep ends."""

    def __init__(self, state: TimingState | None = None, ceiling_gbps: float | None = None, **settings):
        self.state = state or TimingState(**settings)
        self.ceiling_gbps = ceiling_gbps
        self.error = None
        s = self.state
        self.sizes = w.Text(value=s.sizes, description="sizes", placeholder="4K..64M or 4K,1M,64M")
        self.direction = w.Dropdown(options=DIRECTION_CHOICES, value=s.direction, description="direction")
        self.memory = w.Dropdown(options=MEMORY_CHOICES, value=s.memory, description="host memory")
        self.quick = w.Checkbox(value=s.quick, description="quick (few samples)")
        self.run_button = w.Button(description="Run", button_style="primary", icon="play")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="sizes")
        self.status, self.table, self.error_html = w.HTML(), w.HTML(), w.HTML()
        self.plot = w.Output()
        self.run_button.add_class("devcopy-run")
        super().__init__([w.HBox([self.sizes, self.direction, self.memory]), w.HBox([self.quick, self.run_button,
                          self.progress, self.status]), self.error_html, self.plot, self.table])
        self.add_class("devcopy-timing")
        self._wire()

    def _wire(self) -> None:
        """The one place controls are connected."""
        for widget in (self.sizes, self.direction, self.memory, self.quick):
            widget.observe(self._changed, names="value")
        self.run_button.on_click(lambda _: self.run())

    def _changed(self, change) -> None:
        s = self.state
        s.sizes, s.direction, s.memory = self.sizes.value, self.direction.value, self.memory.value
        s.quick = self.quick.value

    def _progress(self, done: int, total: int, label: str) -> None:
        self.progress.max, self.progress.value = total, done
        self.status.value = html.note(f"{done}/{total} sizes, last {label}")

    def _draw(self, result) -> None:
        self.plot.clear_output(wait=True)
        with self.plot:
            display(Image(to_png(bandwidth_figure(result, self.ceiling_gbps))))

    @shown_errors
    def run(self) -> None:
        """Sweep the chosen sizes (the Run button); errors appear in the panel."""
        self.table.value = ""
        self.run_button.disabled = True
        try:
            result = self.state.run(self._progress, self._draw)
        finally:
            self.run_button.disabled = False
        self.table.value = html.table(self.state.rows(), TABLE_COLUMNS)
        sizes = self.state.size_list()  # "done" last: whoever waits for it (a person, the browser test) sees the table
        self.status.value = html.note(f"done: {len(result.measurements)} measurements on {result.backend}, "
                                      f"{format_size(min(sizes))}..{format_size(max(sizes))}")
