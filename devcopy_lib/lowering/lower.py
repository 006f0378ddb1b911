"""Export and lower: torch.export + run_decompositions (to_edge's table), then capability partitioning picks the
delegates.

The lowered representation (what placement, emit and memory planning consume):

`LoweredProgram`
- `graph_module`: the top-level `torch.fx.GraphModule`, runnable eagerly on CPU tensors (`lowered(*inputs)`). Nodes:
  - `placeholder`: one per user input, in call order (`input_names`);
  - `get_attr`: a CPU-side constant (parameter, buffer or lifted tensor constant read by a CPU op or returned);
    the tensor is in `constants[node.target]` and is an attribute of the module; or a branch of a control-flow op
    (`torch.cond`, `map`, `scan`), a CPU submodule of the module (emitted inline with jumps, emitter/control_flow.py);
  - `call_function` on an ATen `OpOverload`: an op left on CPU;
  - `call_module` whose target names a `Delegate` submodule (`delegate_of(node)`): a delegate call, args = the
    delegate's distinct input values, returns a tuple;
  - `call_function operator.getitem (call, i)`: output i of a delegate, named after the value it replaces;
  - `output`: the user outputs, in order.
  Every node except `output` has `meta["val"]`: a FakeTensor (a tuple of them on delegate calls) giving shape and
  dtype for byte counts and memory planning. The placement pass adds `meta["device"]` (a `Device`) on every node.
- `delegates`: name -> `Delegate` (the same objects as the submodules), names `delegate_0, ...` in graph order.
  A `Delegate` holds `graph_module` (placeholders: inputs in call order, then owned constants; output: a tuple),
  `target_device` (`Device`, or None: no device, the delegate stays on CPU untouched), `constants` (owned constants,
  placeholder name -> tensor: no H2D, copied to the device once at load), `ops` (overload names, graph order) and
  `input_names`.
- `constants`: CPU-side constants (get_attr target -> tensor); `example_inputs`; `exported_program` (decomposed);
  `delegate_ops`; `partition` ("capability", "fx" or "per_node").

Before partitioning, the graph takes the form ExecuTorch's `to_edge` gives it where that changes copies
(`edge_form`: scalars lifted to constants, assertions removed, mutations written back with `copy_`); a mutated
buffer is program state read on the CPU (`get_attr`), never delegate-owned; `written_back_inputs` lists the user
inputs the program mutates.

`capability` (the default) takes the partitions torch.fx's
`CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True).propose_partitions()` proposes, from
`partition.propose_partitions`, which makes the same decisions with reachability bitsets: linear in nodes and edges
plus about N(N+E)/64 machine words of bitset work (torch.fx's walks every downstream node: minutes at 4,000 nodes);
`fx` calls torch.fx's itself (the oracle the tests compare with); `per_node` makes every
supported node its own partition. A constant read by a
delegate is owned by it; a constant read by several delegates is owned by each (a copy per delegate, no H2D), and a
CPU reader keeps a CPU-side copy too.
"""

from __future__ import annotations

import copy
import heapq
import operator
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import fx
from torch.export import ExportedProgram
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ..devices import CPU, Device
from ..errors import InvalidArgumentError
from ..names import PARTITIONS, Partition
from ..runtime.constants import storage_view
from .arguments import expect, expect_inputs, expect_ops
from .decompositions import edge_decompositions
from .delegate import Delegate
from .edge_form import EdgeForm, edge_form
from .ops import overload_name, validate_overloads
from .partition import propose_partitions
from .sources import note_model
from .user_model import UnsupportedModelError, data_dependent, example_tuple, partial_graph_once

# One device for every delegate (None: no device), or delegate name / op overload -> device
TargetDevice = str | Device | Mapping[str, str | Device] | None
# What _Builder orders: a partition (its index in `groups`) or a node left on CPU
_Unit = int | fx.Node

