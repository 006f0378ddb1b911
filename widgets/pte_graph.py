"""An ExecuTorch program (`PteProgram`) as the graph view's data: its instructions (kernels, delegate calls, the
et_copy copies, control flow) as nodes, its inputs, constants and outputs as nodes too, and a value as an edge from
the node that writes it to each node that reads it. A value is written by the first instruction that uses it (an
ExecuTorch program is emitted in topological order; inputs and constants are written before the first instruction).
Devices as ExecuTorch placed them: a copy on the device it writes, a delegate on its target device, a kernel on its
out tensor's. Pure functions, no widget (docs/explorer.md, "A .pte in the explorer")."""

from __future__ import annotations

from typing import Any

from devcopy_lib.names import COPY_OP_BY_NAME, format_bytes

from .graph_inspector import DTYPE_SHORT


def _tensor(value: Any) -> str:
    """`f32[2,3]` for a tensor value, '' otherwise."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return ""
    name = str(dtype).removeprefix("torch.")
    return f"{DTYPE_SHORT.get(name, name)}[{','.join(str(s) for s in value.sizes)}]"


def _short(name: str) -> str:
    """`aten::sin.out` -> `sin`, `et_copy::_h2d_copy.out` -> `h2d_copy`, `delegate_0` as it is."""
    return name.rpartition("::")[2].partition(".")[0].strip("_") or name


def _node(node_id: str, kind: str, op: str, device: str, label: str, nbytes: int, rows: list[Any]) -> dict[str, Any]:
    """A node as the graph view takes it (the fields graph_view_data gives a placed graph's nodes)."""
    return {
        "id": node_id,
        "label": label.rstrip(),
        "kind": kind,
        "op": op,
        "device": device,
        "module": "",
        "reason": "",
        "bytes": nbytes,
        "bytes_text": format_bytes(nbytes),
        "predicted_s": None,
        "predicted_text": "",
        "users": [],
        "inputs": [],
        "shape": "",
        "rows": rows,
        "what_if": False,
    }


def _value_row(p: Any, how: str, index: int) -> list[str]:
    """`["reads v1", "f32[2,3] cpu 24 B at 64 in buffer 1"]`: a value an instruction uses, and where it lives."""
    v = p.values[index]
    where = f" at {v.offset} in buffer {v.mem_id}" if getattr(v, "mem_id", None) is not None else ""
    return [f"{how} v{index}", f"{_tensor(v)} {v.device} {format_bytes(v.nbytes)}{where}"]


def _value_node(p: Any, node_id: str, kind: str, index: int) -> dict[str, Any]:
    """An input, constant or output: a node standing for value `index`."""
    v = p.values[index]
    device, nbytes = str(getattr(v, "device", "cpu")), getattr(v, "nbytes", 0)
    return _node(node_id, kind, node_id.rpartition("_")[0], device, f"{node_id}\n{_tensor(v)}", nbytes, [])


def _instruction_node(p: Any, position: int, reads: list[int], writes: list[int]) -> dict[str, Any]:
    """Instruction `position`: a copy (kind h2d / d2h / d2d) on the device it writes, a delegate on its target
    device, a kernel (`cpu_op`) on its out's device, control flow by its kind."""
    name, ins = p.instruction_name(position), p.instructions[position]
    copy = COPY_OP_BY_NAME.get(name)
    out = p.values[writes[-1]] if writes else None
    delegate = p.delegates[ins.delegate] if ins.kind == "delegate" else None
    kind = copy.direction.value if copy else "cpu_op" if ins.kind == "kernel" else ins.kind
    device = str(delegate.device or "cpu") if delegate else str(getattr(out, "device", "cpu"))
    nbytes = sum(p.values[i].nbytes for i in writes)
    short = _short(name)
    label = (
        f"{kind.upper()} #{position}\n{_tensor(out)} {format_bytes(nbytes)}"
        if copy
        else f"#{position} {short}\n{_tensor(out)}"
    )
    rows = [["instruction", f"#{position} {name}"], ["device", device]]
    rows += [["backend", delegate.backend_id]] if delegate else []
    rows += [_value_row(p, "reads", i) for i in reads] + [_value_row(p, "writes", i) for i in writes]
    return _node(f"i{position}_{short}", kind, name, device, label, nbytes, rows)


def pte_graph_elements(p: Any) -> tuple[list[dict[str, Any]], list[tuple[str, str]], dict[int, str]]:
    """(nodes, edges (src, dst), value index -> the id of the node that writes it) of program `p`."""
    nodes = [_value_node(p, f"input_{k}", "input", index) for k, index in enumerate(p.inputs)]
    writer = {index: f"input_{k}" for k, index in enumerate(p.inputs)}
    for position in range(len(p.instructions)):
        used = p.uses(position)
        for index in used:  # a constant: a node of its own, before its first reader
            if index not in writer and getattr(p.values[index], "constant", False):
                nodes.append(_value_node(p, f"const_v{index}", "input", index))
                writer[index] = nodes[-1]["id"]
        reads = [i for i in used if i in writer]
        node = _instruction_node(p, position, reads, [i for i in used if i not in writer])
        node["inputs"] = list(dict.fromkeys(writer[i] for i in reads))
        nodes.append(node)
        writer.update({i: node["id"] for i in used if i not in writer})
    for k, index in enumerate(p.outputs):
        nodes.append(_value_node(p, f"output_{k}", "output", index))
        nodes[-1]["inputs"] = [writer[index]] if index in writer else []
    by_id = {n["id"]: n for n in nodes}
    edges = [(src, n["id"]) for n in nodes for src in n["inputs"]]
    for src, dst in edges:
        by_id[src]["users"].append(dst)
    for n in nodes:
        if not n["rows"]:  # inputs, constants, outputs: their value
            n["rows"] = [["device", n["device"]], ["bytes", n["bytes_text"]]]
        # as graph_view_data gives a placed graph's: tuples, so both views hold the same kinds of values
        n["rows"], n["users"], n["inputs"] = tuple(map(tuple, n["rows"])), tuple(n["users"]), tuple(n["inputs"])
    return nodes, edges, writer
