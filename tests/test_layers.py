"""The floors of docs/design.md §3, bottom up: names -> errors -> devices and ops -> tensors -> kernels -> runtime ->
lowering -> placement -> emitter -> pte -> load and memory_lanes -> cli; compare standalone, bench beside (on devices
only), models above lowering; widgets on top, through the public API only. Every import, lazy ones inside functions and
type-checking-only ones included, points down, and no two modules import each other, directly or around a circle."""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "devcopy_lib"
WIDGETS = PACKAGE.parent / "widgets"
# The floors, bottom up: a layer may import every layer on the floors below its own; layers on one floor never
# import each other. Top-level modules (names.py, load.py, ...) are layers of their own.
FLOORS = [
    ("names",),
    ("errors",),
    ("devices", "ops"),
    ("tensors",),
    ("kernels",),
    ("runtime",),
    ("lowering",),
    ("placement",),
    ("emitter",),
    ("pte",),
    ("load", "memory_lanes"),
    ("workflows",),
    ("cli",),
]
# Layers beside the floors: what each may import; only the layers named in USED_BY may import them.
BESIDE = {
    "compare": set(),  # output comparison: standalone (torch only)
    "bench": {"names", "errors", "devices"},  # copy timing and the cost model stand on the devices alone
    # sample models: example forms
    "models": {"names", "errors", "devices", "ops", "tensors", "kernels", "runtime", "lowering"},
}
USED_BY = {"compare": {"workflows", "cli"}, "bench": {"workflows", "cli"}, "models": {"cli"}}


def _allowed() -> dict[str, set[str]]:
    """layer -> the layers it may import (itself always allowed)."""
    allowed: dict[str, set[str]] = {}
    below: set[str] = set()
    for floor in FLOORS:
        for layer in floor:
            allowed[layer] = set(below) | {side for side, users in USED_BY.items() if layer in users}
        below |= set(floor)
    return {**allowed, **{side: set(imports) for side, imports in BESIDE.items()}}


ALLOWED = _allowed()


