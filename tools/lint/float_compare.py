"""Refuse `==` / `!=` on floats that come from a solver (a least-squares fit, a refit): their last bits depend on the
CPU's BLAS kernel, so a test that compares them exactly passes on one machine and fails on another.

    python tools/lint/float_compare.py [PATH ...]     (default: tests/)

A comparison is flagged when one side calls a solver, or reads a name (or an attribute of a name) assigned from a
solver call in the same function; it is not flagged when either side is a tolerance (`pytest.approx`, `isclose`,
...), the other side is a string, bool or None constant, or the line says why it is exact (`# exact: <reason>`, for
example a JSON round trip of the same object). Compare with a stated tolerance instead: `pytest.approx(x, rel=1e-9)`,
`math.isclose`, `Line.close_to`.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

# Calls whose results are floats from a numerical solver (numpy's and devcopy's cost-model fits).
SOLVERS = frozenset({"lstsq", "solve", "polyfit", "curve_fit", "fit", "fit_line", "with_method_copies"})
TOLERANT = frozenset({"approx", "isclose", "allclose", "assert_close", "close_to"})


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _calls_solver(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and _called_name(n) in SOLVERS for n in ast.walk(node))


def _tolerant(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _called_name(node) in TOLERANT


def _solver_names(func: ast.AST) -> set[str]:
    """Names assigned, anywhere in `func`, from an expression that calls a solver."""
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and _calls_solver(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _from_solver(side: ast.AST, names: set[str]) -> bool:
    return _calls_solver(side) or any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(side))


def _not_a_float(side: ast.AST) -> bool:
    return isinstance(side, ast.Constant) and (side.value is None or isinstance(side.value, str | bytes | bool))


def _exact_pair(left: ast.AST, right: ast.AST, names: set[str]) -> bool:
    """Whether `left == right` compares a solver's floats with no tolerance."""
    if _tolerant(left) or _tolerant(right) or _not_a_float(left) or _not_a_float(right):
        return False
    return _from_solver(left, names) or _from_solver(right, names)


def exact_solver_compares(source: str, filename: str = "<string>") -> Iterator[tuple[int, str]]:
    """(line, code) of every `==`/`!=` that compares a solver's result exactly."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)] or [tree]
    seen: set[int] = set()
    for scope in scopes:
        names = _solver_names(scope)
        for node in ast.walk(scope):
            if not isinstance(node, ast.Compare) or id(node) in seen or "# exact:" in lines[node.lineno - 1]:
                continue
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides[:-1], sides[1:], strict=True):
                if isinstance(op, ast.Eq | ast.NotEq) and _exact_pair(left, right, names):
                    seen.add(id(node))
                    yield node.lineno, ast.unparse(node)
                    break


def main(paths: list[str]) -> int:
    found = 0
    for root in [Path(p) for p in paths or ["tests"]]:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            for line, code in exact_solver_compares(path.read_text(), str(path)):
                print(f"{path}:{line}: exact comparison of a solver's floats: {code}", file=sys.stderr)
                found += 1
    if found:
        print(
            f"{found} exact float comparison(s): compare with a tolerance (pytest.approx(x, rel=1e-9))", file=sys.stderr
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
