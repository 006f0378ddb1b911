"""Fixtures for the browser test: Debian's Chromium (installed on demand), a JupyterLab server, a headless page."""

from __future__ import annotations

import runpy
import shutil
import subprocess
from pathlib import Path

import pytest
from lab_server import CHROMIUM, LabServer, open_browser  # tests/ has no packages: pytest puts this folder on sys.path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
NOTEBOOK_ENV = runpy.run_path(str(ROOT / "tools" / "notebooks" / "nbenv.py"))["NOTEBOOK_ENV"]


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's Chromium, installed by `make browser-deps` when absent; skips only if that install fails."""
    if not CHROMIUM.exists() and shutil.which("make"):
        subprocess.run(["make", "-s", "browser-deps"], cwd=ROOT, timeout=600, check=False)
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent and `make browser-deps` (apt-get install chromium) could not install it")
    return CHROMIUM


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A JupyterLab server over a copy of notebooks/, its kernels on the simulated backend with CI-sized cells."""
    server = LabServer(ROOT / "notebooks", tmp_path_factory.mktemp("lab"), env=NOTEBOOK_ENV)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def page(chromium, lab, tmp_path):
    """A page of headless Chromium with a fresh profile; browser and Playwright closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = open_browser(playwright, tmp_path / "profile")
        try:
            context.set_default_timeout(60_000)
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()
