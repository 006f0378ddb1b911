"""One home per name (docs/design.md §7): the enums of devcopy_lib.names behave as the strings users pass, and no
library or widget file spells a vocabulary value as a literal instead of naming it from names.py."""

from __future__ import annotations

import ast
import json
import pathlib
import re
from collections.abc import Iterator

import pytest

from devcopy_lib import names

ROOT = pathlib.Path(__file__).resolve().parents[1]
HOME = ROOT / "devcopy_lib" / "names.py"
SOURCES = sorted(p for folder in ("devcopy_lib", "widgets") for p in (ROOT / folder).rglob("*.py") if p != HOME)

# Vocabularies whose values must not appear as literals anywhere: value -> the names to use instead. Backends are left
# out: "cupy" is also the package's import name.
_VOCABULARIES = (
    names.Strategy,
    names.Partition,
    names.Mode,
    names.Lib,
    names.DeviceRule,
    names.Direction,
    names.CopyRole,
)
VOCABULARY: dict[str, list[str]] = {}
for _enum in _VOCABULARIES:
    for _member in _enum:
        VOCABULARY.setdefault(_member.value, []).append(f"names.{_enum.__name__}.{_member.name}")
for _op in names.COPY_OP.values():
    _where = f"names.COPY_OP[Direction.{_op.direction.name}]"
    VOCABULARY[_op.name] = [f"{_where}.name"]
    VOCABULARY[_op.schema_name] = [f"{_where}.schema_name"]
    VOCABULARY[_op.kernel_name] = [f"{_where}.kernel_name"]
# Error kinds are also ordinary words ("device" is a metadata key, "load" a module): they count only where a kind is
# given - assigned to or compared with a `kind`, passed as `kind=`, or the value of a "kind" dict entry.
ERROR_KINDS = {kind.value: f"names.ErrorKind.{kind.name}" for kind in names.ErrorKind}
# A line marked with this comment spells a vocabulary value that means something else there (the ATen op namespace,
# a package name); the comment says what.
EXEMPT = "# names: "


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants: text for people, not literals."""
    bodies = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, bodies)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _is_kind(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "kind") or (
        isinstance(node, ast.Attribute) and node.attr == "kind"
    )


def _kind_literals(tree: ast.AST) -> Iterator[ast.AST]:
    """The expressions that give an error kind: `kind = X`, `x.kind = X`, `kind=X`, `{"kind": X}`, `kind == X`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(_is_kind(t) for t in node.targets):
            yield node.value
        elif isinstance(node, ast.AnnAssign) and _is_kind(node.target) and node.value is not None:
            yield node.value
        elif isinstance(node, ast.keyword) and node.arg == "kind":
            yield node.value
        elif isinstance(node, ast.Dict):
            yield from (
                v
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and k.value == "kind"
            )
        elif isinstance(node, ast.Compare) and (_is_kind(node.left) or any(_is_kind(c) for c in node.comparators)):
            yield from (node.left, *node.comparators)


