"""The notebooks under pytest: nbval checks notebooks/*.ipynb on the simulated backend with CI-sized cells.

Kept here rather than in addopts so `pytest -p no:nbval tests` (make test-fast) still parses its options. The
notebook environment and nbval's sanitizer live in tools/notebooks/ (the notebooks folder holds notebooks only).
"""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent / "tools" / "notebooks"
NOTEBOOK_ENV = runpy.run_path(str(TOOLS / "nbenv.py"))["NOTEBOOK_ENV"]
# The kernel nbval starts inherits NOTEBOOK_ENV; it is set only while a notebook's cells run.


def pytest_configure(config):
    option = config.option
    if not config.pluginmanager.has_plugin("nbval"):
        return
    if not option.nbval_lax:
        option.nbval = True
    option.nbval_current_env = option.nbval_kernel_name is None
    option.nbval_sanitize_with = option.nbval_sanitize_with or str(TOOLS / "sanitize.cfg")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if item.path.suffix != ".ipynb":
        yield
        return
    saved = {key: os.environ.get(key) for key in NOTEBOOK_ENV}
    os.environ.update(NOTEBOOK_ENV)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
