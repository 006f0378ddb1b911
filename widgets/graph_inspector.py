"""What the graph view's inspector says about one node, as (label, text) rows the browser renders as they come.

A copy: its value, shape, dtype, bytes, the devices it goes between, the op that is not delegated (or the method
boundary) that makes it necessary, and what delegating that op would save, found by placing again with the op
delegated (`what_if_texts`, asked for one copy at a time on the explorer's "what if?" button: a re-placement with a
new delegate set lowers again, seconds on a 96-layer model).
A delegate: its ops, the bytes it reads and writes, its device. Pure functions over a placed graph
(docs/explorer.md, "The inspector").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devcopy_lib import delegate_of, delegate_source, node_kind, overload_name
from devcopy_lib.names import DIRECTIONS, Direction, Strategy, format_bytes

# Short dtype names for node labels (`f32[1,64,768]`), as torch.fx prints them.
DTYPE_SHORT = {
    "float32": "f32",
    "float64": "f64",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint8": "u8",
    "bool": "b8",
    "complex64": "c64",
}
MAX_WHAT_IFS = 3  # distinct not-delegated ops tried per copy (each is one re-placement)
# the what-if row until asked for: each change is one re-placement (seconds on a big model), so the explorer computes
# it on its "what if?" button, not on a click on the copy
PENDING = "press 'what if?' under the graph (places the program again with each change)"
WHAT_IF_LABEL = "what if"
INPUT_SWITCH, OUTPUT_SWITCH = "skip_h2d_for_method_inputs", "skip_d2h_for_method_outputs"
PEER = Strategy.PEER.value
WORDING = {"delegate": "delegate {}", "switch": "{}=True", "strategy": "strategy {}"}  # how each change is named


def dtype_name(value: Any) -> str:
    """`float32` for a tensor of that dtype, '' for anything else."""
    dtype = getattr(value, "dtype", None)
    return "" if dtype is None else str(dtype).removeprefix("torch.")


def shape_text(value: Any) -> str:
    """`[1, 64, 768]` for a tensor (symbolic sizes by name), '' for anything else."""
    shape = getattr(value, "shape", None)
    return "" if shape is None or not dtype_name(value) else "[" + ", ".join(str(s) for s in shape) + "]"


def tensor_text(value: Any) -> str:
    """The short form a node label shows: `f32[1,64,768]`; '' for a non-tensor (a delegate's tuple)."""
    dtype = dtype_name(value)
    return f"{DTYPE_SHORT.get(dtype, dtype)}{shape_text(value).replace(' ', '')}" if dtype else ""


@dataclass
class Cause:
    """Why a copy exists, in words, and the changes that could remove it: `{"delegate": op}` (add the op to the
    delegated set), `{"switch": name}` (turn a placement switch on) or `{"strategy": name}` (place with another)."""

    text: str
    what_ifs: list[dict[str, str]] = field(default_factory=list)


def _op_name(node: Any) -> str:
    return overload_name(node.target) or str(node.target)


def _producer(value: Any) -> Any:
    """The node that computed `value`: through the getitem of a multi-output CPU op to that op."""
    if node_kind(value) == "getitem" and delegate_source(value) is None:
        return value.args[0]
    return value


def _ops_text(nodes: Any) -> str:
    return ", ".join(f"{_op_name(n)} ({n.name})" for n in nodes)


def _h2d_cause(copy: Any, source: Any, devices: Mapping[str, str]) -> Cause:
    readers = ", ".join(u.name for u in copy.users)
    producer, target = _producer(source), devices[copy.name]
    if producer.op == "placeholder":
        return Cause(
            f"method boundary: {source.name} is a program input, which the caller passes on the CPU; "
            f"{readers} on {target} reads it",
            [{"switch": INPUT_SWITCH}],
        )
    if producer.op == "get_attr":
        return Cause(
            f"{source.name} is program state (a buffer the program writes) kept on the CPU; {readers} reads it"
        )
    kind = node_kind(producer)
    if kind in DIRECTIONS:
        origin = producer.args[0]
        return Cause(
            f"{origin.name} crosses from {devices[origin.name]} to {target} through the host ({source.name} brought "
            "it to the CPU); the peer strategy copies it directly",
            [{"strategy": PEER}],
        )
    if kind == "cpu_op":
        return Cause(
            f"{_ops_text([producer])} is not delegated: it runs on the CPU, so its output goes to {target} "
            f"for {readers}",
            [{"delegate": _op_name(producer)}],
        )
    return Cause(f"{source.name} is made on {devices[source.name]} and {readers} on {target} reads it")


def _d2h_cause(copy: Any, source: Any, devices: Mapping[str, str]) -> Cause:
    cpu_users = [u for u in copy.users if node_kind(u) == "cpu_op"]
    made = f"{source.name} (made on {devices[source.name]})"
    parts, what_ifs = [], []
    if cpu_users:
        one = len(cpu_users) == 1
        parts.append(
            f"{_ops_text(cpu_users)} {'is' if one else 'are'} not delegated: {'it runs' if one else 'they run'} on "
            f"the CPU and read{'s' if one else ''} {made}"
        )
        ops = dict.fromkeys(_op_name(u) for u in cpu_users)
        what_ifs += [{"delegate": op} for op in list(ops)[:MAX_WHAT_IFS]]
    if any(u.op == "output" for u in copy.users):
        parts.append(f"method boundary: the program returns {made}, and a method output is handed back on the CPU")
        what_ifs.append({"switch": OUTPUT_SWITCH})
    hops = [u.name for u in copy.users if node_kind(u) in DIRECTIONS]
    if hops:
        parts.append(f"{made} goes on to another device through the host ({', '.join(hops)})")
        what_ifs.append({"strategy": PEER})
    readers = ", ".join(u.name for u in copy.users)
    return Cause("; ".join(parts) or f"{readers} reads {made} on the CPU", what_ifs)


def copy_cause(copy: Any, devices: Mapping[str, str]) -> Cause:
    """Why the copy node `copy` of a placed graph is there; `devices`: node name -> device string."""
    source, kind = copy.args[0], node_kind(copy)
    if kind == Direction.H2D:
        return _h2d_cause(copy, source, devices)
    if kind == Direction.D2H:
        return _d2h_cause(copy, source, devices)
    return Cause(
        f"{source.name} is made on {devices[source.name]} and read on {devices[copy.name]}: delegates on two "
        "devices, copied directly (peer)"
    )


def _bytes_of(names: Any, nbytes: Mapping[str, int]) -> str:
    names = list(names)
    total = sum(nbytes[n] for n in names)
    return f"{len(names)} value{'s' if len(names) != 1 else ''}, {format_bytes(total)}"


def _delegate_rows(node: Any, nbytes: Mapping[str, int]) -> list[list[str]]:
    delegate = delegate_of(node)
    assert delegate is not None  # only called for delegate nodes
    ops = Counter(delegate.ops)
    listed = ", ".join(f"{op} x{count}" if count > 1 else op for op, count in ops.items())
    constants = sum(t.numel() * t.element_size() for t in delegate.constants.values())
    return [
        ["device", str(delegate.target_device or "cpu (no target device)")],
        ["ops", f"{len(delegate.ops)}: {listed}"],
        ["reads", _bytes_of((i.name for i in node.all_input_nodes), nbytes)],
        ["writes", _bytes_of((u.name for u in node.users), nbytes)],
        [
            "constants",
            f"{len(delegate.constants)}, {format_bytes(constants)} (on the device from load)" if constants else "none",
        ],
    ]


def _copy_rows(node: Any, shown: Mapping[str, Any], cause: Cause, devices: Mapping[str, str]) -> list[list[str]]:
    source = node.args[0]
    producer = _producer(source)
    made_by = f" ({_op_name(producer)})" if node_kind(producer) == "cpu_op" else ""
    value = source
    if node_kind(source) in DIRECTIONS:  # the second half of a host hop
        made_by, value = f" (through {source.name})", source.args[0]
    return [
        ["value", f"{value.name}{made_by}"],
        ["from", f"{devices[source.name]} ({source.name})"],
        ["to", f"{devices[node.name]} ({', '.join(u.name for u in node.users)})"],
        ["why", cause.text],
        *([[WHAT_IF_LABEL, PENDING]] if cause.what_ifs else []),
        ["predicted", shown["predicted_text"]],
    ]


def node_rows(
    node: Any, shown: Mapping[str, Any], devices: Mapping[str, str], nbytes: Mapping[str, int]
) -> tuple[tuple[tuple[str, str], ...], tuple[dict[str, str], ...]]:
    """The inspector's rows for fx node `node`, whose view dict is `shown`, and the changes that could remove it
    when it is a copy (`Cause.what_ifs`); `devices` and `nbytes`: node name -> device string and value bytes.
    Tuples: a view keeps thousands of these, and tuples of strings are left out of Python's cyclic collection."""
    value = node.meta.get("val")
    kind = shown["kind"]
    head = [["op", shown["op"]], ["kind", kind]] if kind != "delegate" else [["kind", kind]]
    tensor = [["shape", shape_text(value)], ["dtype", dtype_name(value)]]
    cause = copy_cause(node, devices) if kind in DIRECTIONS else Cause("")
    if kind == "delegate":
        rows = head + _delegate_rows(node, nbytes)
    elif kind in DIRECTIONS:
        rows = head + tensor + [["bytes", shown["bytes_text"]], *_copy_rows(node, shown, cause, devices)]
    else:
        rows = head + [
            ["device", shown["device"]],
            *tensor,
            ["bytes", shown["bytes_text"] if nbytes[node.name] else ""],
        ]
    branch = [["branch", shown["branch"]]] if shown.get("branch") else []  # control flow (docs/explorer.md)
    module = ["module", shown["module"] or "(the model itself)"]
    every = [*rows, *branch, module, ["reason", shown["reason"]]]
    return tuple(map(tuple, every)), tuple(cause.what_ifs)


def change_text(before: Any, after: Any) -> str:
    """What one placement report saves against another: `saves 3 H2D and 2 D2H (520 B less per call)`."""
    saved = {d: before.copies.get(d, 0) - after.copies.get(d, 0) for d in DIRECTIONS}
    fewer = [f"{n} {d.upper()}" for d, n in saved.items() if n > 0]
    more = [f"{-n} {d.upper()}" for d, n in saved.items() if n < 0]
    nbytes = sum(before.copy_bytes.values()) - sum(after.copy_bytes.values())
    if not (fewer or more or nbytes):
        return "saves no copy"
    words = ([f"saves {' and '.join(fewer)}"] if fewer else []) + ([f"adds {' and '.join(more)}"] if more else [])
    size = f"{format_bytes(abs(nbytes))} {'less' if nbytes > 0 else 'more'}" if nbytes else "same bytes"
    return f"{', '.join(words) or 'same copies'} ({size} per call)"


def _what_if_text(what: Mapping[str, str], before: Any, report_for: Callable[[Mapping[str, str]], Any]) -> str:
    ((key, value),) = what.items()
    change = WORDING[key].format(value)
    try:
        after = report_for(what)
    except Exception as exc:  # the change itself may be refused (a placement error): say so in the row
        return f"{change}: refused ({type(exc).__name__}: {exc})"
    return f"{change}: {change_text(before, after)}"


def what_if_texts(changes: Any, before: Any, report_for: Callable[[Mapping[str, str]], Any]) -> list[list[str]]:
    """The what-if rows alone, one per change in `changes` (a node's `what_if`): `report_for(change)` places the
    program again with that change; its report is compared with `before`."""
    return [[WHAT_IF_LABEL, _what_if_text(change, before, report_for)] for change in changes]


def what_if_rows(
    shown: Mapping[str, Any], before: Any, report_for: Callable[[Mapping[str, str]], Any]
) -> list[list[str]]:
    """`shown`'s rows with its pending what-if row replaced by what each of its changes (`shown["what_if"]`) gives
    (`what_if_texts`)."""
    texts = what_if_texts(shown["what_if"], before, report_for)
    rows = [list(row) for row in shown["rows"] if row[0] != WHAT_IF_LABEL]
    at = next((i for i, row in enumerate(rows) if row[0] == "predicted"), len(rows))
    return rows[:at] + texts + rows[at:]