def _layer_of(path: pathlib.Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_layers(path: pathlib.Path, source: str | None = None) -> set[str]:
    """Every devcopy_lib layer `path` imports, at any depth of the module (lazy imports in functions too)."""
    layers = set()
    depth = len(path.relative_to(PACKAGE).parts) - 1  # 0 for devcopy_lib/x.py, 1 for devcopy_lib/layer/x.py
    for node in ast.walk(ast.parse(path.read_text() if source is None else source)):
        if isinstance(node, ast.ImportFrom):
            if node.level and node.level > depth:  # relative import that leaves the file's own layer
                parts = (node.module or "").split(".")
                if parts[0]:
                    layers.add(parts[0])
                else:
                    layers |= {a.name for a in node.names}
            elif node.level == 0 and (node.module or "").startswith("devcopy_lib."):
                layers.add(node.module.split(".")[1])
            elif node.level == 0 and node.module == "devcopy_lib":
                layers |= {
                    a.name for a in node.names if (PACKAGE / a.name).exists() or (PACKAGE / f"{a.name}.py").exists()
                }
        elif isinstance(node, ast.Import):
            layers |= {a.name.split(".")[1] for a in node.names if a.name.startswith("devcopy_lib.")}
    return layers


def _modules():
    return [
        p
        for p in PACKAGE.rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py") or len(p.relative_to(PACKAGE).parts) > 1
    ]


def test_every_layer_is_listed():
    unknown = {_layer_of(p) for p in _modules()} - set(ALLOWED)
    assert unknown == set(), f"add these modules to the floor order in docs/design.md and ALLOWED: {unknown}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_floors_below_it(layer):
    offenders = {}
    for path in _modules():
        if _layer_of(path) != layer:
            continue
        upward = _imported_layers(path) - ALLOWED[layer] - {layer}
        if upward:
            offenders[str(path.relative_to(PACKAGE))] = sorted(upward)
    assert offenders == {}


def test_an_upward_import_is_found_lazy_or_for_types_only():
    """The check can fail: an emitter module importing pte (the floor above) inside a function, cli under
    TYPE_CHECKING, or placement reaching the package by its absolute name, is an offence."""
    planted = PACKAGE / "emitter" / "planted.py"
    source = (
        "from typing import TYPE_CHECKING\nfrom ..placement.place import place_devices\n"
        "def f():\n    from ..pte.reader import open_pte\n"
        "if TYPE_CHECKING:\n    from devcopy_lib.cli import main\n"
    )
    assert _imported_layers(planted, source) - ALLOWED["emitter"] - {"emitter"} == {"pte", "cli"}


def test_the_inner_floors_form_one_chain():
    """lowering < placement < emitter < pte: each may import the ones before it, none the ones after."""
    chain = ["runtime", "lowering", "placement", "emitter", "pte"]
    for i, layer in enumerate(chain):
        assert set(chain[:i]) <= ALLOWED[layer] and not set(chain[i + 1 :]) & ALLOWED[layer], layer


def test_every_layer_has_its_line_in_the_design_doc():
    """docs/design.md §3 names every layer (folder or top-level module) this test orders."""
    text = (PACKAGE.parent / "docs" / "design.md").read_text().split("## §3", 1)[1].split("## §4", 1)[0]
    assert [layer for layer in ALLOWED if f"`{layer}" not in text] == []


def test_floor_order_has_no_circle():
    """ALLOWED is a partial order: no layer reaches itself through the layers it may import."""

    def reach(layer, seen):
        for below in ALLOWED[layer]:
            assert below != layer and below not in seen, f"circle through {layer} -> {below}"
            reach(below, seen | {layer})

    for layer in ALLOWED:
        reach(layer, frozenset())


def test_library_never_imports_widgets():
    hits = [str(p) for p in PACKAGE.rglob("*.py") if "devcopy_widgets" in p.read_text()]
    assert hits == []


# docs/design.md §6: what widgets and benchmarks may import from the library.
PUBLIC_MODULES = {
    "devcopy_lib",
    "devcopy_lib.names",
    "devcopy_lib.models",
    "devcopy_lib.compare",
    "devcopy_lib.bench.harness",
    "devcopy_lib.bench.sweep",
    "devcopy_lib.bench.sizes",
    "devcopy_lib.bench.plots",
    "devcopy_lib.bench.cost_model",
}


def _library_imports(path: pathlib.Path) -> set[tuple[str, str]]:
    """(module, name) for every `from devcopy_lib... import name` and (module, "") for `import devcopy_lib...`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("devcopy_lib"):
            found |= {(node.module, alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {(alias.name, "") for alias in node.names if alias.name.startswith("devcopy_lib")}
    return found


def test_widgets_use_only_the_public_api():
    import devcopy_lib

    offenders = {}
    for path in WIDGETS.rglob("*.py"):
        bad = {
            (m, n)
            for m, n in _library_imports(path)
            if m not in PUBLIC_MODULES or (m == "devcopy_lib" and n not in devcopy_lib.__all__)
        }
        if bad:
            offenders[path.name] = sorted(bad)
    assert offenders == {}, "extend devcopy_lib/__init__.py rather than reach into a layer"


def test_benchmarks_import_no_private_name():
    benchmarks = PACKAGE.parent / "benchmarks"
    private = {
        path.name: sorted(n for _, n in _library_imports(path) if n.startswith("_")) for path in benchmarks.glob("*.py")
    }
    assert {name: names for name, names in private.items() if names} == {}


def _module_name(path: pathlib.Path) -> str:
    """`devcopy_lib.devices.allocator` for devcopy_lib/devices/allocator.py (a package's __init__: the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node that can run: the bodies of `if TYPE_CHECKING:` are left out (annotations only, never imported)."""
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def _imported_modules(path: pathlib.Path, modules: set[str], type_checking: bool = True) -> set[str]:
    """Every devcopy_lib module `path` imports, lazy imports in functions included, and the imports under
    `if TYPE_CHECKING:` unless `type_checking` is False (a circle through annotations is still a circle for a reader,
    and one refactor away from a run-time one): `from .x import y` imports the module `x.y` when there is one, else
    `x`."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree) if type_checking else _runtime_nodes(tree):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            for alias in node.names:
                found.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found & modules


def _import_graph(type_checking: bool = True) -> dict[str, set[str]]:
    """devcopy_lib's modules and the devcopy_lib modules each imports (a module importing itself is left out)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    return {name: _imported_modules(path, set(paths), type_checking) - {name} for name, path in paths.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_sees_a_lazy_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_resolves_relative_and_lazy_imports():
    graph = _import_graph()
    assert "devcopy_lib.devices.simulated" in graph["devcopy_lib.devices"]  # from .simulated import ...
    assert "devcopy_lib.devices.cupy_cuda" in graph["devcopy_lib.devices.backend"]  # lazy, inside a function
    assert "devcopy_lib.names" in graph["devcopy_lib.devices.allocator"]  # from ..names import ...
    assert "devcopy_lib.placement.peer" in graph["devcopy_lib.placement.report"]  # only under TYPE_CHECKING
    assert "devcopy_lib.placement.peer" not in _import_graph(type_checking=False)["devcopy_lib.placement.report"]


def test_no_module_takes_part_in_an_import_cycle():
    """A circle of imports works only in some import orders (lazy imports hide it, `TYPE_CHECKING` hides it until an
    annotation is needed at run time): every import points one way, type-checking-only ones included."""
    assert _cycles(_import_graph()) == []


# docs/design.md §4: above devices/, code asks an allocator's `capabilities`, never which backend it is.
BACKEND_NAMES = {"cupy", "simulated"}
NAMING_ALLOWED = {PACKAGE / "names.py"}  # the table of the user's backend choices


def _names_a_backend(tree: ast.AST) -> list[str]:
    """Where a module tells backends apart by name: a comparison with "cupy" / "simulated" (== , !=, in, a tuple
    of them), `import cupy` (any depth, lazy too) or `torch.cuda.synchronize`."""
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            literals = {
                c.value
                for operand in operands
                for c in ([operand] if isinstance(operand, ast.Constant) else getattr(operand, "elts", []))
                if isinstance(c, ast.Constant)
            }
            hits += [f"line {node.lineno}: compares with {name!r}" for name in sorted(literals & BACKEND_NAMES)]
        elif isinstance(node, ast.Import):
            hits += [f"line {node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] == "cupy"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "cupy":
            hits.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and ast.unparse(node) == "torch.cuda.synchronize":
            hits.append(f"line {node.lineno}: torch.cuda.synchronize")
    return sorted(hits, key=lambda hit: int(hit.split()[1].rstrip(":")))


def test_the_backend_name_finder_sees_each_form():
    source = (
        "import cupy.cuda\nfrom cupy import asarray\nif backend == 'cupy': pass\nok = name in ('x', 'simulated')\n"
        "torch.cuda.synchronize()\nlabel = 'simulated'\n"
    )
    assert _names_a_backend(ast.parse(source)) == [
        "line 1: import cupy.cuda",
        "line 2: from cupy import ...",
        "line 3: compares with 'cupy'",
        "line 4: compares with 'simulated'",
        "line 5: torch.cuda.synchronize",
    ]


def test_nothing_above_devices_names_a_backend():
    """Backends are told apart by `allocator.capabilities` (and synchronized by `allocator.synchronize()`): only
    devices/ knows them by name, and names.py lists the user's choices."""
    paths = [p for p in [*PACKAGE.rglob("*.py"), *WIDGETS.rglob("*.py")] if p not in NAMING_ALLOWED]
    offenders = {
        str(p.relative_to(PACKAGE.parent)): hits
        for p in sorted(paths)
        if p.relative_to(PACKAGE.parent).parts[:2] != ("devcopy_lib", "devices")
        and (hits := _names_a_backend(ast.parse(p.read_text())))
    }
    assert offenders == {}


def test_benchmarks_tell_backends_apart_by_capabilities():
    """A benchmark asks `allocator.capabilities` what a backend can do, never compares its name (it may still name one
    to make it, import cupy for the raw baseline, or synchronize torch's own CUDA work around an eager baseline)."""
    offenders = {
        path.name: compares
        for path in sorted((PACKAGE.parent / "benchmarks").glob("*.py"))
        if (compares := [hit for hit in _names_a_backend(ast.parse(path.read_text())) if "compares with" in hit])
    }
    assert offenders == {}


def test_the_pte_reader_only_reads():
    """pte/reader.py turns bytes into a PteProgram; resolving its operators through the runtime is
    pte/registration.py's job. Of the runtime, the reader takes its error class only."""
    runtime = {m for m in _import_graph()["devcopy_lib.pte.reader"] if m.startswith("devcopy_lib.runtime")}
    assert runtime <= {"devcopy_lib.runtime.failures"}
