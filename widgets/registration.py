"""RegistrationPanel: portable or ATen mode, which libs are linked, the op-by-lib matrix, and Load."""

from __future__ import annotations

from typing import Any

import ipywidgets as w

from devcopy_lib import MissingOperatorError
from devcopy_lib.names import LIB_NAMES, MODES

from . import html
from .guard import shown_errors
from .registration_state import RegistrationState, RunResult


class RegistrationPanel(w.VBox):
    """The view over a `RegistrationState`; Load shows the outputs, or the Missing operator error and its fix."""

    def __init__(self, state: RegistrationState | None = None, **settings: Any) -> None:
        self.state = state or RegistrationState(**settings)
        self.error: Exception | None = None
        self.result: RunResult | None = None
        self._syncing = False  # True while _show_libs sets the boxes: their events are not user edits
        self.model = w.Dropdown(
            options=self.state.placement.model_names, value=self.state.placement.model, description="model"
        )
        self.mode = w.ToggleButtons(options=MODES, value=self.state.mode)
        self.pte_path = w.Text(  # an ExecuTorch program instead of the model (empty: the model)
            value=self.state.pte or "",
            placeholder="path/to/program.pte",
            description=".pte",
            continuous_update=False,
        )
        self.lib_boxes = {
            name: w.Checkbox(description=name, indent=False, layout=w.Layout(width="auto")) for name in LIB_NAMES
        }
        self.load = w.Button(description="Load", button_style="primary", icon="play")
        self.matrix, self.advice, self.outcome, self.error_html = w.HTML(), w.HTML(), w.HTML(), w.HTML()
        for name, box in self.lib_boxes.items():
            box.add_class(f"devcopy-lib-{name}")
        for widget, name in (
            (self.mode, "devcopy-mode"),
            (self.pte_path, "devcopy-pte-path"),
            (self.load, "devcopy-load"),
            (self.outcome, "devcopy-outcome"),
            (self.advice, "devcopy-advice"),
        ):
            widget.add_class(name)
        self.libs_row = w.HBox()
        wrap = w.Layout(**html.WRAP)
        super().__init__(
            [
                w.HBox([self.model, self.pte_path, self.mode], layout=wrap),
                w.HBox([w.HTML("<b>linked libs:</b>&nbsp;"), self.libs_row], layout=wrap),
                self.matrix,
                self.advice,
                self.load,
                self.error_html,
                self.outcome,
            ]
        )
        self.add_class("devcopy-registration")
        self._show_libs()
        self._wire()
        self.refresh()

    def _wire(self) -> None:
        """The one place controls are connected."""
        for widget in (self.model, self.pte_path, self.mode, *self.lib_boxes.values()):
            widget.observe(self._changed, names="value")
        self.load.on_click(lambda _: self.run())

    def _show_libs(self) -> None:
        """Show the mode's libs, ticked when linked."""
        linked = set(self.state.linked())
        self._syncing = True
        try:
            for name, box in self.lib_boxes.items():
                box.value = name in linked
        finally:
            self._syncing = False
        self.libs_row.children = [self.lib_boxes[name] for name in self.state.libs_of(self.state.mode)]

    def _changed(self, change: Any) -> None:
        owner = change["owner"]
        if self._syncing:
            return
        placement = self.state.placement
        shown = (placement.model, placement.delegate_ops)  # the matrix on screen is this model's
        if owner is self.mode:
            self.state.switch_mode(self.mode.value)
            self._show_libs()
        elif owner is self.model:
            placement.model, placement.delegate_ops = self.model.value, None
        elif owner is self.pte_path:
            self.state.pte = self.pte_path.value.strip() or None
        else:
            self.state.libs = tuple(n for n in self.state.libs_of(self.state.mode) if self.lib_boxes[n].value)
        self.outcome.value = ""
        self.refresh()
        if self.error is not None and owner is self.model:  # refused: dropdown and matrix stay on the shown model
            placement.model, placement.delegate_ops = shown
            self._syncing = True
            try:
                self.model.value = shown[0]
            finally:
                self._syncing = False

    @shown_errors
    def refresh(self) -> None:
        """Redraw the op-by-lib matrix of the program's operators and what to tick for the missing ones."""
        self.model.disabled = self.state.pte is not None
        self.matrix.value = html.table(self.state.matrix(), ("op", *LIB_NAMES, "resolved by"))
        advice = self.state.advice()
        self.advice.value = html.note(f"To load: {advice}", "devcopy-advice-text") if advice else ""

    @shown_errors
    def run(self) -> None:
        """Load and run; a missing operator is shown with its fix (not raised)."""
        self.result = None
        self.outcome.value = html.note("loading ...")
        try:
            self.result = self.state.load_and_run()
        except MissingOperatorError as exc:  # the runtime's own words, then what to tick in this panel
            advice = self.state.advice()
            self.outcome.value = html.error_box(exc) + (html.note(f"In this panel: {advice}") if advice else "")
            return
        except Exception:
            self.outcome.value = ""
            raise
        self.outcome.value = html.note(self.result.summary(), "devcopy-run-ok") + "".join(
            html.pre(repr(o)) for o in self.result.outputs
        )
