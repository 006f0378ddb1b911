"""DESIGN.md's layers: dependencies point down, never up: devices < {ops, kernels, runtime} < passes; bench uses devices.

ops, kernels and runtime form one layer (the kernels take runtime types; the runtime's libs register the kernels)."""
import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "devcopy_lib"
TOP = {"bench", "cli", "models", "load"}
CORE = {"ops", "kernels", "runtime"}
FORBIDDEN = {
    "devices": CORE | {"passes"} | TOP,
    **{layer: {"passes"} | TOP for layer in CORE},
    "passes": TOP - {"models"},
    "bench": CORE | {"passes"} | TOP - {"bench"},
}


def _imported_layers(path: pathlib.Path) -> set[str]:
    layers = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level >= 2 and node.module:  # from ..runtime.x import y
                layers.add(node.module.split(".")[0])
            elif node.level == 0 and node.module and node.module.startswith("devcopy_lib."):
                layers.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            layers |= {a.name.split(".")[1] for a in node.names if a.name.startswith("devcopy_lib.")}
    return layers


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_nothing_above_it(layer):
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(_imported_layers(path) & FORBIDDEN[layer])
        for path in (PACKAGE / layer).glob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_library_never_imports_widgets():
    hits = [str(p) for p in PACKAGE.rglob("*.py") if "devcopy_widgets" in p.read_text()]
    assert hits == []
