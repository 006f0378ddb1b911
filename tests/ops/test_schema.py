"""Op YAML files: ExecuTorch's shape, parsed by torchgen, malformed entries reported with file, index and key."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

from devcopy_lib.ops.schema import (
    ET_COPY_OPS_YAML,
    FUNCTIONS_YAML,
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
