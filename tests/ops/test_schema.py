"""Op YAML files: ExecuTorch's shape, parsed by torchgen, malformed entries reported with file, index and key."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from devcopy_lib.ops.schema import (
    ET_COPY_OPS_YAML,
    FUNCTIONS_YAML,
    MAX_OP_YAML_BYTES,
    OpYamlError,
    load_ops_yaml,
    native_schema,
    parse_schema,
    runtime_name,
    split_namespace,
)

ET_COPY = {"et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"}
PEER = "et_copy::_d2d_copy.out"  # devcopy's addition: functions.yaml and peer_copy_ops.yaml, not et_copy_ops.yaml


def test_et_copy_ops_yaml_has_both_out_schemas_with_fallback_kernels():
    entries = load_ops_yaml(ET_COPY_OPS_YAML)
    assert {e.name for e in entries} == ET_COPY
    for e in entries:
        assert str(e.schema) == f"{e.name.split('::')[1]}(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"
        assert [k.key for k in e.kernels] == [""]


def test_functions_yaml_holds_et_copy_and_portable_out_ops():
    entries = load_ops_yaml(FUNCTIONS_YAML)
    names = {e.name for e in entries}
    assert ET_COPY | {PEER} <= names and "aten::add.out" in names
    assert all(e.schema.is_out_fn() for e in entries)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "- func: x::f.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  kernel: []\n",
            r"entry 0: unknown key 'kernel'. Valid keys: func, op, kernels",
        ),
        (
            "- func: x::f.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n  kernels:\n    - arg_meta: null\n",
            r"entry 0: kernels\[0\]: key 'kernel_name' is missing",
        ),
        (
            "- op: not_an_op.out\n  kernels:\n    - kernel_name: k\n",
            r"entry 0: key 'op': 'not_an_op.out' is not in ATen",
        ),
        (
            "- func: x::f(Tensor self -> Tensor\n  kernels:\n    - kernel_name: k\n",
            r"entry 0: key 'func': cannot parse",
        ),
    ],
)
def test_malformed_entry_names_file_index_and_key(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(OpYamlError, match=message) as info:
        load_ops_yaml(str(path))
    assert str(path) in str(info.value)


def _executorch_portable_yaml() -> Path:
    return (
        Path(importlib.util.find_spec("executorch").submodule_search_locations[0]) / "kernels/portable/functions.yaml"
    )


@pytest.mark.reference
def test_functions_yaml_covers_every_aten_out_op_of_executorch_portable():
    theirs = set()
    for entry in yaml.safe_load(_executorch_portable_yaml().read_text()):
        name = f"aten::{entry['op']}" if "op" in entry else runtime_name(*split_namespace(entry["func"]))
        schema = native_schema(name) if name.startswith("aten::") else None
        if schema and parse_schema(schema).is_out_fn():
            theirs.add(name)
    assert theirs and theirs <= {e.name for e in load_ops_yaml(FUNCTIONS_YAML)}


@pytest.mark.reference
def test_et_copy_entries_match_executorch():
    package = _executorch_portable_yaml().parent
    for path in (package / "functions.yaml", package / "et_copy_ops.yaml"):
        theirs = {e["func"] for e in yaml.safe_load(path.read_text()) if "et_copy::" in e.get("func", "")}
        ours = {f"{e.name.split('::')[0]}::{e.func}" for e in load_ops_yaml(ET_COPY_OPS_YAML)}
        assert theirs == ours


_ENTRY = (
    "- func: x::f.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)\n"
    "  kernels:\n    - arg_meta: null\n      kernel_name: k\n"
)


def _load_text(tmp_path, text: str | bytes):
    path = tmp_path / "ops.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path), lambda: load_ops_yaml(str(path))


@pytest.mark.parametrize(
    "text, message",
    [
        ("- func: [\n", r":2: not valid op YAML"),  # a syntax error, located
        ("- func: x\n\t- y\n", r":2: not valid op YAML.*spaces, not tabs"),
        ("- !!python/object:os.system {}\n", r":1: not valid op YAML"),
        (_ENTRY + "---\n" + _ENTRY, r":5: not valid op YAML: but found another document"),
        (b"- func: \xff\n", r"byte 8 is not UTF-8.*save the file as UTF-8"),
        (
            _ENTRY + _ENTRY.replace("kernel_name: k", "kernel_name: k2"),
            r":5: entry 1: Re-registering x::f.out with kernel key null",
        ),
        (
            "- &a func: x\n- *a\n",
            r":1: the value anchored here is used again through a YAML alias",
        ),
    ],
)
def test_bad_yaml_is_an_op_yaml_error_naming_file_line_and_fix(tmp_path, text, message):
    path, load = _load_text(tmp_path, text)
    with pytest.raises(OpYamlError, match=message) as info:
        load()
    assert str(info.value).startswith(path)


def test_one_entry_naming_a_kernel_key_twice_is_a_re_registration(tmp_path):
    twice = _ENTRY + "    - arg_meta: null\n      kernel_name: k2\n"
    _, load = _load_text(tmp_path, twice)
    with pytest.raises(OpYamlError, match=r":1: entry 0: Re-registering x::f.out with kernel key null"):
        load()


def test_the_same_op_under_two_kernel_keys_loads(tmp_path):
    two_keys = _ENTRY + "    - arg_meta: v1/6;0|6;0\n      kernel_name: k2\n"
    _, load = _load_text(tmp_path, two_keys)
    (entry,) = load()
    assert [k.key for k in entry.kernels] == ["", "v1/6;0|6;0"]


def test_billion_laughs_is_refused_at_once(tmp_path):
    levels = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    _, load = _load_text(tmp_path, "\n".join(levels) + "\n")
    with pytest.raises(OpYamlError, match="aliases"):
        load()


def test_a_directory_a_missing_file_and_an_oversized_file_are_refused(tmp_path):
    with pytest.raises(OpYamlError, match="is a directory"):
        load_ops_yaml(str(tmp_path))
    with pytest.raises(OpYamlError, match="cannot read it"):
        load_ops_yaml(str(tmp_path / "missing.yaml"))
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_OP_YAML_BYTES + 1))
    with pytest.raises(OpYamlError, match="over the .*-byte limit"):
        load_ops_yaml(str(big))
