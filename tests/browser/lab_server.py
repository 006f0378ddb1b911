"""A throwaway JupyterLab server on 127.0.0.1 (free port, token auth, temporary HOME and Jupyter dirs) and the
headless Chromium that looks at it: shared by the browser test and benchmarks/explorer_browser.py."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
# Flags that work on machines with a closed network (no background fetches, no sandbox as root).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1600, "height": 1000}


def open_browser(playwright, profile: Path):
    """Headless Chromium with a fresh profile in `profile`, at one fixed desktop size (`VIEWPORT`), so layouts and
    screenshots compare from run to run."""
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT
    )


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """Starts `jupyter lab` serving copies of the notebooks in `notebooks` (autosave never touches the repo)."""

    def __init__(self, notebooks: Path, workdir: Path, env: dict[str, str] | None = None):
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.root = workdir / "notebooks"
        self.root.mkdir()
        for notebook in notebooks.glob("*.ipynb"):
            shutil.copy(notebook, self.root)
        home = workdir / "home"
        quiet = home / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        quiet.parent.mkdir(parents=True)
        quiet.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))  # no news toast
        self.env = {
            **os.environ,
            **(env or {}),
            "HOME": str(home),
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
        }
        self.log_path = workdir / "jupyterlab.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The `jupyter lab` command line: loopback only, token auth, no browser, no update checks."""
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.open_browser=False",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--LabApp.expose_app_in_browser=True",
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        return cmd

    def start(self, timeout: float = 90) -> None:
        """Start the server and wait until /api/status answers with the token, or raise with the log's tail."""
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            self.command(), env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"JupyterLab did not serve {self.url} within {timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout: float = 15) -> None:
        """Terminate the server (and the kernels it started), killing it if it does not exit in time."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
