"""native_functions.yaml read by a line scan: the same ops and schemas as the YAML parse, on torchgen's file and on
any text; whatever the scan cannot read exactly falls back to the parse."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.ops import schema
from devcopy_lib.ops.schema import NATIVE_FUNCTIONS_YAML, parse_native_functions, scan_native_functions


def _parsed(text: str) -> dict[str, str | None] | Exception:
    """What the YAML parse makes of `text`: the ops, or the exception it raises."""
    try:
        return parse_native_functions(text)
    except Exception as exc:  # a malformed document: yaml errors, a missing func, a non-list top level
        return exc


def test_torchgen_file_is_scanned_to_exactly_the_parse_in_its_order():
    with open(NATIVE_FUNCTIONS_YAML, encoding="utf-8") as f:
        text = f.read()
    scanned = scan_native_functions(text)
    assert scanned is not None, "the packaged file fell back to the YAML parse: the scan no longer reads its shape"
    assert list(scanned.items()) == list(parse_native_functions(text).items())
    assert scanned["aten::add.out"].startswith("add.out(Tensor self, Tensor other")
    assert scanned["aten::_amp_update_scale.out"] is None  # an autogen variant


def test_native_functions_falls_back_to_the_parse_when_the_scan_declines(tmp_path, monkeypatch):
    odd = tmp_path / "native_functions.yaml"
    odd.write_text("- func: 'relu(Tensor self) -> Tensor'\n  autogen: relu.out\n")
    monkeypatch.setattr(schema, "NATIVE_FUNCTIONS_YAML", str(odd))
    schema.native_functions.cache_clear()
    try:
        assert schema.native_functions() == {"aten::relu": "relu(Tensor self) -> Tensor", "aten::relu.out": None}
    finally:
        schema.native_functions.cache_clear()


FUNC = "- func: add.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"


@pytest.mark.parametrize(
    "text",
    [
        "- func: 'relu(Tensor self) -> Tensor'\n",  # quoted
        "- func: relu(Tensor self\n   ) -> Tensor\n",  # continued on the next line
        "- func: relu(Tensor self) -> Tensor # note\n",  # a trailing comment
        f"{FUNC}\n  autogen: [a.out, b.out]\n",  # a flow list
        f"{FUNC}\n  autogen: a.out\n  autogen: b.out\n",  # a key twice: YAML keeps the last
        f"{FUNC}\n  autogen: yes\n",  # a bool to YAML
        f"{FUNC}\n  autogen:\n",  # null to YAML
        "- variants: function\n  func: relu(Tensor self) -> Tensor\n",  # func not the first key
        "---\n" + FUNC + "\n",  # a document marker
        FUNC + "\r\n",  # another line break
        f"{FUNC}\n  - stray\n",  # a sequence item under no key
        f"{FUNC}\n  tags: [core,\n    pointwise]\n",  # a flow list over two lines
        "",  # no entry
    ],
)
def test_a_shape_outside_the_files_is_left_to_the_parse(text):
    assert scan_native_functions(text) is None


_LINES = [
    FUNC,
    "- func: relu(Tensor self) -> Tensor",
    "- func: relu(Tensor self) -> Tensor  ",
    "- func: 'relu(Tensor self) -> Tensor'",
    '- func: f(Tensor self, str reduce="mean") -> Tensor',
    "- func: g(Tensor x) -> Tensor: y",
    "- func: relu",
    "- variants: function",
    "  autogen: add.out, relu.out",
    "  autogen: relu.out # note",
    "  autogen: On",
    "  autogen: relu.out,",
    "  autogen:",
    "  func: h(Tensor x) -> Tensor",
    "  variants: function, method",
    "  dispatch:",
    "    CPU: add_out",
    "    CUDA, MPS: add_out",
    "  precomputed:",
    "  - dim -> int dim",
    "  cpp_no_default_args: ['dim']",
    "  tags: [core,",
    "    pointwise]",
    "   ) -> Tensor",
    "    more words",
    "# a comment",
    "    # an indented comment",
    "",
    " odd: 1",
    "\tx: 1",
    "...",
    "  dispatch: # backends",
    "  device_check: NoCheck   # why",
    "  x: 'open",
    "  tags: {}",
    "      deep: 1",
    "    CPU:",
    "  - a: b",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_LINES), max_size=12))
def test_the_scan_equals_the_parse_or_declines_on_any_text(lines):
    text = "\n".join(lines) + "\n"
    scanned, parsed = scan_native_functions(text), _parsed(text)
    if scanned is not None:
        assert not isinstance(parsed, Exception), f"the scan read {text!r}, which YAML refuses: {parsed}"
        assert list(scanned.items()) == list(parsed.items())


def test_a_document_of_the_files_shape_is_scanned_as_yaml_reads_it():
    relu = "- func: relu(Tensor self) -> Tensor"
    text = f"{FUNC}\n  autogen: relu.out, add.out\n  dispatch:\n    CPU: add_out\n# c\n{relu}\n"
    expected = {
        "aten::add.out": FUNC[len("- func: ") :],
        "aten::relu.out": None,
        "aten::relu": "relu(Tensor self) -> Tensor",
    }
    assert scan_native_functions(text) == parse_native_functions(text) == expected
