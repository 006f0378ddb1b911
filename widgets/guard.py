"""Callbacks that never raise into the notebook: errors are shown inside the widget's own output."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from .html import error_box

P = ParamSpec("P")
R = TypeVar("R")


def shown_errors(method: Callable[Concatenate[Any, P], R]) -> Callable[Concatenate[Any, P], R | None]:
    """Wrap a view method: an exception is kept on `self.error` and drawn into `self.error_html`, not raised."""

    @functools.wraps(method)
    def wrapper(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R | None:
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
