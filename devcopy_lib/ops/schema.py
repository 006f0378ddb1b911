"""Op YAML files in ExecuTorch's shape (`func:` schema or `op:` ATen name, plus `kernels:` entries with `arg_meta`
and `kernel_name`), validated on load and parsed with torchgen's schema parser."""

from __future__ import annotations

import functools
import os
import re
import stat
from dataclasses import dataclass

import torch
import torchgen
import yaml
from torchgen.model import FunctionSchema

from ..names import ErrorKind

HERE = os.path.dirname(os.path.abspath(__file__))
ET_COPY_OPS_YAML = os.path.join(HERE, "et_copy_ops.yaml")
FUNCTIONS_YAML = os.path.join(HERE, "functions.yaml")
PEER_COPY_OPS_YAML = os.path.join(HERE, "peer_copy_ops.yaml")  # devcopy's et_copy::_d2d_copy.out for ATen mode
QUANTIZED_YAML = os.path.join(HERE, "quantized.yaml")  # ExecuTorch's quantized out variants devcopy implements
# ExecuTorch-defined ops its ATen-mode runtime runs (the dim-order copies), part of the `native` lib
EDGE_DIALECT_ATEN_OPS_YAML = os.path.join(HERE, "edge_dialect_aten_op.yaml")
NATIVE_FUNCTIONS_YAML = os.path.join(
    os.path.dirname(torchgen.__file__),
    "packaged",
    "ATen",
    "native",  # names: torchgen's folder, not the lib
    "native_functions.yaml",
)
ATEN_NAMESPACE = "aten"  # names: the namespace of ATen's ops (`aten::add.out`), not the runtime mode

ENTRY_KEYS = ("func", "op", "kernels", "type_alias", "dim_order_alias", "variants")
# An op YAML is a short list (functions.yaml is 21 KiB): anything far larger is refused before it is read.
MAX_OP_YAML_BYTES = 1 << 20
KERNEL_KEYS = ("arg_meta", "kernel_name")


class OpYamlError(ValueError):
    """A malformed op YAML entry; the message names the file, the entry index and the key."""

    kind = ErrorKind.USAGE


@dataclass(frozen=True)
class KernelEntry:
    key: str  # "" = fallback (arg_meta null)
    kernel_name: str


@dataclass(frozen=True)
class OpEntry:
    """One op of a YAML file: its runtime name (`ns::name.overload`), schema, kernels and where it came from."""

    name: str
    func: str  # the schema text without namespace, parsed lazily by `schema`
    kernels: tuple[KernelEntry, ...]
    source: str
    index: int
    line: int = 0  # the entry's first line in `source` (1-based); 0 when not read from a file

    @property
    def schema(self) -> FunctionSchema:
        return parse_schema(self.func)


@functools.cache
def parse_schema(func: str) -> FunctionSchema:
    return FunctionSchema.parse(func)


def split_namespace(text: str) -> tuple[str, str]:
    """`et_copy::_h2d_copy.out(...)` -> ("et_copy", "_h2d_copy.out(...)"); no namespace means aten."""
    head = text.split("(", 1)[0]
    if "::" in head:
        namespace, rest = text.split("::", 1)
        return namespace.strip(), rest.strip()
    return ATEN_NAMESPACE, text.strip()


def runtime_name(namespace: str, func: str) -> str:
    """The runtime operator name ExecuTorch uses: `aten::add.out`, `aten::relu` (no `.default`)."""
    return f"{namespace}::{func.split('(', 1)[0].strip()}"


@functools.cache
def native_functions() -> dict[str, str | None]:
    """ATen's ops in torchgen's packaged native_functions.yaml, `autogen:` variants included (read once): runtime
    name -> schema text, or None for an autogen op (its schema comes from PyTorch on demand: `native_schema`).
    Read by a line scan (`scan_native_functions`, 30x faster than the YAML parse a `devcopy run` would otherwise wait
    for); a file whose shape the scan cannot read exactly is parsed as YAML instead."""
    with open(NATIVE_FUNCTIONS_YAML, encoding="utf-8") as f:
        text = f.read()
    scanned = scan_native_functions(text)
    return scanned if scanned is not None else parse_native_functions(text)


