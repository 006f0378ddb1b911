"""Widget tests run on the simulated accelerator (the widgets pick the backend through DEVCOPY_BACKEND). Without
the lab extra (ipywidgets, anywidget: a CUDA machine may lack them) the folder is not collected, and the run's header
says why (`make gpu-wheels` carries the extra to the CUDA machine, so `make gpu-check` runs them all)."""

import importlib.util

import pytest

MISSING = [name for name in ("ipywidgets", "anywidget", "traitlets") if importlib.util.find_spec(name) is None]


def pytest_report_header(config):
    if MISSING:
        return (
            f"tests/widgets not collected: needs the lab extra ({', '.join(MISSING)} missing): pip install -e '.[lab]'"
        )
    return None


def pytest_ignore_collect(collection_path, config):
    return True if MISSING and collection_path.name.startswith("test_") else None


@pytest.fixture(autouse=True)
def simulated_backend(monkeypatch):
    monkeypatch.setenv("DEVCOPY_BACKEND", "simulated")
