"""Callbacks that never raise into the notebook: errors are shown inside the widget's own output."""

from __future__ import annotations

import functools

from .html import error_box


def shown_errors(method):
    """Wrap a view method: an exception is kept on `self.error` and drawn into `self.error_html`, not raised."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            result = method(self, *args, **kwargs)
        except Exception as exc:  # shown in the widget: the notebook keeps working
            self.error = exc
            self.error_html.value = error_box(exc)
            return None
        self.error = None
        self.error_html.value = ""
        return result

    return wrapper
