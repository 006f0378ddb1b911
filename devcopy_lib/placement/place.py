"""The device-placement pass: H2D/D2H copies at the boundaries of device delegates (ExecuTorch's
`PropagateDevicePass`, docs/semantics.md §6), plus devcopy's `dedupe` and `peer` strategies.

After the pass every node has `meta["device"]` (a `Device`). Copy nodes call `torch.ops.et_copy._h2d_copy.default`
(tagged with the delegate's device) and `_d2h_copy.default` (tagged CPU); both are clones at trace time, so the placed
graph still runs eagerly on CPU. `peer` places ExecuTorch's copies, then turns each cross-device host hop (a D2H
on cuda:0 feeding an H2D to cuda:1) into one direct `_d2d_copy` where the two devices have peer access. A delegate
whose `target_device` is None or CPU is left untouched (a deliberate difference for CPU: ExecuTorch would insert
CPU->CPU copies for a `cpu` target).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import operator
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import fx
from torch.fx.passes.infra.pass_base import PassBase, PassResult

from ..devices import CPU, Device
from ..devices.errors import InvalidArgumentError
from ..lowering.arguments import expect
from ..lowering.delegate import Delegate
from ..lowering.lower import LoweredProgram
from ..lowering.nodes import COPY_KINDS, D2D, D2H, H2D, call_device, device_of, is_d2d, is_d2h, is_h2d
from ..names import STRATEGIES, ErrorKind, Strategy
from . import hoist, resident
from .peer import CrossDevicePair, PeerAccess, peer_rule
from .pricing import CostModel
from .report import Others, PlacementReport, Rewrite, build_report, copy_counts, role_bytes, value_bytes
from .rewrites import dedupe_rewrite, peer_rewrite


class PlacementError(RuntimeError):
    """The pass refuses the program under the requested options (the message says which option and how to fix)."""

    kind = ErrorKind.PLACEMENT


class PlaceDevicesPass(PassBase):
    """Insert and elide device copies in a lowered top-level graph; running it twice changes nothing."""

    def __init__(
        self,
        strategy: str = Strategy.EXECUTORCH,
        skip_h2d_for_method_inputs: bool | Collection[str] = False,
        skip_d2h_for_method_outputs: bool = False,
        non_cpu_memory_planning: bool = True,
        peer_access: PeerAccess = None,
    ):
        super().__init__()
        self._skip_names = skip_names(skip_h2d_for_method_inputs)
        if strategy not in STRATEGIES:
            raise InvalidArgumentError(
                f"Unknown placement strategy {strategy!r}. Valid: {', '.join(STRATEGIES)} "
                f"('executorch' reproduces PropagateDevicePass; 'dedupe' shares one H2D per value "
                f"and device; 'peer' copies device to device directly where peer access exists)."
            )
        if (skip_h2d_for_method_inputs or skip_d2h_for_method_outputs) and not non_cpu_memory_planning:
            raise ValueError(
                "skip_h2d_for_method_inputs and skip_d2h_for_method_outputs are only meaningful with "
                "non_cpu_memory_planning=True: they skip copies, and copies are inserted only when non-CPU memory "
                "is planned. Set non_cpu_memory_planning=True, or leave both skip options False. (With skips, "
                "graph inputs/outputs must not be memory-planned: the caller provides them on the device.)"
            )
        self.strategy = strategy
        self.skip_h2d_for_method_inputs = skip_h2d_for_method_inputs
        self.skip_d2h_for_method_outputs = skip_d2h_for_method_outputs
        self.non_cpu_memory_planning = non_cpu_memory_planning
        self.peer_access = peer_rule(peer_access)
        self.cross_device: list[CrossDevicePair] = []  # filled by each run: every cross-device host hop and its fate

    def call(self, graph_module: fx.GraphModule) -> PassResult:
        graph = graph_module.graph
        calls = {node: device for node in graph.nodes if (device := call_device(node)) is not None}
        modified = self.tag_defaults(graph, calls)
        if self.non_cpu_memory_planning:
            modified |= self.insert_h2d(graph, calls)
            modified |= self.insert_d2h(graph, calls)
            modified |= self.elide_round_trips(graph)
            modified |= self.direct_peer_copies(graph)
        else:
            modified |= self.tag_only(calls)
        if modified:  # graph.lint() is left to the tests: it is O(nodes) work on every placement
            graph_module.recompile()
        return PassResult(graph_module, modified)

    def tag_defaults(self, graph: fx.Graph, calls: dict[fx.Node, Device]) -> bool:
        """Always: a node without a device tag gets CPU, and a device delegate's call gets its device."""
        changed = False
        for node in graph.nodes:
            changed |= _tag(node, calls.get(node) or node.meta.get("device", CPU))
        return changed

    def tag_only(self, calls: dict[fx.Node, Device]) -> bool:
        """Only with non_cpu_memory_planning=False: tag each device delegate's inputs and outputs with its device,
        in place, and insert no copies (ExecuTorch's legacy tagging)."""
        changed = False
        for call, device in calls.items():
            for node in (*call.all_input_nodes, *call.users):
                changed |= _tag(node, device)
        return changed

    def insert_h2d(self, graph: fx.Graph, calls: dict[fx.Node, Device]) -> bool:
        """Per device delegate, per distinct input value not already on its device: an H2D right before the call,
        rewiring only that argument. `executorch`: one copy per (delegate, value); `dedupe`: one per (value,
        device), reused by every delegate on that device. Graph inputs skip the copy under
        skip_h2d_for_method_inputs. A symbolic size or other scalar argument is passed as it is (ExecuTorch copies
        only arguments with a TensorSpec; docs/semantics.md §6)."""
        changed = False
        shared: dict[tuple[fx.Node, Device], fx.Node] = {}
        for call, device in calls.items():
            args = list(call.args)
            for index, arg in enumerate(args):
                if not isinstance(arg, fx.Node) or not self._is_tensor(arg) or device_of(arg) == device:
                    continue
                if (
                    self.skip_h2d_for_method_inputs
                    and arg.op == "placeholder"
                    and (self._skip_names is None or arg.name in self._skip_names)
                ):
                    self._check_skippable_input(arg, device)
                    arg.meta["device"] = device  # re-tagged in place: the caller provides it on the device
                    changed = True
                    continue
                copy_node = shared.get((arg, device)) if self.strategy == Strategy.DEDUPE else None
                if copy_node is None:
                    with graph.inserting_before(call):
                        copy_node = _copy_node(graph, H2D, arg, device)
                    shared[(arg, device)] = copy_node
                args[index] = copy_node
                changed = True
            call.args = tuple(args)
        return changed

    def insert_d2h(self, graph: fx.Graph, calls: dict[fx.Node, Device]) -> bool:
        """Per output of a device delegate: tag the getitem with the device and, unless every user is the graph
        output under skip_d2h_for_method_outputs, one D2H after it shared by all users not already reading on the
        device (a direct D2D copy reads on the device). A scalar output (a symbolic size) gets no copy."""
        changed = False
        for call, device in calls.items():
            for item in [u for u in call.users if u.op == "call_function" and u.target is operator.getitem]:
                if not self._is_tensor(item):
                    continue
                changed |= _tag(item, device)
                readers = [
                    u for u in item.users if not (is_d2h(u) or is_d2d(u)) and (is_h2d(u) or device_of(u) != device)
                ]
                if not readers:
                    continue
                if self.skip_d2h_for_method_outputs and all(u.op == "output" for u in item.users):
                    continue
                copy_node = next((u for u in item.users if is_d2h(u)), None)
                if copy_node is None:
                    with graph.inserting_after(item):
                        copy_node = _copy_node(graph, D2H, item, CPU)
                for user in readers:
                    user.replace_input_with(item, copy_node)
                changed = True
        return changed

    def elide_round_trips(self, graph: fx.Graph) -> bool:
        """An H2D whose input is a D2H of a value already on the H2D's device (same type and index) is removed and
        its users read the device value; a D2H left without users is removed. Cross-device pairs stay."""
        changed = False
        for node in list(graph.nodes):
            if is_h2d(node) and is_d2h(node.args[0]) and device_of(node.args[0].args[0]) == device_of(node):
                node.replace_all_uses_with(node.args[0].args[0])
                graph.erase_node(node)
                changed = True
        return _drop_unused_d2h(graph) or changed

    def direct_peer_copies(self, graph: fx.Graph) -> bool:
        """Records every H2D whose input is a D2H of a value on another device of the same type (a host hop); only
        with strategy 'peer', and where the two devices have peer access, replaces it by one direct D2D copy tagged
        with the destination device; a D2H left without users is removed."""
        changed = False
        self.cross_device = []
        for node in list(graph.nodes):
            if not (is_h2d(node) and is_d2h(node.args[0])):
                continue
            d2h = node.args[0]
            source, src, dst = d2h.args[0], device_of(d2h.args[0]), device_of(node)
            if src.is_cpu or src.type != dst.type:
                continue
            access = self.peer_access(src, dst)
            direct = access and self.strategy == Strategy.PEER
            self.cross_device.append(
                CrossDevicePair(
                    source.name,
                    str(src),
                    str(dst),
                    value_bytes(node.meta.get("val")),
                    access,
                    "direct" if direct else "host_hop",
                    len(d2h.users) > 1,
                )
            )
            if direct:
                with graph.inserting_before(node):
                    copy_node = _copy_node(graph, D2D, source, dst)
                node.replace_all_uses_with(copy_node)
                graph.erase_node(node)
                changed = True
        return _drop_unused_d2h(graph) or changed

    @staticmethod
    def _is_tensor(node: fx.Node) -> bool:
        """Whether a node's value is a tensor: a SymInt, int, float or bool (a `sym_size.int` result, a product of
        sizes) is not, and has no memory to copy. A node without a traced value counts as a tensor."""
        val = node.meta.get("val")
        return val is None or isinstance(val, torch.Tensor)

    def _check_skippable_input(self, node: fx.Node, device: Device) -> None:
        """skip_h2d_for_method_inputs re-tags a graph input in place, so no other reader may need it elsewhere:
        `executorch` requires exactly one user; `dedupe` allows several delegates, all on this one device."""
        users = list(node.users)
        if self.strategy == Strategy.DEDUPE and all(call_device(u) == device for u in users):
            return
        if len(users) != 1:
            names = ", ".join(u.name for u in users)
            extra = (
                ""
                if self.strategy == Strategy.DEDUPE
                else " or use strategy='dedupe' (several delegates on one device)"
            )
            raise PlacementError(
                f"skip_h2d_for_method_inputs=True requires graph input {node.name!r} to have exactly one user, but "
                f"it has {len(users)} ({names}): a shared input cannot be re-tagged as {device} in place. Disable "
                f"skip_h2d_for_method_inputs{extra}."
            )


