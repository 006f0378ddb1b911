"""Resident buffers (beyond ExecuTorch, docs/differences.md): a mutable buffer - program state such as a KV cache
updated in place - kept in device memory for the method's whole life instead of on the host.

ExecuTorch plans a mutable buffer in host memory and runs its update (`index_put`, `index_copy`: not delegated) on the
CPU, so every delegate that reads it gets an H2D of the whole buffer on every call, and the new values it computes
come back with a D2H first: a decode step moves its KV cache across the link once per token. With
`resident_buffers=True` the placement instead, before ExecuTorch's pass runs:

- tags the buffer's constant node with the device of the delegates that read it (`meta["device"]`, `meta[RESIDENT]`):
  emit plans it in that device's arena for the whole program and loading copies its initial value there once;
- moves every CPU op that updates the buffer or views it (`index_put`, `index_copy`, `slice_scatter`, `expand`,
  `view`, ...: roles.WRITES and roles.CARRIES), directly or through such values, to that device, each as a one-op
  delegate named `update_<op>`; an update that writes the buffer's new value over its old one
  (`index_put`, `index_copy`, read by nothing else) runs in place on the buffer's own memory (`Delegate.in_place`),
  so the functionalised write-back `copy_(buffer, new)` has nothing left to copy; any other write-back runs on the
  device (emit: an on-device copy);
- leaves a buffer where ExecuTorch puts it, with the reason, when a CPU op computes from it (an op the delegate set
  leaves on the CPU: delegating it is the user's choice, not the placement's), when the program returns it, when its new
  value is computed on the CPU from other values, when no device delegate touches it, or when delegates on several
  devices read it.

The pass that follows then places copies as usual: none for the buffer (it is on the device already), an H2D for
each CPU value an update reads (a position), none between delegates on one device.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import torch
from torch import fx
from torch.fx._lazy_graph_module import _LazyGraphModule

from ..devices import Device
from ..lowering.delegate import Delegate, delegate_of
from ..lowering.edge_form import WRITE_BACK
from ..lowering.nodes import call_device
from ..lowering.ops import overload_name
from .hoist import mutable
from .roles import CARRIES, WRITES

RESIDENT = "resident"  # node.meta key on a buffer's constant node: it lives on its device for the method's life
UPDATE_PREFIX = "update_"  # the delegates resident_buffers makes of the ops that update a buffer


@dataclass(frozen=True)
class BufferPlacement:
    """Where one mutable buffer lives: `node` (its constant node in the placed graph), `bytes`, `device` (where it
    lives after placement), `resident` (kept on the device by resident_buffers), `reason` (why, in words) and `name`
    (the model's name for it, `Method.buffers()`'s key; the node's when unknown)."""

    node: str
    bytes: int
    device: str
    resident: bool
    reason: str
    name: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _nbytes(node: fx.Node) -> int:
    val = node.meta.get("val")
    return int(val.numel() * val.element_size()) if isinstance(val, torch.Tensor) else 0


def _why_host_only(node: fx.Node) -> str:
    """Why a CPU op reading the buffer keeps it on the host; empty when the op moves with it: an update of the
    buffer (`index_put`, `index_copy`, `slice_scatter`, ...) or a view or cast of it (roles.CARRIES), with one
    tensor result. Computation stays where the delegate set puts it: delegating the op is the user's choice."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return f"{node.name} ({target}) is not an ATen operator"
    if target.overloadpacket not in CARRIES | WRITES:
        name = overload_name(target)
        return (
            f"{node.name} ({name}) computes from it on the CPU (resident_buffers moves only a buffer's updates and "
            f"views; delegate {name} to run it on the device)"
        )
    if not isinstance(node.meta.get("val"), torch.Tensor):
        return f"{node.name} ({overload_name(target)}) does not compute one tensor"
    return ""


def _in_place_variant(node: fx.Node) -> torch._ops.OpOverload | None:
    """`aten.index_put_.default` for `aten.index_put.default` (likewise index_copy): the op writing its first
    argument in place, with the same arguments; None when the op has none."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target.overloadpacket not in (
        torch.ops.aten.index_put,
        torch.ops.aten.index_copy,
    ):
        return None
    packet = getattr(torch.ops.aten, f"{target.overloadpacket.__name__}_")
    overload: torch._ops.OpOverload = getattr(packet, target._overloadname)
    return overload


