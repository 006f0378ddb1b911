"""The other strategies' placements of a program, told as changes to its `executorch` placement (a report.Rewrite)
instead of built: the report's strategy comparison counts their copies, bytes and device peak without copying the
graph or running the pass again.

`executorch`, `dedupe` and `peer` insert the same copies but for two rules (placement/place.py): `dedupe` keeps one
H2D per (value, device), the first, read by every user of the others; `peer` turns each H2D of a D2H whose value
lives on another device of the same type, with peer access, into a direct D2D in its place, and drops a D2H left
unread. Where `executorch` refuses a program, the others are placed for real (`dedupe` may accept it).
"""

from __future__ import annotations

from collections.abc import Callable

from torch import fx

from ..devices import Device
from ..lowering.nodes import device_of, is_d2h, is_h2d, node_arg
from ..names import Direction
from .report import Rewrite


def dedupe_rewrite(executorch: fx.GraphModule) -> Rewrite:
    """`dedupe`'s placement: of the H2D copies of one value to one device, the first stays and serves all."""
    rewrite = Rewrite()
    first: dict[tuple[fx.Node, Device], fx.Node] = {}
    for node in executorch.graph.nodes:
        if is_h2d(node):
            kept = first.setdefault((node_arg(node), device_of(node)), node)
            if kept is not node:
                rewrite.removed.add(node)
                rewrite.users.setdefault(kept, set(kept.users)).update(node.users)
    return rewrite


def peer_rewrite(executorch: fx.GraphModule, peer_access: Callable[[Device, Device], bool]) -> Rewrite:
    """`peer`'s placement: each cross-device host hop with peer access is one direct copy where its H2D stood."""
    rewrite = Rewrite()
    for node in executorch.graph.nodes:
        if not (is_h2d(node) and is_d2h(hop := node_arg(node))):
            continue
        source = node_arg(hop)
        src, dst = device_of(source), device_of(node)
        if src.is_cpu or src.type != dst.type or not peer_access(src, dst):
            continue
        rewrite.kinds[node] = Direction.D2D
        rewrite.users.setdefault(source, set(source.users)).add(node)
        readers = rewrite.users.setdefault(hop, set(hop.users))
        readers.discard(node)
        if not readers:
            rewrite.removed.add(hop)
            rewrite.users[source].discard(hop)
    return rewrite