def parse_native_functions(text: str) -> dict[str, str | None]:
    """`native_functions` by a full YAML parse of the file's text: the definition the scan must equal."""
    found: dict[str, str | None] = {}
    for entry in yaml.load(text, Loader=_Loader):
        found[runtime_name(ATEN_NAMESPACE, entry["func"])] = entry["func"]
        for generated in str(entry.get("autogen", "")).split(","):
            if generated.strip():
                found.setdefault(f"aten::{generated.strip()}", None)
    return found


# A plain one-line scalar the scan may take as it is: starts like a name, no comment (" #"), no ": ", no trailing ":".
_PLAIN_VALUE = re.compile(r"[A-Za-z_](?:(?! #|: ).)*(?<!:)")
# Another key's value on one line: empty, plain, a flow list of names or quoted words, or {}; then maybe a comment.
_FLOW_ITEM = r"""(?:[A-Za-z_][A-Za-z0-9_]*|'[^'\n]*'|"[^"\\\n]*")"""
_OTHER_VALUE = re.compile(
    rf"(?:|{_PLAIN_VALUE.pattern}|\[(?:{_FLOW_ITEM}(?:, *{_FLOW_ITEM})*)?\]|\{{\}})(?:(?<=^)#.*| +#.*)?"
)
_KEY_LINE = re.compile(r"(  |    )([A-Za-z_][A-Za-z0-9_]*(?:, *[A-Za-z_][A-Za-z0-9_]*)*):(?: (.*))?")
_FUNC, _AUTOGEN = "- func: ", "  autogen: "
_YAML_WORDS = frozenset({"yes", "no", "true", "false", "on", "off", "y", "n", "null"})  # YAML 1.1 bools and null


def _own_value(value: str, func: bool) -> bool:
    """A func or autogen value the scan takes as YAML would: plain, one line, text (not a bool or null)."""
    return bool(_PLAIN_VALUE.fullmatch(value)) and value.lower() not in _YAML_WORDS and ("(" in value or not func)


class _NativeScan:
    """The line scan's state: the entries found so far, what the last line was ("open": `  key:` alone, "nested":
    `    key: value`, "item": `  - x`, else ""), and whether the current entry had its `autogen:` line."""

    def __init__(self) -> None:
        self.found: dict[str, str | None] = {}
        self.after = ""
        self.autogen_seen = False

    def take(self, line: str) -> bool:
        """Read one line (right-stripped); False when it falls outside the shape the scan reads."""
        stripped = line.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            return True  # a comment line, at any indent, is no part of a value
        if line.startswith(_FUNC):
            return self._func(line[len(_FUNC) :])
        if not self.found:
            return False  # anything before the first entry
        if line.startswith(_AUTOGEN):
            return self._autogen(line[len(_AUTOGEN) :])
        return self._key(line, len(line) - len(stripped), stripped)

    def _func(self, value: str) -> bool:
        if not _own_value(value, func=True):
            return False
        self.found[runtime_name(ATEN_NAMESPACE, value)] = value
        self.autogen_seen, self.after = False, ""
        return True

    def _autogen(self, value: str) -> bool:
        if self.autogen_seen or not _own_value(value, func=False):
            return False
        for generated in value.split(","):
            if generated.strip():
                self.found.setdefault(f"aten::{generated.strip()}", None)
        self.autogen_seen, self.after = True, ""
        return True

    def _key(self, line: str, indent: int, stripped: str) -> bool:
        """A list item under an open key, a nested `key: value` under one, or a key of the entry."""
        if indent == 2 and stripped.startswith("- ") and self.after in ("open", "item"):
            self.after = "item"
            return bool(_PLAIN_VALUE.fullmatch(stripped[2:]))
        key = _KEY_LINE.fullmatch(line)
        if key is None or key.group(2) in ("func", "autogen") or not _OTHER_VALUE.fullmatch(key.group(3) or ""):
            return False  # func not first, an autogen not on one line, a value that may run on
        if indent == 4:
            nested_ok = self.after in ("open", "nested") and bool(_PLAIN_VALUE.fullmatch(key.group(3) or ""))
            self.after = "nested"
            return nested_ok
        self.after = "open" if not key.group(3) or key.group(3).startswith("#") else ""
        return True


