"""What the tests of the benchmarks share: a benchmark loaded from its file (to run it, or to render its page), and
for a page rendered from committed data, that data and the page."""

import importlib.util
import json
import pathlib
from types import ModuleType
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]


def benchmark_module(name: str) -> ModuleType:
    """benchmarks/NAME.py as a module (benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def committed_data(name: str) -> Any:
    """docs/data/NAME.json as committed."""
    return json.loads((ROOT / "docs" / "data" / f"{name}.json").read_text())


def page(name: str) -> str:
    """docs/NAME.md as committed."""
    return (ROOT / "docs" / f"{name}.md").read_text()
