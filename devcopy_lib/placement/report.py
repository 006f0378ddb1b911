"""PlacementReport: one row per node of a placed graph (copies included), copy counts and bytes, and what one
strategy saves against another (copies, bytes) and what that costs (device memory held longer); and, for each value
crossing devices (cuda:0 -> cuda:1), both ways to move it: a host hop (D2H + H2D) or one direct peer copy (D2D).

Bytes are numel x itemsize at the example shapes (symbolic sizes take their example hint); constants are counted
apart (`constant_bytes`, loaded once). A cost model, when given, prices each copy (`pricing.CostModel`); one that
also has `basis()` (bench.cost_model's `CopyPricer`: backend, host memory kind, clock, machine) has that basis
recorded as `pricing`, so every surface can say what its prices assume. What one strategy saves against another
is worded once, by `savings_text`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import fx

from ..lowering.delegate import delegate_of
from ..lowering.nodes import device_of, node_arg, node_kind
from ..lowering.ops import overload_name
from ..names import DIRECTIONS, CopyRole, Direction, format_bytes
from ..names import loaded_text as loaded_text  # re-exported: the report's wording of constants and buffers
from .branches import control_flow_summary, control_flow_text
from .hoist import HOISTED, hoistable_copies
from .pricing import CostModel, predict_error, predict_seconds
from .roles import copy_roles

if TYPE_CHECKING:
    from .peer import CrossDevicePair
    from .resident import BufferPlacement


class Placed(Protocol):
    """What the report reads of a placed program (`place.PlacedProgram` is one): declared here, so the report
    does not import the pass that builds it."""

    @property
    def graph_module(self) -> fx.GraphModule: ...
    @property
    def strategy(self) -> str: ...
    @property
    def options(self) -> dict[str, Any]: ...
    @property
    def delegate_ops(self) -> Sequence[str]: ...
    @property
    def constant_bytes(self) -> int: ...


@dataclass
class NodeRow:
    """One node: what it is, where it runs, why, the bytes of its value, and a copy's predicted time (seconds)."""

    name: str
    kind: str
    device: str
    reason: str
    bytes: int
    predicted_s: float | None = None
    predicted_error: float | None = None  # the price's out-of-sample error for this size (0.08: ±8%), if checked


@dataclass
class Rewrite:
    """Another strategy's placement told as changes to a placed graph, without building it (placement/rewrites.py):
    nodes it would not have, copies of another kind there, and the users a node would have there."""

    removed: set[fx.Node] = field(default_factory=set)
    kinds: dict[fx.Node, str] = field(default_factory=dict)
    users: dict[fx.Node, set[fx.Node]] = field(default_factory=dict)


Comparison = list[dict[str, Any]]
# another strategy -> its placed graph (or a placed graph and the Rewrite that makes it that strategy's), or why it
# refused
Others = dict[str, fx.GraphModule | tuple[fx.GraphModule, Rewrite] | Exception]


