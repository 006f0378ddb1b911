"""`import devcopy_lib` is light: no ipywidgets, no matplotlib, no CuPy needed; the contract names resolve."""

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