# What the device backend runs: ATen overloads as they appear after run_decompositions().
DEFAULT_DELEGATE_OPS: tuple[str, ...] = (
    "add.Tensor",
    "sub.Tensor",
    "mul.Tensor",
    "div.Tensor",
    "neg.default",
    "mm.default",
    "addmm.default",
    "bmm.default",
    "relu.default",
    "sin.default",
    "cos.default",
    "exp.default",
    "tanh.default",
    "sigmoid.default",
    "_softmax.default",
    # views, so a weight's transpose runs inside the delegate that owns the weight (no per-run H2D of weights)
    "permute.default",
    "view.default",
    "expand.default",
    "clone.default",
    "_unsafe_view.default",
    "unsqueeze.default",
    # what the real models (docs/real_models.md) compute: convolutions, normalisations, pooling, activations
    "convolution.default",
    "_native_batch_norm_legit_no_training.default",
    "native_layer_norm.default",
    "max_pool2d_with_indices.default",
    "mean.dim",
    "clamp.default",
    "gelu.default",
    "pow.Tensor_Scalar",
    "rsqrt.default",
    "embedding.default",
    "cat.default",
    "split_with_sizes.default",
)


@dataclass
class LoweredProgram:
    """A program split into CPU ops and delegates; see the module docstring for exactly what each field holds."""

    graph_module: fx.GraphModule
    delegates: dict[str, Delegate]
    constants: dict[str, torch.Tensor]
    input_names: tuple[str, ...]
    example_inputs: tuple[Any, ...]
    exported_program: ExportedProgram
    delegate_ops: tuple[str, ...]
    partition: str = Partition.CAPABILITY
    written_back_inputs: tuple[int, ...] = ()  # user inputs the program mutates: the caller's tensor gets the value

    def __call__(self, *inputs: Any) -> Any:
        """Run the graph eagerly on CPU tensors (copies are clones), outputs structured like the model's."""
        flat = self.graph_module(*inputs)
        return pytree.tree_unflatten(list(flat), self.exported_program.call_spec.out_spec)

    @property
    def constant_bytes(self) -> int:
        """Bytes of every constant, CPU-side and delegate-owned (loaded once, not moved per execution); a tensor
        several delegates own (a tied weight) counts once per device, as a loaded method holds one copy of it."""
        held = [(t, CPU) for t in self.constants.values()] + [
            (t, d.target_device or CPU) for d in self.delegates.values() for t in d.constants.values()
        ]
        copies = {storage_view(t, where): t.numel() * t.element_size() for t, where in held}
        return sum(copies.values())


class OverloadSupport(OperatorSupportBase):
    """Supported = a call to one of the named ATen overloads."""

    def __init__(self, ops: Sequence[str]):
        self.ops = frozenset(ops)

    def is_node_supported(self, submodules: Mapping[str, torch.nn.Module], node: fx.Node) -> bool:
        return node.op == "call_function" and overload_name(node.target) in self.ops


def _check_partition(partition: str) -> None:
    """An InvalidArgumentError (a ValueError of kind usage) naming the valid partitions."""
    if partition not in PARTITIONS:
        raise InvalidArgumentError(
            f"Unknown partition {partition!r}. Valid: {', '.join(PARTITIONS)}. 'capability' groups "
            f"supported ops like ExecuTorch's partitioners; 'fx' gives the same groups from torch.fx's "
            f"own (slower) partitioner; 'per_node' makes one delegate per op."
        )


def _checked_ops(delegate_ops: Sequence[str] | None, exported: ExportedProgram | None = None) -> tuple[str, ...]:
    """The validated delegate ops (DEFAULT_DELEGATE_OPS for None); an unknown one is a ValueError suggesting the
    overloads `exported` uses first."""
    used = () if exported is None else model_ops(exported)
    expect_ops(delegate_ops)
    return validate_overloads(DEFAULT_DELEGATE_OPS if delegate_ops is None else delegate_ops, used=used)


def model_ops(exported: ExportedProgram) -> tuple[str, ...]:
    """The ATen overloads a decomposed program calls, in graph order."""
    graph = exported.graph_module.graph
    return tuple(dict.fromkeys(name for n in graph.nodes if (name := overload_name(n.target)) is not None))


# Control flow ExecuTorch 1.5.1 lowers: the op and its branches stay on the CPU, only top-level ops are partitioned
PLACED_CONTROL_FLOW = frozenset({"cond", "map_impl", "scan"})
_CONSTRUCT = {"map_impl": "control_flow.map"}  # how the user wrote it, where the op's name differs