def literals(source: str, filename: str = "<source>") -> list[str]:
    """Each literal of `source` that spells a vocabulary value, as `file:line: 'value' - use <name>`."""
    tree = ast.parse(source)
    lines = source.splitlines()
    skip = _docstrings(tree)
    kinds = {id(c) for expr in _kind_literals(tree) for c in ast.walk(expr)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
            continue
        use = VOCABULARY.get(node.value, [])
        if id(node) in kinds and node.value in ERROR_KINDS:
            use = [*use, ERROR_KINDS[node.value]]
        if use and EXEMPT not in lines[node.lineno - 1]:
            found.append(
                ((node.lineno, node.col_offset), f"{filename}:{node.lineno}: {node.value!r} - use {' or '.join(use)}")
            )
    return [text for _, text in sorted(found)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_vocabulary_literal_outside_names(path):
    assert literals(path.read_text(), str(path.relative_to(ROOT))) == []


@pytest.mark.parametrize(
    "source, flagged",
    [
        ('counts = {"h2d": 0}', ["'h2d' - use names.Direction.H2D"]),
        ('def f(mode="portable"): pass', ["'portable' - use names.Mode.PORTABLE or names.Lib.PORTABLE"]),
        ('op = "et_copy::_d2d_copy.out"', ["'et_copy::_d2d_copy.out' - use names.COPY_OP[Direction.D2D].name"]),
        ('s = f"{n}_h2d"', []),  # an f-string part counts only when it is a whole value
        ('s = f"{n}" "d2h"', ["'d2h' - use names.Direction.D2H"]),
        ('class E(Exception):\n    kind = "device"', ["'device' - use names.ErrorKind.DEVICE"]),
        ('raise Failure("no", kind="load")', ["'load' - use names.ErrorKind.LOAD"]),
        ('if exc.kind in ("usage", "internal"): pass', ["'usage' - use", "'internal' - use"]),
        ('meta = {"kind": "placement"}', ["'placement' - use names.ErrorKind.PLACEMENT"]),
        ('node.meta["device"] = cpu; load = "load"', []),  # an error kind's word used as something else
        ('def f():\n    """Copies h2d."""\n    return 1  # "d2h"', []),
        ('namespace = "aten"  # names: the ATen op namespace, not the mode', []),
    ],
)
def test_the_literal_check_finds_vocabulary_values(source, flagged):
    found = literals(source)
    assert len(found) == len(flagged) and all(want in got for want, got in zip(flagged, found, strict=True)), found


def test_names_equal_print_and_serialize_as_their_strings():
    assert names.Mode.PORTABLE == "portable" and {"aten": 1}[names.Mode.ATEN] == 1
    assert (str(names.Direction.H2D), f"{names.Direction.D2H:>4}", repr(names.Lib.NATIVE)) == (
        "h2d",
        " d2h",
        "'native'",
    )
    assert json.dumps({names.Direction.H2D: names.Strategy.PEER}) == '{"h2d": "peer"}'
    assert names.Strategy("dedupe") is names.Strategy.DEDUPE
    assert ", ".join(names.MODES) == "portable, aten"


def test_the_legacy_tables_derive_from_the_copy_ops():
    assert names.COPY_OPS == {
        "h2d": "et_copy::_h2d_copy.out",
        "d2h": "et_copy::_d2h_copy.out",
        "d2d": "et_copy::_d2d_copy.out",
    }
    assert names.COPY_DIRECTIONS == {op: direction for direction, op in names.COPY_OPS.items()}
    assert names.DIRECTION_WORDS == {"h2d": "host->device", "d2h": "device->host", "d2d": "device->device"}
    assert {op.schema_name for op in names.COPY_OP.values()} == {"_h2d_copy.out", "_d2h_copy.out", "_d2d_copy.out"}
    assert names.COPY_OP_BY_NAME["et_copy::_d2h_copy.out"].kernel_name == "_d2h_copy_out"


def test_the_copy_ops_match_the_op_yamls():
    """The kernel names the YAMLs register end in each op's kernel_name (the runtime matches kernels on it)."""
    from devcopy_lib.ops.schema import ET_COPY_OPS_YAML, FUNCTIONS_YAML, PEER_COPY_OPS_YAML, load_ops_yaml

    entries = [e for path in (ET_COPY_OPS_YAML, PEER_COPY_OPS_YAML, FUNCTIONS_YAML) for e in load_ops_yaml(path)]
    ours = {
        e.name: {k.kernel_name.rpartition("::")[2] for k in e.kernels}
        for e in entries
        if e.name in names.COPY_OP_BY_NAME
    }
    assert ours == {op.name: {op.kernel_name} for op in names.COPY_OP.values()}


@pytest.mark.parametrize(
    "nbytes, text",
    [(0, "0 B"), (1023, "1023 B"), (4096, "4 KiB"), (1536, "1.5 KiB"), (156552192, "149.3 MiB"), (3 << 30, "3 GiB")],
)
def test_format_bytes_is_binary_without_a_spurious_decimal(nbytes, text):
    assert names.format_bytes(nbytes) == text


def test_device_string_is_what_devices_parse():
    from devcopy_lib.devices import Device

    assert [names.device_string(1), names.device_string(0, type="cpu")] == ["cuda:1", "cpu"]
    assert [str(Device.parse(names.device_string(i))) for i in (0, 3)] == ["cuda:0", "cuda:3"]
    assert re.fullmatch(r"cuda:\d+", names.device_string(127))
