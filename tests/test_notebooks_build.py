"""The committed notebooks are exactly what tools/notebooks/build.py makes of notebooks/src: the builder writes them
(cells, ids, metadata, scrubbed outputs) into a temporary folder and they must equal the committed files in all but
what running the cells produces (outputs and execution counts, which nbval checks against a fresh run, and the
kernel's language_info). Notebook sources import public names only (docs/design.md §6)."""

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

# the lab extra's package (absent on the CUDA machine, which runs `pytest -m gpu` without Jupyter packages)
nbformat = pytest.importorskip("nbformat", reason="needs the lab extra (nbformat); the CUDA machine has no Jupyter")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TOOLS = ROOT / "tools" / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# what a notebook may import: the public names and modules of docs/design.md §6
PUBLIC_MODULES = {
    "devcopy_lib",
    "devcopy_lib.names",
    "devcopy_lib.models",
    "devcopy_lib.reference",
    "devcopy_lib.compare",
    *(
        f"devcopy_lib.bench.{m}"
        for m in ("harness", "clocks", "measurement", "sweep", "sizes", "plots", "targets", "cost_model")
    ),
    "devcopy_widgets",
}


def _builder():
    sys.path.insert(0, str(TOOLS))  # build.py imports its sibling nbenv
    try:
        spec = importlib.util.spec_from_file_location("notebook_build", TOOLS / "build.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(TOOLS))
    return module


BUILD = _builder()


def _without_run_products(nb):
    """The notebook less what executing it produces: outputs, execution counts, the kernel's language details."""
    nb = nbformat.from_dict(nb)
    nb.metadata["language_info"] = {"name": nb.metadata.get("language_info", {}).get("name")}
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def test_every_source_has_its_notebook_and_no_notebook_lacks_a_source():
    assert BUILD.names() == sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("name", BUILD.names())
def test_the_committed_notebook_is_the_build_of_its_source(name, tmp_path):
    built = nbformat.read(BUILD.build(name, tmp_path, execute=False), as_version=4)
    committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert _without_run_products(committed) == _without_run_products(built), (
        f"notebooks/{name}.ipynb is not the build of notebooks/src/{name}.py: "
        f"run .venv/bin/python tools/notebooks/build.py {name}"
    )


@pytest.mark.parametrize("name", BUILD.names())
def test_the_committed_outputs_are_scrubbed_as_the_builder_scrubs(name):
    """What the builder's scrub leaves: no widget views or widget state, one output per run of a stream, cells
    executed in order."""
    committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert "widgets" not in committed.metadata
    code = [cell for cell in committed.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1))
    for cell in code:
        assert not any(WIDGET_VIEW in output.get("data", {}) for output in cell.outputs)
        assert BUILD.coalesced([nbformat.from_dict(o) for o in cell.outputs]) == cell.outputs


def _imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("name", BUILD.names())
def test_a_notebook_imports_public_names_only(name):
    ours = {
        module
        for module in _imports((NOTEBOOKS / "src" / f"{name}.py").read_text())
        if module.split(".")[0] in ("devcopy_lib", "devcopy_widgets")
    }
    assert ours <= PUBLIC_MODULES, f"{name} imports non-public modules {sorted(ours - PUBLIC_MODULES)}"


@pytest.mark.parametrize("name", BUILD.names())
def test_names_taken_from_the_packages_are_in_their_all(name):
    import devcopy_widgets

    import devcopy_lib

    public = {"devcopy_lib": set(devcopy_lib.__all__), "devcopy_widgets": set(devcopy_widgets.__all__)}
    for node in ast.walk(ast.parse((NOTEBOOKS / "src" / f"{name}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module in public:
            names = {alias.name for alias in node.names}
            assert names <= public[node.module], f"{name}: {sorted(names - public[node.module])} not public"