def control_flow(graph_module: fx.GraphModule) -> list[tuple[fx.Node, str]]:
    """The top-level control-flow nodes (higher-order ops over subgraphs) and the construct each one is."""
    found = []
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
            name = node.target.name()  # type: ignore[no-untyped-call]  # torch leaves name() untyped
            found.append((node, _CONSTRUCT.get(name, f"torch.{name}")))
    return found


def _refuse_control_flow(exported: ExportedProgram) -> None:
    """Control flow ExecuTorch does not lower (`while_loop`: its to_edge or emitter refuses it) is refused by name
    here rather than failing somewhere inside lowering; `cond`, `map` and `scan` are placed as ExecuTorch places
    them."""
    for node, construct in control_flow(exported.graph_module):
        if node.target.name() not in PLACED_CONTROL_FLOW:  # type: ignore[union-attr]  # a HigherOrderOperator
            raise UnsupportedModelError(
                f"{node.name} is {construct} (control flow over subgraphs), which devcopy does not lower, as "
                "ExecuTorch 1.5.1 does not (its to_edge or its emitter refuses it): only torch.cond, "
                "control_flow.map and torch.scan are lowered. Export an unrolled form (decide the loop count in "
                "Python before export), or see docs/differences.md."
            )


def export_program(
    model: torch.nn.Module, example_inputs: torch.Tensor | Sequence[Any], dynamic_shapes: Any = None
) -> ExportedProgram:
    """`torch.export` + `run_decompositions` with ExecuTorch's to_edge table (lowering/decompositions.py): the expensive
    half of lowering, done once per model and input set.
    One bare tensor is one input; a branch on a tensor's value is an UnsupportedModelError saying what to change."""
    expect(model, torch.nn.Module, "model", "pass the torch.nn.Module to export")
    expect_inputs(example_inputs)
    try:
        with partial_graph_once():
            exported = torch.export.export(model, example_tuple(example_inputs), dynamic_shapes=dynamic_shapes)
    except GuardOnDataDependentSymNode as exc:
        raise data_dependent(model, exc) from None
    decomposed: ExportedProgram = exported.run_decompositions(edge_decompositions())  # to_edge's table
    note_model(decomposed, model)  # a loaded method then sees a parameter the model replaces (lowering/sources.py)
    return decomposed


def lower(
    exported: ExportedProgram,
    delegate_ops: Sequence[str] | None = None,
    target_device: TargetDevice = "cuda:0",
    partition: str = Partition.CAPABILITY,
) -> LoweredProgram:
    """Make each proposed partition of `delegate_ops` in a decomposed program a delegate on `target_device`.

    `exported` is read, never changed, so one `export_program` result can be lowered with many delegate sets.
    `target_device`: a device string / Device for every delegate, None for none, or a mapping from delegate name
    (`delegate_0`) or op overload (`add.Tensor`) to a device (delegates it does not cover get no device).
    """
    expect(exported, ExportedProgram, "exported", "pass export_program(model, example_inputs)")
    _check_partition(partition)
    ops = _checked_ops(delegate_ops, exported)
    _refuse_control_flow(exported)
    edge = edge_form(exported)
    gm = edge.graph_module
    support = OverloadSupport(ops)
    if partition == Partition.CAPABILITY:
        groups = propose_partitions(gm, support)
    elif partition == Partition.FX:
        proposed = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True).propose_partitions()
        groups = [set(p.nodes) for p in proposed]
    else:
        groups = [{n} for n in gm.graph.nodes if support.is_node_supported({}, n)]
    example_inputs = tuple(exported.example_inputs[0]) if exported.example_inputs else ()
    return _Builder(exported, edge, groups, target_device).build(example_inputs, ops, partition)


def export_and_lower(
    model: torch.nn.Module,
    example_inputs: torch.Tensor | Sequence[Any],
    delegate_ops: Sequence[str] | None = None,
    target_device: TargetDevice = "cuda:0",
    dynamic_shapes: Any = None,
    partition: str = Partition.CAPABILITY,
) -> LoweredProgram:
    """`export_program` then `lower`: export `model`, decompose, and delegate the partitions of `delegate_ops`.
    Bad options are refused before the export, except an unknown op: its message names the model's overloads."""
    expect(model, torch.nn.Module, "model", "pass the torch.nn.Module to export")
    expect_inputs(example_inputs)
    _check_partition(partition)
    try:
        _checked_ops(delegate_ops)
    except ValueError as unknown:
        try:
            exported = export_program(model, example_inputs, dynamic_shapes)
        except Exception:
            raise unknown from None  # the op is wrong whatever the model: say that first
        _checked_ops(delegate_ops, exported)  # raises again, naming the overloads the model uses
        raise
    return lower(export_program(model, example_inputs, dynamic_shapes), delegate_ops, target_device, partition)


