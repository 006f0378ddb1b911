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


def test_no_module_shadows_a_public_name():
    """A submodule named like a public name (a folder `emit/` beside the function `emit`) replaces the name on the
    package once anything imports it: after importing every module, each export is still what it names."""
    import pkgutil
    import types

    package = pathlib.Path(devcopy_lib.__file__).parent
    modules = {m.name for m in pkgutil.walk_packages([str(package)], "devcopy_lib.")}
    clashes = sorted(name for name in devcopy_lib._EXPORTS if f"devcopy_lib.{name}" in modules)
    assert clashes == [], "rename the module: it would replace the public name on devcopy_lib"
    code = (
        "import importlib, types, devcopy_lib; "
        f"[importlib.import_module(m) for m in {sorted(m for m in modules if not m.endswith('__main__'))!r}]; "
        "print(sorted(n for n in devcopy_lib._EXPORTS if isinstance(getattr(devcopy_lib, n), types.ModuleType)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert isinstance(devcopy_lib, types.ModuleType)
