"""`import devcopy_lib` is light: no ipywidgets, no matplotlib, no CuPy needed; the contract names resolve."""

import importlib
import pathlib
import re
import subprocess
import sys

import devcopy_lib


def test_import_pulls_no_widgets_or_plotting():
    code = (
        "import sys, devcopy_lib, devcopy_lib.devices; "
        "print(sorted(m for m in ('ipywidgets','matplotlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_unknown_attribute_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        devcopy_lib.nope  # noqa: B018


def test_every_contract_name_resolves_without_cupy_or_gpu():
    missing = []
    for name in devcopy_lib.__all__:
        try:
            getattr(devcopy_lib, name)
        except (ImportError, AttributeError) as exc:
            missing.append(f"{name}: {exc}")
    assert missing == []


def test_every_public_module_of_the_design_doc_imports_by_its_name():
    """docs/design.md §6 names each public module by a path `import` accepts; `reference` is an attribute alias."""
    design = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "design.md").read_text()
    bullet = design[design.index("- Public modules") : design.index("- Signatures")]
    modules = re.findall(r"`(devcopy_lib(?:\.\w+)+)`", bullet)
    assert len(modules) >= 9, modules
    for name in modules:
        assert importlib.import_module(name).__name__ == name
    assert devcopy_lib.reference is importlib.import_module("devcopy_lib.pte.executorch_reference")