def skip_names(option: bool | Collection[str]) -> frozenset[str] | None:
    """The graph inputs `skip_h2d_for_method_inputs` names: None for every input (True, ExecuTorch's switch) or
    none (False); a collection of input names (beyond ExecuTorch, docs/differences.md) skips only those."""
    if isinstance(option, bool):
        return None
    if isinstance(option, str) or not all(isinstance(name, str) for name in option):
        raise InvalidArgumentError(
            f"skip_h2d_for_method_inputs={option!r}: give True or False, or a list of graph input names "
            "(skip_h2d_for_method_inputs=['past_key_0', ...]: only those are passed on the device)."
        )
    return frozenset(option)


def _drop_unused_d2h(graph: fx.Graph) -> bool:
    """Remove every D2H left without users; True when one was removed."""
    unused = [node for node in graph.nodes if is_d2h(node) and not node.users]
    for node in unused:
        graph.erase_node(node)
    return bool(unused)


def _tag(node: fx.Node, device: Device) -> bool:
    """Set node.meta['device']; True when it changed."""
    if node.meta.get("device") == device:
        return False
    node.meta["device"] = device
    return True


def _copy_node(graph: fx.Graph, op: torch._ops.OpOverload, source: fx.Node, device: Device) -> fx.Node:
    """A copy of `source` named after it (`a_h2d`, `add_d2h`, `add_d2d`), with its value and the device it lands on."""
    node = graph.create_node("call_function", op, (source,), name=f"{source.name}_{COPY_KINDS[op]}")
    node.meta["val"] = source.meta.get("val")
    node.meta["device"] = device
    return node


