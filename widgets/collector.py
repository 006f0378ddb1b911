"""Python's cyclic garbage collector paused while the explorer computes a view.

A new delegate set of a big model builds hundreds of thousands of short-lived objects (graph copies, rows). With
the collector running, those alive at a young collection are promoted, and every few edits the promotions trip a
full collection over everything the kernel holds: 0.6-1.4 s on a 96-layer GPT-2. Paused, the short-lived objects
die by reference count before any collection sees them; what the edit keeps is collected as usual afterwards, and
so is any cycle it left behind. docs/explorer.md gives the figures.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0  # sections paused now, over all threads
_was_enabled = False  # the collector's state when the first of them began


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block. Nested and concurrent blocks share one pause: the last to end puts
    the collector back as the first found it, so a collector the user turned off stays off."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