def resolve_device(target_device: TargetDevice, name: str, ops: tuple[str, ...]) -> Device | None:
    """The device of one delegate: from a single target, or from a mapping by delegate name, then by its ops."""
    if target_device is None:
        return None
    if not isinstance(target_device, Mapping):
        return Device.parse(target_device)
    if name in target_device:
        return Device.parse(target_device[name])
    found = {Device.parse(target_device[op]) for op in ops if op in target_device}
    if len(found) > 1:
        raise InvalidArgumentError(
            f"{name} (ops {list(ops)}) maps to several devices {sorted(map(str, found))}. A delegate "
            f"runs on one device: map it by name ({name!r}: 'cuda:0') or use partition='per_node'."
        )
    return found.pop() if found else None


class _Builder:
    """Builds the top-level graph: CPU nodes copied, each partition replaced by a delegate call and getitems."""

    def __init__(
        self, exported: ExportedProgram, edge: EdgeForm, groups: list[set[fx.Node]], target_device: TargetDevice
    ):
        self.exported = exported
        self.edge = edge
        self.graph = edge.graph_module.graph
        self.order = {n: i for i, n in enumerate(self.graph.nodes)}
        self.groups = [sorted(_with_getitems(g), key=self.order.__getitem__) for g in groups]
        self.group_of = {n: i for i, g in enumerate(self.groups) for n in g}
        self.target_device = target_device
        self.constants, self.user_inputs = edge.constants, edge.user_inputs
        self.new = fx.Graph()
        self.root = torch.nn.Module()
        self.env: dict[fx.Node, fx.Node] = {}
        self.delegates: dict[str, Delegate] = {}
        self.cpu_constants: dict[str, torch.Tensor] = {}

    def build(self, example_inputs: tuple[Any, ...], ops: Sequence[str], partition: str) -> LoweredProgram:
        placeholders = {n.name: n for n in self.graph.nodes if n.op == "placeholder"}
        for name in self.user_inputs:
            self.env[placeholders[name]] = self.new.node_copy(placeholders[name], self.env.__getitem__)
        for name, tensor in self.constants.items():
            node = placeholders[name]
            if name in self.edge.mutable or any(u not in self.group_of for u in node.users):  # CPU reads it
                self.root.register_buffer(name, tensor)
                self.cpu_constants[name] = tensor
                attr = self.new.get_attr(name)
                attr.meta = copy.copy(node.meta)
                self.env[node] = attr
        for unit in self._units_in_order():
            if isinstance(unit, int):
                self._add_delegate(self.groups[unit])
            else:
                self.env[unit] = self.new.node_copy(unit, self.env.__getitem__)  # meta copied shallowly
                if unit.op == "get_attr":  # a control-flow branch: a CPU submodule of the program
                    self.root.add_module(str(unit.target), getattr(self.edge.graph_module, str(unit.target)))
        output = self.graph.output_node()
        self.new.output(fx.map_arg(output.args[0], self.env.__getitem__))
        gm = _LazyGraphModule(self.root, self.new, class_name="LoweredGraph")  # its code is made when first called
        return LoweredProgram(
            graph_module=gm,
            delegates=dict(self.delegates),
            constants=self.cpu_constants,
            input_names=tuple(self.user_inputs),
            example_inputs=example_inputs,
            exported_program=self.exported,
            delegate_ops=tuple(ops),
            partition=partition,
            written_back_inputs=self.edge.written_back,
        )

    def _units_in_order(self) -> list[_Unit]:
        """Compute nodes and partitions (by index) in a topological order, each as early as the original order
        allows."""
        units: dict[_Unit, list[fx.Node]] = {}
        for node in self.graph.nodes:
            if node.op in ("call_function", "call_method", "call_module", "get_attr"):
                units.setdefault(self.group_of.get(node, node), []).append(node)
        unit_of = {n: u for u, nodes in units.items() for n in nodes}
        deps = {
            u: {unit_of[i] for n in ns for i in n.all_input_nodes if i in unit_of and unit_of[i] != u}
            for u, ns in units.items()
        }
        users: dict[_Unit, set[_Unit]] = {u: set() for u in units}
        for u, ds in deps.items():
            for d in ds:
                users[d].add(u)
        key = {u: self.order[ns[0]] for u, ns in units.items()}
        waiting = {u: len(ds) for u, ds in deps.items()}
        ready = [(key[u], id(u), u) for u, n in waiting.items() if n == 0]
        heapq.heapify(ready)
        ordered = []
        while ready:
            _, _, u = heapq.heappop(ready)
            ordered.append(u)
            for v in users[u]:
                waiting[v] -= 1
                if waiting[v] == 0:
                    heapq.heappush(ready, (key[v], id(v), v))
        return ordered

    def _add_delegate(self, nodes: list[fx.Node]) -> None:
        """Replace one partition by a delegate call. Its graph is built once per program and partition, and shared
        by every delegate set that proposes the same partition (lowering never changes a delegate's graph after)."""
        part = self.edge.partitions.get(tuple(nodes))
        if part is None:
            part = _Partition.build(nodes, self.constants.keys() - self.edge.mutable)
            self.edge.partitions[tuple(nodes)] = part
        name = f"delegate_{len(self.delegates)}"
        delegate = Delegate(
            name,
            part.graph_module,
            resolve_device(self.target_device, name, part.ops),
            {a.name: self.constants[a.name] for a in part.owned},
            part.ops,
            tuple(a.name for a in part.inputs),
        )
        self.delegates[name] = delegate
        self.root.add_module(name, delegate)
        call = self.new.call_module(name, tuple(self.env[a] for a in part.inputs))
        outputs = part.outputs
        call.meta["val"] = tuple(n.meta.get("val") for n in outputs)
        for index, node in enumerate(outputs):
            item = self.new.create_node("call_function", operator.getitem, (call, index), name=node.name)
            item.meta["val"] = node.meta.get("val")
            self.env[node] = item


