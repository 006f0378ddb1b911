"""ExecuTorch's first import, under one lock: every devcopy function that uses ExecuTorch calls `import_executorch`
before its own `from executorch ...` lines.

ExecuTorch's `exir` package imports its submodules in circles (`exir.passes` <-> `exir.memory` <-> `exir.tensor`,
...). Python's per-module import locks let two threads that start importing such a circle at once each see the
other's half-initialised module: `ImportError: cannot import name 'MemoryPlanningPass' from partially initialized
module 'executorch.exir.passes'` (or a `_DeadlockError`), after which `executorch.exir` stays half-built for the
process. The explorer computes its ExecuTorch comparison off the main thread while a change starts another, so two
first imports do meet. Importing the whole of `executorch.exir` once, under a lock, before any thread reaches a
submodule, leaves nothing half-initialised to see; later calls return at once.
"""

from __future__ import annotations

import importlib
import sys
import threading

EXIR = "executorch.exir"  # the package whose submodules import each other
_lock = threading.Lock()


def import_executorch(*modules: str) -> None:
    """Import `executorch.exir` and then `modules` (e.g. the runtime's pybindings), each once per process and all
    under one lock, so that no thread sees one of them half-initialised; ImportError as `import` raises it."""
    wanted = (EXIR, *modules)
    if all(name in sys.modules and not _initialising(name) for name in wanted):
        return
    with _lock:
        for name in wanted:
            importlib.import_module(name)


def _initialising(name: str) -> bool:
    """Whether `name` is in sys.modules but still running its top level (another thread's import in progress)."""
    spec = getattr(sys.modules.get(name), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))