@dataclass
class PlacedProgram(LoweredProgram):
    """A LoweredProgram whose graph has passed device placement, with the options used and the PlacementReport."""

    strategy: str = Strategy.EXECUTORCH
    options: dict[str, Any] = field(default_factory=dict)
    report: PlacementReport | None = None


def copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A new GraphModule with a copied graph (node meta copied shallowly) sharing gm's delegates and constants.

    It is torch.fx's lazy kind: `recompile()` only marks it, and its Python code is generated on the first call.
    devcopy's own flow never calls the placed graph (emit reads its nodes), so the pass does not pay for codegen
    that nothing runs; calling it eagerly, as the tests do, still works."""
    from torch.fx._lazy_graph_module import _LazyGraphModule

    return _LazyGraphModule(gm, copy.deepcopy(gm.graph), class_name=type(gm).__name__)


def place_devices(
    lowered: LoweredProgram,
    strategy: str = Strategy.EXECUTORCH,
    skip_h2d_for_method_inputs: bool | Collection[str] = False,
    skip_d2h_for_method_outputs: bool = False,
    non_cpu_memory_planning: bool = True,
    cost_model: CostModel | None = None,
    peer_access: PeerAccess = None,
    hoist_constants: bool = False,
    resident_buffers: bool = False,
) -> PlacedProgram:
    """Place devices on a copy of `lowered`'s graph; the report compares with the other strategies.

    `peer_access` (strategy 'peer'): None asks the registered allocator (none registered: assume yes), a bool
    answers for every pair, a callable `(src, dst) -> bool`, or device pairs `{("cuda:0", "cuda:1")}`.
    `skip_h2d_for_method_inputs`: True (ExecuTorch's switch: every graph input feeding a delegate), or the names of
    the graph inputs the caller passes on the device (beyond ExecuTorch: a decode step's cache inputs, while its
    position, also read on the CPU, keeps its copy).
    `hoist_constants`: compute constant-derived values and their H2D copies once, at load (placement/hoist.py).
    `resident_buffers`: keep each mutable buffer whose readers and writers can run on the device there for the
    method's life, updated on the device, never copied per call (placement/resident.py); the report says where
    every mutable buffer lives and why (`PlacementReport.buffers`)."""
    expect(lowered, LoweredProgram, "lowered", "pass lower(export_program(model, inputs)) or export_and_lower(...)")
    for flag, value in (("hoist_constants", hoist_constants), ("resident_buffers", resident_buffers)):
        if not isinstance(value, bool):
            raise InvalidArgumentError(f"{flag} must be True or False, got {value!r}")
    named = skip_names(skip_h2d_for_method_inputs)
    if named is not None:
        unknown = sorted(named - set(lowered.input_names))
        if unknown:
            raise InvalidArgumentError(
                f"skip_h2d_for_method_inputs names {', '.join(unknown)}, which are not graph inputs of this program; "
                f"its inputs are {', '.join(lowered.input_names)}."
            )
        skip_h2d_for_method_inputs = tuple(name for name in lowered.input_names if name in named)
    options: dict[str, Any] = dict(
        skip_h2d_for_method_inputs=skip_h2d_for_method_inputs,
        skip_d2h_for_method_outputs=skip_d2h_for_method_outputs,
        non_cpu_memory_planning=non_cpu_memory_planning,
    )
    placement = PlaceDevicesPass(strategy, **options, peer_access=peer_access)
    placement.peer_access = _remembering(placement.peer_access)  # the comparison, placed later, gets these answers
    names = getattr(getattr(lowered.exported_program, "graph_signature", None), "inputs_to_buffers", {})
    gm, buffers = _placed_graph(lowered.graph_module, placement, hoist_constants, resident_buffers, names)
    base = {f.name: getattr(lowered, f.name) for f in dataclasses.fields(LoweredProgram)}
    base["delegates"] = {name: m for name, m in gm.named_children() if isinstance(m, Delegate)}
    extra = {"hoist_constants": hoist_constants, "resident_buffers": resident_buffers}
    result = PlacedProgram(**{**base, "graph_module": gm}, strategy=strategy, options={**options, **extra})
    others: Others | Callable[[], Others] = (
        _told_from(gm, strategy, placement.peer_access)
        if strategy == Strategy.EXECUTORCH
        else functools.partial(  # placed on the comparison's first read: place_devices alone never pays for it
            _placed_others, lowered.graph_module, strategy, options, placement.peer_access, extra
        )
    )
    result.report = build_report(
        result,
        cost_model,
        others,
        placement.cross_device,
        buffers,
        functools.partial(_by_placement, lowered.graph_module, strategy, options, placement.peer_access),
    )
    return result


def _placed_graph(
    lowered: fx.GraphModule,
    placement: PlaceDevicesPass,
    hoist_constants: bool,
    resident_buffers: bool,
    names: dict[str, str] | None = None,
) -> tuple[fx.GraphModule, list[resident.BufferPlacement]]:
    """`placement` run on a copy of `lowered` (its mutable buffers made resident first, when asked; hoisted after,
    when asked), and where each mutable buffer lives (`names`: a buffer's node -> the model's name for it)."""
    gm = copy_graph_module(lowered)
    buffers = resident.make_resident(gm, apply=resident_buffers, names=names)
    placement(gm)
    if hoist_constants:
        hoist.hoist_constants(gm)
    return gm, buffers


# The report's side-by-side placements: name -> (hoist_constants, resident_buffers), each adding to the one before
PLACEMENTS = {"plain": (False, False), "hoisted": (True, False), "resident": (True, True)}


def _by_placement(
    lowered: fx.GraphModule,
    strategy: str,
    options: dict[str, Any],
    peer_access: Callable[[Device, Device], bool],
) -> dict[str, dict[str, Any]]:
    """Bytes copied per call by role under `strategy` as it is, with hoisting, and with hoisting and resident
    buffers (`PLACEMENTS`), or the PlacementError one refused with."""
    table: dict[str, dict[str, Any]] = {}
    for name, (hoisted, resident_buffers) in PLACEMENTS.items():
        try:
            gm, _ = _placed_graph(
                lowered, PlaceDevicesPass(strategy, **options, peer_access=peer_access), hoisted, resident_buffers
            )
        except PlacementError as exc:
            table[name] = {"error": str(exc)}
            continue
        copies, nbytes = copy_counts(gm)
        table[name] = {
            "hoist_constants": hoisted,
            "resident_buffers": resident_buffers,
            "copies": copies,
            "copy_bytes": nbytes,
            "copy_bytes_by_role": role_bytes(gm),
        }
    return table


def _remembering(rule: Callable[[Device, Device], bool]) -> Callable[[Device, Device], bool]:
    """`rule` answering each device pair once: a comparison placed after the allocators changed still gets the
    answers the placement got."""
    answers: dict[tuple[Device, Device], bool] = {}

    def ask(src: Device, dst: Device) -> bool:
        if (src, dst) not in answers:
            answers[(src, dst)] = rule(src, dst)
        return answers[(src, dst)]

    return ask


def _place_copy(
    lowered: fx.GraphModule, strategy: str, options: dict[str, Any], peer_access: PeerAccess, extra: dict[str, bool]
) -> fx.GraphModule:
    """`strategy`'s placement of a copy of `lowered`, with `extra`'s hoisting and resident buffers when asked."""
    placement = PlaceDevicesPass(strategy, **options, peer_access=peer_access)
    return _placed_graph(lowered, placement, extra["hoist_constants"], extra["resident_buffers"])[0]


def _told_from(executorch: fx.GraphModule, strategy: str, peer_access: Callable[[Device, Device], bool]) -> Others:
    """Every strategy but `strategy`, told from the program's executorch placement (placement/rewrites.py)."""
    told: dict[str, Callable[[], fx.GraphModule | tuple[fx.GraphModule, Rewrite]]] = {
        Strategy.EXECUTORCH: lambda: executorch,
        Strategy.DEDUPE: lambda: (executorch, dedupe_rewrite(executorch)),
        Strategy.PEER: lambda: (executorch, peer_rewrite(executorch, peer_access)),
    }
    return {name: told[name]() for name in STRATEGIES if name != strategy}


def _placed_others(
    lowered: fx.GraphModule,
    strategy: str,
    options: dict[str, Any],
    peer_access: Callable[[Device, Device], bool],
    extra: dict[str, bool],
) -> Others:
    """Every strategy but `strategy` under the same options: told from executorch's placement of a copy of `lowered`
    or, where executorch refuses the program, each placed on its own copy, or the PlacementError it refused with (a
    refusal is part of the comparison)."""
    try:
        executorch = _place_copy(lowered, Strategy.EXECUTORCH, options, peer_access, extra)
    except PlacementError:  # what executorch refuses, dedupe may accept: each is placed for real
        others: Others = {}
        for name in STRATEGIES:
            if name != strategy:
                try:
                    others[name] = _place_copy(lowered, name, options, peer_access, extra)
                except PlacementError as exc:
                    others[name] = exc
        return others
    return _told_from(executorch, strategy, peer_access)
