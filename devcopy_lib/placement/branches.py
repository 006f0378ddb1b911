"""Control flow in a placement report: for each `torch.cond`, map and scan of a placed graph, its branches, the
copies each branch needs and the branch the example inputs take (docs/semantics.md §5c).

ExecuTorch partitions top-level ops only, so a construct and its branches run on the CPU: no branch holds a copy of
its own. What a call taking a branch copies because of the construct is around it - its operands copied back from a
device (a D2H feeding it) and its results copied into the next delegate (an H2D reading them) - the same for every
branch. Which branch the example inputs take is found by running the placed graph once on them (CPU tensors; a
delegate runs as its CPU graph), only when the graph has control flow.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

from ..lowering.nodes import node_kind
from ..names import Direction

CONSTRUCT = {"cond": "torch.cond", "map_impl": "control_flow.map", "scan": "torch.scan"}


def _flow(gm: fx.GraphModule) -> list[fx.Node]:
    return [
        n for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator)
    ]


def _ops(module: Any) -> int:
    """The ops a branch runs (nested constructs' branches included)."""
    if not isinstance(module, fx.GraphModule):
        return 0
    count = 0
    for node in module.graph.nodes:
        if node.op == "call_function" and node.target is not operator.getitem:
            count += 1
        elif node.op == "get_attr":
            count += _ops(getattr(module, str(node.target), None))
    return count


def _taken(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> dict[str, Any]:
    """node name -> the branch the example inputs take (a cond: `true` / `false`; a loop: its iteration count);
    empty when the graph cannot run eagerly on them."""
    seen: dict[str, Any] = {}

    class Watch(fx.Interpreter):
        def run_node(self, n: fx.Node) -> Any:
            if n in flow:
                args = self.fetch_args_kwargs_from_env(n)[0]
                if n.target.name() == "cond":  # type: ignore[union-attr]
                    pred = args[0]
                    seen[n.name] = "true" if bool(pred.all() if isinstance(pred, torch.Tensor) else pred) else "false"
                else:
                    xs = args[1] if n.target.name() == "map_impl" else args[2]  # type: ignore[union-attr]
                    seen[n.name] = int(xs[0].shape[0]) if xs else 0
            return super().run_node(n)

    flow = set(_flow(gm))
    try:
        with torch.no_grad():
            Watch(gm).run(*example_inputs)
    except Exception:  # noqa: BLE001 - the report still says what each branch needs
        return {}
    return seen


def control_flow_summary(gm: fx.GraphModule, example_inputs: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Per construct: `{node, construct, branches: {label: {ops, copies}}, around: {d2h, h2d}, example}`; `copies`
    is by direction what a call taking that branch copies because of the construct, `example` the branch the
    example inputs take (a loop: `body` and `iterations`)."""
    flow = _flow(gm)
    if not flow:
        return []
    taken = _taken(gm, example_inputs)
    rows = []
    for node in flow:
        name = node.target.name()  # type: ignore[union-attr]
        modules = [a for a in node.args if isinstance(a, fx.Node) and a.op == "get_attr"]
        labels = ["true", "false"] if name == "cond" else ["body"]
        d2h = sum(node_kind(a) == Direction.D2H for a in node.all_input_nodes)
        readers = [u for g in node.users for u in (g.users if g.target is operator.getitem else [g])]
        h2d = sum(node_kind(u) == Direction.H2D for u in readers)
        around = {Direction.H2D: h2d, Direction.D2H: d2h}
        branches = {
            label: {"ops": _ops(getattr(gm, str(m.target), None)), "copies": dict(around)}
            for label, m in zip(labels, modules, strict=False)
        }
        example = taken.get(node.name)
        row: dict[str, Any] = {
            "node": node.name,
            "construct": CONSTRUCT.get(name, f"torch.{name}"),
            "branches": branches,
            "around": around,
            "example": "body" if isinstance(example, int) else example,
        }
        if isinstance(example, int):
            row["iterations"] = example
        rows.append(row)
    return rows


def control_flow_text(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per construct: its branches with their ops and copies, and what the example inputs take."""
    lines = []
    for row in rows:
        parts = [
            f"{label} {b['ops']} ops, {b['copies'][Direction.H2D]} H2D + {b['copies'][Direction.D2H]} D2H"
            for label, b in row["branches"].items()
        ]
        taken = row["example"]
        ran = "" if taken is None else f"; the example inputs take {taken}"
        ran += f" ({row['iterations']} iterations)" if "iterations" in row else ""
        lines.append(f"{row['construct']} {row['node']} (on the CPU): {'; '.join(parts)}{ran}")
    return lines