def scan_native_functions(text: str) -> dict[str, str | None] | None:
    """`parse_native_functions(text)` read line by line, for the shape native_functions.yaml has: entries
    `- func: <schema>` at column 0; their keys at column 2, each value on its line (`autogen: a, b` included);
    `dispatch:`'s backends at column 4, `precomputed:`'s items at column 2. None when any line falls outside that
    shape: then only a YAML parse says what the file means, or that it is malformed."""
    if any(c in text for c in "\r\x85\u2028\u2029"):
        return None  # line breaks YAML knows beyond "\n"
    scan = _NativeScan()
    if not all(scan.take(line.rstrip()) for line in text.split("\n")):
        return None
    return scan.found or None


@functools.cache
def native_schema(name: str) -> str | None:
    """The schema text of ATen op `name` (`aten::relu.out`), from the YAML or else from PyTorch's own registry."""
    if name not in native_functions():
        return None
    if native_functions()[name]:
        return native_functions()[name]
    base, _, overload = name.partition(".")
    for schema in torch._C._jit_get_schemas_for_operator(base):
        if schema.overload_name == overload:
            return split_namespace(str(schema))[1]
    return None


def entry_error(entry: OpEntry, message: str) -> OpYamlError:
    """A problem found later with an entry that loaded (a kernel_name no lib can build), located like every other
    problem of an op YAML: `file:line: entry i: message`."""
    return _bad(f"{entry.source}:{entry.line}", entry.index, message)


def _bad(where: str, index: int, message: str) -> OpYamlError:
    """An entry's problem, located as `file:line: entry i:`."""
    return OpYamlError(f"{where}: entry {index}: {message}")


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where present: 5x faster


def _refuse_aliases(path: str, root: yaml.Node) -> None:
    """An op list never needs an alias (`*name`), and aliases are how a small file expands into a huge one (the
    billion-laughs file): the composed graph must be a tree. Stops at the first node reached twice."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            raise OpYamlError(
                f"{path}:{node.start_mark.line + 1}: the value anchored here is used again through a YAML alias "
                "(*name); aliases are not allowed in an op YAML: write the entry out"
            )
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            todo.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            todo.extend(part for pair in node.value for part in pair)


def _read_text(path: str) -> str:
    """The file's text, refused (as OpYamlError) when it is not a readable regular file of at most
    MAX_OP_YAML_BYTES, or not UTF-8."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise OpYamlError(f"{path}: is a directory; pass the path of an op YAML file")
        if info.st_size > MAX_OP_YAML_BYTES:
            raise OpYamlError(
                f"{path}: {info.st_size} bytes is over the {MAX_OP_YAML_BYTES}-byte limit for an op YAML; "
                "split it into several files"
            )
        with open(path, "rb") as f:
            data = f.read(MAX_OP_YAML_BYTES + 1)
    except OSError as exc:
        raise OpYamlError(
            f"{path}: cannot read it ({exc.strerror}); pass the path of a readable op YAML file"
        ) from None
    if len(data) > MAX_OP_YAML_BYTES:
        raise OpYamlError(f"{path}: more than {MAX_OP_YAML_BYTES} bytes; an op YAML is a short list of entries")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OpYamlError(f"{path}: byte {exc.start} is not UTF-8 ({exc.reason}); save the file as UTF-8") from None


def _parse(path: str) -> tuple[object, list[int]]:
    """The file's one document, and the line of each top-level entry (1-based; empty when not a list)."""
    loader = _Loader(_read_text(path))
    try:
        node = loader.get_single_node()
        if node is not None:
            _refuse_aliases(path, node)
        data = loader.construct_document(node) if node is not None else []
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        raise OpYamlError(
            f"{path}{line}: not valid op YAML: {exc.problem or exc.context}; an op YAML is one plain list of "
            "`- func: ...` entries (spaces, not tabs; no tags)"
        ) from None
    finally:
        loader.dispose()
    lines = [item.start_mark.line + 1 for item in node.value] if isinstance(node, yaml.SequenceNode) else []
    return data, lines