@dataclass(frozen=True)
class _Partition:
    """One partition as a delegate graph: its distinct inputs in first-use order, then the constants it owns, as
    placeholders; its values read outside as a tuple output; its op overloads in graph order."""

    graph_module: fx.GraphModule
    inputs: tuple[fx.Node, ...]
    owned: tuple[fx.Node, ...]
    outputs: tuple[fx.Node, ...]
    ops: tuple[str, ...]

    @classmethod
    def build(cls, nodes: list[fx.Node], owned_names: Collection[str]) -> _Partition:
        """`nodes` (in graph order) as a delegate graph; an input named in `owned_names` (constants, not program
        state) is owned by the delegate instead of passed to it."""
        members = set(nodes)
        inputs: dict[fx.Node, None] = {}  # ordered sets: a delegate may read hundreds of distinct values
        owned: dict[fx.Node, None] = {}
        for node in nodes:
            for arg in node.all_input_nodes:
                if arg not in members:
                    (owned if arg.name in owned_names else inputs)[arg] = None
        outputs = tuple(n for n in nodes if any(u not in members for u in n.users))
        sub = fx.Graph()
        sub_env = {}
        for arg in (*inputs, *owned):
            sub_env[arg] = sub.placeholder(arg.name)
            sub_env[arg].meta = copy.copy(arg.meta)
        for node in nodes:
            sub_env[node] = sub.node_copy(node, sub_env.__getitem__)
        sub.output(tuple(sub_env[n] for n in outputs))
        ops = tuple(op for n in nodes if (op := overload_name(n.target)) is not None)  # getitems have none
        graph_module = _LazyGraphModule(torch.nn.Module(), sub, class_name="DelegateGraph")
        return cls(graph_module, tuple(inputs), tuple(owned), outputs, ops)


def _with_getitems(group: set[fx.Node]) -> set[fx.Node]:
    """A partition with the `getitem`s of its multi-output ops (torch.fx's partitioner adds them, per_node does not):
    a delegate returns tensors, never an op's tuple."""
    return set(group) | {u for n in group for u in n.users if u.op == "call_function" and u.target is operator.getitem}
