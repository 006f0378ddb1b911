"""Widget tests run on the simulated accelerator (the widgets pick the backend through DEVCOPY_BACKEND)."""

import pytest


@pytest.fixture(autouse=True)
def simulated_backend(monkeypatch):
    monkeypatch.setenv("DEVCOPY_BACKEND", "simulated")
