"""A widget's JS bundle served with a page and a state file to headless Chromium, with a stand-in for the anywidget
model: the browser half of a widget tested without JupyterLab (tests/browser runs the real one)."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def bundle_page(root: Path, script: Path, page: str, state: dict) -> Iterator:
    """The Playwright tab of `page` served from `root` beside `script` and `state.json`, once `window.ready`."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent (make browser-deps installs it)")
    from playwright.sync_api import sync_playwright

    shutil.copy(script, root / script.name)
    (root / "index.html").write_text(page)
    (root / "state.json").write_text(json.dumps(state))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            tab = browser.new_page()
            tab.goto(f"http://127.0.0.1:{server.server_address[1]}/index.html")
            tab.wait_for_function("window.ready === true")
            yield tab
            browser.close()
    finally:
        server.shutdown()