def _plan_buffer(buffer: fx.Node) -> tuple[Device | None, list[fx.Node], str]:
    """(device, the CPU ops to move there in graph order, reason): the device is None when the buffer stays."""
    write_backs = [u for u in buffer.users if u.target is WRITE_BACK and u.args[0] is buffer]
    chain: dict[fx.Node, None] = {}
    devices: set[Device] = set()
    stack = [u for u in buffer.users if u not in write_backs]
    while stack:
        node = stack.pop()
        if node in chain:
            continue
        device = call_device(node)
        if device is not None:
            devices.add(device)
        elif delegate_of(node) is not None:
            return None, [], f"delegate {node.target} reads it and runs on the CPU"
        elif node.op == "output":
            return None, [], "the program returns it (or a value computed from it): it would cross every call"
        elif node.target is WRITE_BACK:
            if node.args[0] is not buffer:
                return None, [], f"{node.name} writes it into another buffer or input ({node.args[0]})"
        else:
            why = _why_host_only(node)
            if why:
                return None, [], why
            chain[node] = None
            stack.extend(node.users)
    for write in write_backs:
        value = write.args[1]
        if not isinstance(value, fx.Node):
            return None, [], f"{write.name} writes a non-tensor value into it"
        source = value.args[0] if value.op == "call_function" and value.target is operator.getitem else None
        device = call_device(source) if isinstance(source, fx.Node) else None
        if device is not None:
            devices.add(device)
        elif value not in chain:
            return None, [], f"its new value ({value.name}) is computed on the CPU from other values, not from it"
    if not devices:
        return None, [], "no device delegate reads or writes it: it never crosses"
    if len(devices) > 1:
        return None, [], f"delegates on {', '.join(sorted(map(str, devices)))} read it: it cannot live on one"
    order = {n: i for i, n in enumerate(buffer.graph.nodes)}
    return devices.pop(), sorted(chain, key=order.__getitem__), ""


def _to_delegate(gm: fx.GraphModule, node: fx.Node, device: Device, in_place: torch._ops.OpOverload | None) -> None:
    """Replace CPU op `node` by a one-op delegate on `device` (`update_<node>`) and its getitem (`<node>_resident`);
    with `in_place`, the delegate runs that op on its first input's memory and returns it (`Delegate.in_place`)."""
    inputs = list(dict.fromkeys(node.all_input_nodes))
    sub = fx.Graph()
    env = {}
    for arg in inputs:
        env[arg] = sub.placeholder(arg.name)
        env[arg].meta = dict(arg.meta)
    inner = sub.node_copy(node, env.__getitem__)
    if in_place is not None:
        inner.target = in_place
    sub.output((inner,))
    name = f"{UPDATE_PREFIX}{node.name}"
    ops = (overload_name(inner.target) or str(inner.target),)
    delegate = Delegate(
        name,
        _LazyGraphModule(torch.nn.Module(), sub, class_name="DelegateGraph"),
        device,
        {},
        ops,
        tuple(a.name for a in inputs),
        {0: 0} if in_place is not None else None,
    )
    gm.add_module(name, delegate)
    with gm.graph.inserting_before(node):
        call = gm.graph.call_module(name, tuple(inputs))
        call.meta["val"] = (node.meta.get("val"),)
        item = gm.graph.create_node("call_function", operator.getitem, (call, 0), name=f"{node.name}_resident")
        item.meta["val"] = node.meta.get("val")
    node.replace_all_uses_with(item)
    gm.graph.erase_node(node)


def make_resident(
    gm: fx.GraphModule, apply: bool = True, names: Mapping[str, str] | None = None
) -> list[BufferPlacement]:
    """Keep every mutable buffer of the lowered graph `gm` that can live on a device there (in place: run before the
    placement pass); returns where each mutable buffer lives and why. With `apply=False` nothing changes and each
    buffer that could be resident says so (what a report of ExecuTorch's placement suggests). `names`: a buffer's
    constant node -> the model's name for it (the exported program's `inputs_to_buffers`)."""
    placements = []
    for buffer in [n for n in gm.graph.nodes if n.op == "get_attr" and mutable(n)]:
        nbytes = _nbytes(buffer)
        name = (names or {}).get(str(buffer.target), buffer.name)
        device, chain, reason = _plan_buffer(buffer)
        if device is None:
            placements.append(BufferPlacement(buffer.name, nbytes, "cpu", False, f"stays on the CPU: {reason}", name))
            continue
        if not apply:
            why = f"on the CPU, where ExecuTorch plans it (resident_buffers=True would keep it on {device})"
            placements.append(BufferPlacement(buffer.name, nbytes, "cpu", False, why, name))
            continue
        write_backs = [u for u in buffer.users if u.target is WRITE_BACK and u.args[0] is buffer]
        first = chain[0] if chain else None
        # the update writes the buffer's new value over its old one when it is the buffer's only reader and the
        # value written back: then it can run on the buffer's own memory
        only_update = first is not None and set(buffer.users) == {first, *write_backs}
        in_place = (
            _in_place_variant(first)
            if first is not None
            and only_update
            and first.args[0] is buffer
            and all(w.args[1] is first for w in write_backs)
            else None
        )
        for node in chain:
            _to_delegate(gm, node, device, in_place if node is first else None)
        buffer.meta["device"] = device
        buffer.meta[RESIDENT] = True
        for write in write_backs:
            write.meta["device"] = device
        how = (
            "updated in place on the device"
            if in_place is not None
            else f"updated on the device ({len(chain)} op(s) moved there)"
            if chain
            else "written by a delegate on the device"
        )
        placements.append(
            BufferPlacement(
                buffer.name,
                nbytes,
                str(device),
                True,
                f"resident on {device}: copied there once at load, {how}, never copied per call",
                name,
            )
        )
    if apply and placements:
        gm.recompile()
    return placements