def _refuse_duplicates(path: str, entries: tuple[OpEntry, ...], lines: list[int]) -> None:
    """A (op, kernel key) registered twice is refused, as linking two libs that register it is: the second entry
    would silently replace the first."""
    first: dict[tuple[str, str], int] = {}
    for entry in entries:
        for kernel in entry.kernels:
            seen = first.setdefault((entry.name, kernel.key), entry.index)
            if seen != entry.index or sum(k.key == kernel.key for k in entry.kernels) > 1:
                key = kernel.key or "null (fallback)"
                raise _bad(
                    f"{path}:{lines[entry.index]}",
                    entry.index,
                    f"Re-registering {entry.name} with kernel key {key}: entry {seen} (line {lines[seen]}) already "
                    "registers it; keep one of the two",
                )


def _kernel_entries(where: str, index: int, kernels: object) -> tuple[KernelEntry, ...]:
    if not isinstance(kernels, list) or not kernels:
        raise _bad(where, index, f"'kernels' must be a non-empty list of {{arg_meta, kernel_name}}, got {kernels!r}")
    found = []
    for k, kernel in enumerate(kernels):
        if not isinstance(kernel, dict):
            raise _bad(where, index, f"kernels[{k}] must be a mapping with keys {', '.join(KERNEL_KEYS)}")
        unknown = sorted(set(kernel) - set(KERNEL_KEYS))
        if unknown:
            raise _bad(where, index, f"kernels[{k}]: unknown key {unknown[0]!r}. Valid keys: {', '.join(KERNEL_KEYS)}")
        if not isinstance(kernel.get("kernel_name"), str):
            raise _bad(where, index, f"kernels[{k}]: key 'kernel_name' is missing or not a string")
        arg_meta = kernel.get("arg_meta")
        if arg_meta is not None and not isinstance(arg_meta, str):
            raise _bad(
                where,
                index,
                f"kernels[{k}]: key 'arg_meta' must be null (fallback) or a kernel-key string "
                f"like 'v1/6;0,1|6;0,1', got {arg_meta!r}",
            )
        found.append(KernelEntry(arg_meta or "", kernel["kernel_name"]))
    return tuple(found)


def _entry(path: str, index: int, raw: object, line: int) -> OpEntry:
    where = f"{path}:{line}"
    if not isinstance(raw, dict):
        raise _bad(where, index, f"expected a mapping with keys {', '.join(ENTRY_KEYS)}, got {raw!r}")
    unknown = sorted(set(raw) - set(ENTRY_KEYS))
    if unknown:
        raise _bad(where, index, f"unknown key {unknown[0]!r}. Valid keys: {', '.join(ENTRY_KEYS)}")
    if ("func" in raw) == ("op" in raw):
        raise _bad(where, index, "exactly one of key 'func' (a full schema) or key 'op' (an ATen op name) is needed")
    if "op" in raw:
        name = f"aten::{raw['op']}"
        func = native_schema(name)
        if func is None:
            raise _bad(
                where,
                index,
                f"key 'op': {raw['op']!r} is not in ATen's native_functions.yaml; "
                "use 'func:' with a full schema for a custom op",
            )
    else:
        namespace, func = split_namespace(str(raw["func"]))
        name = runtime_name(namespace, func)
    try:
        parse_schema(func)
    except Exception as exc:  # torchgen raises AssertionError / RuntimeError on a bad schema
        raise _bad(where, index, f"key 'func': cannot parse schema {func!r}: {exc}") from None
    return OpEntry(name, func, _kernel_entries(where, index, raw.get("kernels")), path, index, line)


@functools.cache
def load_ops_yaml(path: str) -> tuple[OpEntry, ...]:
    """Load and validate an op YAML file (cached by path): every problem, from an unreadable file to a duplicate
    registration, is an OpYamlError naming the file, the line and the fix."""
    raw, lines = _parse(path)
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise OpYamlError(f"{path}: the top level must be a list of op entries, got {type(raw).__name__}")
    entries = tuple(_entry(path, i, item, lines[i]) for i, item in enumerate(raw))
    _refuse_duplicates(path, entries, lines)
    return entries