class _Deferred:
    """A report field worked out on first read: it is set to its value, or to a function returning it (called once,
    then kept). The strategy comparison places the program under every other strategy, work that only a reader of
    the comparison needs, so place_devices leaves it to the first read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = f"_{name}"

    def __get__(self, report: object, owner: type | None = None) -> Any:
        if report is None:  # the dataclass asks the class for the field's default: none given means empty
            return ()  # immutable, as a dataclass default must be; set turns it into []
        value: Any = report.__dict__[self._name]
        if callable(value):
            value = report.__dict__[self._name] = value()
        return value

    def __set__(self, report: object, value: Any) -> None:
        keep = callable(value) or isinstance(value, (list, dict))
        report.__dict__[self._name] = value if keep else list(value)


@dataclass
class PlacementReport:
    """What the placement pass decided and what it costs; `to_dict()` is `devcopy place --json`'s object."""

    strategy: str
    options: dict[str, Any]
    delegate_ops: list[str]
    delegates: int
    rows: list[NodeRow]
    copies: dict[str, int]
    copy_bytes: dict[str, int]
    constant_bytes: int
    device_peak_bytes: int
    predicted_copy_s: float | None = None
    comparison: _Deferred = _Deferred()  # a list of dicts; build_report passes a function that places the others
    cross_device: list[dict[str, Any]] = field(default_factory=list)
    # H2D copies of constant-derived values (placement/hoist.py): made once at load when hoisted, else on every call
    constant_derived: dict[str, int] = field(default_factory=dict)
    per_call_bytes: dict[str, int] = field(default_factory=dict)  # all copies, "without_hoisting" / "with_hoisting"
    suggestions: list[str] = field(default_factory=list)
    pricing: dict[str, str] | None = None  # the cost model's basis (backend, memory, clock, measured_on, error), if any
    # role (cache, weights, activations: roles.py) -> direction -> bytes copied per call; adds up to copy_bytes
    copy_bytes_by_role: dict[str, dict[str, int]] = field(default_factory=dict)
    # every mutable buffer (program state): name, bytes, device it lives on, resident or not, and why
    buffers: list[dict[str, Any]] = field(default_factory=list)
    # the same program placed plain, with hoisting, and with hoisting and resident buffers (place.PLACEMENTS), side
    # by side: per placement its options, copies, copy_bytes and copy_bytes_by_role per call (worked out on first read)
    bytes_by_placement: _Deferred = _Deferred()
    # each torch.cond / map / scan: its branches with the copies each needs, and the branch the example inputs take
    control_flow: list[dict[str, Any]] = field(default_factory=list)

    def control_flow_lines(self) -> list[str]:
        """`control_flow` in words, one line per construct (`devcopy place`, the explorer)."""
        return control_flow_text(self.control_flow)

    def __getstate__(self) -> dict[str, Any]:
        """A pickled or copied report carries its comparison, worked out now, not the means to place it."""
        _ = self.comparison, self.bytes_by_placement
        return dict(self.__dict__)

    def to_dict(self) -> dict[str, Any]:
        result = asdict(self)
        result["nodes"] = result.pop("rows")
        return result

    def bytes_by_role(self) -> dict[str, dict[str, int]]:
        """role -> direction -> bytes copied per call: the KV cache (program state), weights-derived values and
        activations; per direction the roles add up to `copy_bytes`."""
        return {role: dict(directions) for role, directions in self.copy_bytes_by_role.items()}

    def roles_line(self) -> str:
        """`bytes_by_role` in `roles_text`'s words (the explorer, `devcopy place` and the HTML report show it)."""
        return roles_text(self.copy_bytes_by_role)

    def strategy_counts(self) -> dict[str, tuple[dict[str, int], dict[str, int], int]]:
        """strategy -> (copies, copy bytes, device peak bytes) for this report's strategy and every other one that
        placed the program (a refusing one is left out)."""
        table = {self.strategy: (self.copies, self.copy_bytes, self.device_peak_bytes)}
        for other in self.comparison:
            if "error" not in other:
                peak = self.device_peak_bytes - other["extra_device_bytes"]
                table[other["strategy"]] = (other["copies"], other["copy_bytes"], peak)
        return table

    def savings(self, strategy: str, against: str) -> str | None:
        """What `strategy` saves per call against `against`, in `savings_text`'s words; None when either did not
        place the program."""
        table = self.strategy_counts()
        if strategy not in table or against not in table:
            return None
        (copies, nbytes, peak), (their_copies, their_bytes, their_peak) = table[strategy], table[against]
        return savings_text(
            strategy, against, _saved(their_copies, copies), _saved(their_bytes, nbytes), peak - their_peak
        )

    def placements_table(self) -> list[dict[str, Any]]:
        """`bytes_by_placement` as rows for people (`placements_rows`)."""
        return placements_rows(self.bytes_by_placement)

    def placements_lines(self) -> list[str]:
        """`bytes_by_placement` as aligned text lines (`placements_text`)."""
        return placements_text(self.bytes_by_placement)


def _amounts(copies: dict[str, int], nbytes: dict[str, int], sign: int) -> str:
    """'1 H2D, 4 KiB and 1 D2H, 64 B' over the directions whose count has `sign`."""
    parts = [
        f"{sign * copies[d]} {d.upper()}, {format_bytes(sign * nbytes.get(d, 0))}"
        for d in DIRECTIONS
        if sign * copies.get(d, 0) > 0
    ]
    return " and ".join(parts)


def savings_text(
    strategy: str, against: str, copies_saved: dict[str, int], bytes_saved: dict[str, int], extra_device_bytes: int
) -> str:
    """The one wording of what a placement saves against another, per call: 'dedupe saves 1 H2D, 4 KiB against
    executorch; holds 4 KiB more device memory at peak' (copies it adds, such as peer's D2D, are named too)."""
    saves, adds = _amounts(copies_saved, bytes_saved, 1), _amounts(copies_saved, bytes_saved, -1)
    text = f"{strategy} saves {saves or 'no copies'}" + (f", adds {adds}" if adds else "") + f" against {against}"
    if extra_device_bytes:
        more = "more" if extra_device_bytes > 0 else "less"
        text += f"; holds {format_bytes(abs(extra_device_bytes))} {more} device memory at peak"
    return text


