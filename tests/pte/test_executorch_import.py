"""ExecuTorch's first import happens under one lock: two threads that first reach ExecuTorch at once (the explorer's
comparison computed beside a new change) never see a half-initialised `executorch.exir` module."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys
import textwrap

import pytest

import devcopy_lib

PACKAGE = pathlib.Path(devcopy_lib.__file__).parent


def _executorch_imports() -> dict[str, list[str]]:
    """function (file:name) -> the ExecuTorch modules it imports, for every function of devcopy_lib that does."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            modules = [
                n.module if isinstance(n, ast.ImportFrom) else n.names[0].name
                for n in ast.walk(function)
                if isinstance(n, ast.Import | ast.ImportFrom)
                and ((n.module or "") if isinstance(n, ast.ImportFrom) else n.names[0].name).startswith("executorch")
            ]
            if modules:
                found[f"{path.relative_to(PACKAGE)}:{function.name}"] = modules
    return found


def test_every_function_that_imports_executorch_takes_the_lock_first():
    functions = _executorch_imports()
    assert len(functions) >= 10  # the reader, the pipeline, the backend, the reference, the runtime
    for where, _ in functions.items():
        path, name = where.split(":")
        tree = ast.parse((PACKAGE / path).read_text())
        (function,) = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == name][:1]
        lines = [
            n.lineno
            for n in ast.walk(function)
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "import_executorch"
        ]
        first_import = min(
            n.lineno
            for n in ast.walk(function)
            if isinstance(n, ast.Import | ast.ImportFrom)
            and ((n.module or "") if isinstance(n, ast.ImportFrom) else n.names[0].name).startswith("executorch")
        )
        assert lines and min(lines) < first_import, f"{where} imports ExecuTorch without import_executorch() first"


THREADS = """
import importlib, json, sys, threading
import devcopy_lib.ops.aot  # noqa: F401 - ExecuTorch's op registry loaded alone first, as devcopy does
from devcopy_lib.pte.executorch_import import import_executorch

modules = json.loads(sys.argv[1])
barrier = threading.Barrier(len(modules))
errors = []

def work(module):
    barrier.wait()
    try:
        import_executorch()
        importlib.import_module(module)
        from executorch.exir.passes import MemoryPlanningPass  # noqa: F401 - the import the explorer broke on
        import executorch.exir
        executorch.exir.memory  # noqa: B018
    except BaseException as exc:
        errors.append(f"{module}: {type(exc).__name__}: {exc}")

threads = [threading.Thread(target=work, args=(m,)) for m in modules]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(errors))
"""


@pytest.mark.reference
def test_threads_importing_executorch_at_once_all_succeed():
    """Twelve threads, released together, each reaching ExecuTorch through a module devcopy imports; without the
    lock this fails with 'partially initialized module' or a _DeadlockError nearly every time."""
    modules = sorted({m for ms in _executorch_imports().values() for m in ms if "pybindings" not in m})
    chosen = (modules * 12)[:12]
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(THREADS), json.dumps(chosen)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=PACKAGE.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