def saving_text(before: int, after: int) -> str:
    """`before -> after per call`, byte sizes rounded for reading; where the rounding makes both read the same, the
    saving is given exactly, e.g. '6.3 MiB -> 6.3 MiB per call, 776 B less', so a real saving never reads as none."""
    text = f"{format_bytes(before)} -> {format_bytes(after)} per call"
    if before != after and format_bytes(before) == format_bytes(after):
        text += f", {format_bytes(abs(before - after))} {'less' if after < before else 'more'}"
    return text


def roles_text(split: dict[str, dict[str, int]]) -> str:
    """The one wording of the per-call byte split by role, e.g. `llama_decode_step` with matrix ops: 'per call:
    cache 128 KiB H2D, 0 B D2H · weights 616.0 KiB H2D, 0 B D2H · activations 9.1 KiB H2D, 13.3 KiB D2H'."""
    parts = [
        f"{role} " + ", ".join(f"{format_bytes(n)} {d.upper()}" for d, n in directions.items())
        for role, directions in split.items()
    ]
    return "per call: " + " · ".join(parts)


def placements_rows(by_placement: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The side-by-side placements (`PlacementReport.bytes_by_placement`) as rows: `placement`, then bytes per call
    per role and direction (`cache H2D`, ...), then `total H2D` / `total D2H`; a refused one has `error`."""
    rows = []
    for name, entry in by_placement.items():
        if "error" in entry:
            rows.append({"placement": name, "error": entry["error"]})
            continue
        row: dict[str, Any] = {"placement": name}
        for role, directions in entry["copy_bytes_by_role"].items():
            for direction in (Direction.H2D, Direction.D2H):
                row[f"{role} {direction.upper()}"] = directions.get(direction, 0)
        row["total H2D"] = entry["copy_bytes"].get(Direction.H2D, 0)
        row["total D2H"] = entry["copy_bytes"].get(Direction.D2H, 0)
        rows.append(row)
    return rows


def placements_text(by_placement: dict[str, dict[str, Any]]) -> list[str]:
    """The one wording of the side-by-side placements: a header line, then one line per placement with its bytes
    per call by role and direction (`devcopy place` prints it)."""
    rows = placements_rows(by_placement)
    columns = [c for c in next((r for r in rows if "error" not in r), {}) if c != "placement"]
    width = max((len(c) for c in columns), default=0) + 2
    lines = ["bytes per call by role:" + "".join(c.rjust(width) for c in columns)]
    for row in rows:
        if "error" in row:
            lines.append(f"  {row['placement']:<21}refused: {row['error']}")
        else:
            lines.append(f"  {row['placement']:<21}" + "".join(format_bytes(row[c]).rjust(width) for c in columns))
    return lines


def value_bytes(value: object) -> int:
    """numel x itemsize of a (fake) tensor at its example shape; 0 for non-tensors and tuples."""
    if not isinstance(value, torch.Tensor):
        return 0
    numel = 1
    # torch.Size is typed tuple[int, ...], but a symbolic trace's fake tensors hold SymInts in it
    sizes: tuple[int | torch.SymInt, ...] = tuple(value.shape)
    for size in sizes:
        numel *= size.node.hint if isinstance(size, torch.SymInt) else int(size)
    return int(numel) * value.element_size()


def copy_counts(gm: fx.GraphModule, rewrite: Rewrite | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """(copies, bytes) per direction over the copy nodes of a placed graph (as `rewrite` changes it) made on every
    call (hoisted ones, made once at load, are left out); `d2d` only when there are direct ones."""
    change = rewrite or Rewrite()
    copies: dict[str, int] = {Direction.H2D: 0, Direction.D2H: 0}
    nbytes: dict[str, int] = {Direction.H2D: 0, Direction.D2H: 0}
    for node in gm.graph.nodes:
        kind = change.kinds.get(node) or node_kind(node)
        if kind in DIRECTIONS and not node.meta.get(HOISTED) and node not in change.removed:
            copies[kind] = copies.get(kind, 0) + 1
            nbytes[kind] = nbytes.get(kind, 0) + value_bytes(node.meta.get("val"))
    return copies, nbytes


def role_bytes(gm: fx.GraphModule) -> dict[str, dict[str, int]]:
    """role -> direction -> bytes of the copies made on every call (`copy_counts`' copies, split by
    `roles.copy_roles`), over `copy_counts`' directions."""
    split: dict[str, dict[str, int]] = {role.value: {Direction.H2D: 0, Direction.D2H: 0} for role in CopyRole}
    for node, role in copy_roles(gm).items():
        if not node.meta.get(HOISTED):
            kind = node_kind(node)
            for directions in split.values():  # a direction any role copies (d2d) is a column of every role
                directions.setdefault(kind, 0)
            split[role][kind] += value_bytes(node.meta.get("val"))
    return split


def device_peak_bytes(gm: fx.GraphModule, rewrite: Rewrite | None = None) -> int:
    """Peak bytes of values resident on non-CPU devices, each live from its definition to its last use, in a placed
    graph as `rewrite` changes it (a removed node holds nothing; where it stood, no value starts or ends)."""
    change = rewrite or Rewrite()
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    deltas = [0] * (len(position) + 1)  # bytes becoming live at a position, minus those dead after the one before
    for node in gm.graph.nodes:
        if (
            node.op != "output"
            and node not in change.removed
            and not device_of(node).is_cpu
            and delegate_of(node) is None
        ):
            end = max((position[u] for u in change.users.get(node, node.users)), default=position[node])
            nbytes = value_bytes(node.meta.get("val"))
            deltas[position[node]] += nbytes
            deltas[end + 1] -= nbytes
    live = peak = 0
    for delta in deltas[:-1]:
        live += delta
        peak = max(peak, live)
    return peak


def _reason(node: fx.Node, kind: str) -> str:
    device = device_of(node)
    users = ", ".join(u.name for u in node.users)
    if kind == "input":
        if node.op == "get_attr":
            return "constant read on CPU (loaded once)"
        return f"graph input the caller passes on {device}" + (
            " (skip_h2d_for_method_inputs)" if not device.is_cpu else ""
        )
    if kind == "output":
        return "graph outputs"
    if kind == "delegate" and (delegate := delegate_of(node)) is not None:
        ops = ", ".join(dict.fromkeys(delegate.ops))
        where = f"on {delegate.target_device}" if delegate.target_device else "with no target_device: stays on CPU"
        count = len(delegate.ops)
        return f"{delegate.name}: {count} op{'s' if count != 1 else ''} ({ops}) {where}"
    if kind == "getitem":
        stays = (
            " (stays on device: skip_d2h_for_method_outputs)"
            if (not device.is_cpu and all(u.op == "output" for u in node.users))
            else ""
        )
        return f"output {node.args[1]} of {node_arg(node).name}{stays}"
    if kind == Direction.H2D:
        return f"{node_arg(node).name} to {device} for {users}"
    if kind == Direction.D2H:
        return f"{node_arg(node).name} to cpu for {users}"
    if kind == Direction.D2D:
        source = node_arg(node)
        return f"{source.name} from {device_of(source)} to {device} directly (peer copy) for {users}"
    return f"{overload_name(node.target) or node.target} is not delegated"


def _saved(theirs: dict[str, int], ours: dict[str, int]) -> dict[str, int]:
    return {k: theirs.get(k, 0) - ours.get(k, 0) for k in {**ours, **theirs}}


def _savings_of(strategy: str, other: dict[str, Any]) -> str:
    """A comparison entry in `savings_text`'s words, said by the strategy with fewer copies (ours on a tie)."""
    saved, nbytes, extra = other["copies_saved"], other["bytes_saved"], other["extra_device_bytes"]
    if sum(saved.values()) >= 0:
        return savings_text(strategy, other["strategy"], saved, nbytes, extra)
    flip = {k: -v for k, v in saved.items()}
    return savings_text(other["strategy"], strategy, flip, {k: -v for k, v in nbytes.items()}, -extra)


def build_report(
    placed: Placed,
    cost_model: CostModel | None = None,
    others: Others | Callable[[], Others] | None = None,
    cross_device: Sequence[CrossDevicePair] | None = None,
    buffers: Sequence[BufferPlacement] = (),
    by_placement: Callable[[], dict[str, dict[str, Any]]] | None = None,
) -> PlacementReport:
    """The report of a PlacedProgram; `others`: another strategy -> its placed graph (or a placed graph and the
    Rewrite that tells that strategy's from it), or the error it refused with; or a function returning that, called
    on the comparison's first read; `cross_device`: the pass's CrossDevicePairs (values going device to device);
    `buffers`: where each mutable buffer lives and why (placement/resident.py); `by_placement`: a function giving
    the side-by-side placements (place.PLACEMENTS), called on first read."""
    gm = placed.graph_module
    hoistable = set(hoistable_copies(gm))
    buffer_reason = {b.node: b.reason for b in buffers}
    rows = []
    for node in gm.graph.nodes:
        kind = node_kind(node)
        value_nbytes = value_bytes(node.meta.get("val"))
        reason = _reason(node, kind)
        if node.op == "get_attr" and node.name in buffer_reason:
            reason = f"mutable buffer (program state), {buffer_reason[node.name]}"
        if node in hoistable:
            reason += (
                " (constant-derived: hoisted, computed and copied once at load)"
                if node.meta.get(HOISTED)
                else " (constant-derived: hoist_constants=True / --hoist-constants would copy it once at load)"
            )
        rows.append(
            NodeRow(
                node.name,
                kind,
                str(device_of(node)),
                reason,
                value_nbytes,
                None if node.meta.get(HOISTED) else predict_seconds(cost_model, kind, value_nbytes),
                None if node.meta.get(HOISTED) else predict_error(cost_model, kind, value_nbytes),
            )
        )
    copies, nbytes = copy_counts(gm)
    derived_bytes = sum(value_bytes(n.meta.get("val")) for n in hoistable)
    hoisted_bytes = sum(value_bytes(n.meta.get("val")) for n in hoistable if n.meta.get(HOISTED))
    without = sum(nbytes.values()) + hoisted_bytes
    peak = device_peak_bytes(gm)
    predicted = [r.predicted_s for r in rows if r.predicted_s is not None]
    return PlacementReport(
        strategy=placed.strategy,
        options=dict(placed.options),
        delegate_ops=list(placed.delegate_ops),
        delegates=sum(r.kind == "delegate" for r in rows),
        rows=rows,
        copies=copies,
        copy_bytes=nbytes,
        constant_bytes=placed.constant_bytes,
        device_peak_bytes=peak,
        predicted_copy_s=sum(predicted) if cost_model is not None else None,
        comparison=(lambda: _comparison(placed.strategy, copies, nbytes, peak, others()))
        if callable(others)
        else _comparison(placed.strategy, copies, nbytes, peak, others or {}),
        cross_device=[pair.to_dict(cost_model) for pair in cross_device or ()],
        constant_derived={
            "copies": len(hoistable),
            "bytes": derived_bytes,
            "hoisted": sum(bool(n.meta.get(HOISTED)) for n in hoistable),
        },
        per_call_bytes={"without_hoisting": without, "with_hoisting": without - derived_bytes},
        suggestions=[]
        if derived_bytes == hoisted_bytes
        else [
            f"{len(hoistable)} H2D copies ({format_bytes(derived_bytes)} per call) move values computed only from "
            f"parameters, buffers and constants: hoist_constants=True (devcopy place --hoist-constants) computes "
            f"them once at load and keeps them on the device ({saving_text(without, without - derived_bytes)})."
        ],
        pricing=_pricing(cost_model),
        copy_bytes_by_role=role_bytes(gm),
        buffers=[b.to_dict() for b in buffers],
        bytes_by_placement=by_placement if by_placement is not None else {},
        control_flow=control_flow_summary(gm, getattr(placed, "example_inputs", ())),
    )


def _comparison(strategy: str, copies: dict[str, int], nbytes: dict[str, int], peak: int, others: Others) -> Comparison:
    """One entry per other strategy: its copies and bytes, what `strategy` (with these counts and device peak) saves
    against it, in numbers and in `savings_text`'s words; or the error it refused with."""
    comparison: Comparison = []
    for name, other in others.items():
        if isinstance(other, Exception):
            comparison.append({"strategy": name, "error": str(other)})
            continue
        graph, rewrite = other if isinstance(other, tuple) else (other, None)
        other_copies, other_bytes = copy_counts(graph, rewrite)
        comparison.append(
            {
                "strategy": name,
                "copies": other_copies,
                "copy_bytes": other_bytes,
                "copies_saved": _saved(other_copies, copies),
                "bytes_saved": _saved(other_bytes, nbytes),
                "extra_device_bytes": peak - device_peak_bytes(graph, rewrite),
            }
        )
        comparison[-1]["savings"] = _savings_of(strategy, comparison[-1])
    return comparison


def _pricing(cost_model: CostModel | None) -> dict[str, str] | None:
    """The cost model's basis (bench.cost_model.CopyPricer.basis), when it says one."""
    basis = getattr(cost_model, "basis", None)
    return dict(basis()) if callable(basis) else None
