"""Export and lower: torch.export + run_decompositions(), then torch.fx's capability partitioner picks delegates.

The lowered representation (what placement, emit and memory planning consume):

`LoweredProgram`
- `graph_module`: the top-level `torch.fx.GraphModule`, runnable eagerly on CPU tensors (`lowered(*inputs)`). Nodes:
  - `placeholder`: one per user input, in call order (`input_names`);
  - `get_attr`: a CPU-side constant (parameter, buffer or lifted tensor constant read by a CPU op or returned);
    the tensor is in `constants[node.target]` and is an attribute of the module;
  - `call_function` on an ATen `OpOverload`: an op left on CPU;
  - `call_module` whose target names a `Delegate` submodule (`delegate_of(node)`): a delegate call, args = the
    delegate's distinct input values, returns a tuple;
  - `call_function operator.getitem (call, i)`: output i of a delegate, named after the value it replaces;
  - `output`: the user outputs, in order (`output_names`).
  Every node except `output` has `meta["val"]`: a FakeTensor (a tuple of them on delegate calls) giving shape and
  dtype for byte counts and memory planning. The placement pass adds `meta["device"]` (a `Device`) on every node.
- `delegates`: name -> `Delegate` (the same objects as the submodules), names `delegate_0, ...` in graph order.
  A `Delegate` holds `graph_module` (placeholders: inputs in call order, then owned constants; output: a tuple),
  `target_device` (`Device`, or None: no device, the delegate stays on CPU untouched), `constants` (owned constants,
  placeholder name -> tensor: no H2D, copied to the device once at load), `ops` (overload names, graph order) and
  `input_names`.
- `constants`: CPU-side constants (get_attr target -> tensor); `example_inputs`; `exported_program` (decomposed);
  `delegate_ops`; `partition` ("capability" or "per_node").

Partitions come from `CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True).propose_partitions()`
(never re-implemented here); `per_node` makes every supported node its own partition. A constant read by a
delegate is owned by it; a constant read by several delegates is owned by each (a copy per delegate, no H2D), and a
CPU reader keeps a CPU-side copy too.
"""
from __future__ import annotations

import copy
import heapq
import operator
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch
import torch.utils._pytree as pytree
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ..devices import Device
from ..names import PARTITIONS
from .delegate import Delegate
from .ops import overload_name, validate_overloads

# What the device backend runs: ATen overloads as they appear after run_decompositions().
DEFAULT_DELEGATE_OPS: tuple[str, ...] = (
    "add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "neg.default",
    "mm.default", "addmm.default", "bmm.default",
    "relu.default", "sin.default", "cos.default", "exp.default", "tanh.default", "sigmoid.default",
    "_softmax.default",
    # views, so a weight's transpose runs inside the delegate that owns the weight (no per-run H2D of weights)
    "permute.default", "view.default", "expand.default", "clone.default", "_unsafe_view.default",
)


@dataclass
class LoweredProgram:
    """A program split into CPU ops and delegates; see the module docstring for exactly what each field holds."""

    graph_module: fx.GraphModule
    delegates: dict[str, Delegate]
    constants: dict[str, torch.Tensor]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    example_inputs: tuple[Any, ...]
    exported_program: ExportedProgram
    delegate_ops: tuple[str, ...]
    partition: str = "capability"

    def __call__(self, *inputs):
        """Run the graph eagerly on CPU tensors (copies are clones), outputs structured like the model's."""
        flat = self.graph_module(*inputs)
        return pytree.tree_unflatten(list(flat), self.exported_program.call_spec.out_spec)

    @property
    def constant_bytes(self) -> int:
        """Bytes of every constant, CPU-side and delegate-owned (loaded once, not moved per execution)."""
        tensors = [*self.constants.values(), *(t for d in self.delegates.values() for t in d.constants.values())]
        return sum(t.numel() * t.element_size() for t in tensors)


class _OverloadSupport(OperatorSupportBase):
    """Supported = a call to one of the named ATen overloads."""

    def __init__(self, ops: Sequence[str]):
        self.ops = frozenset(ops)

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        return node.op == "call_function" and overload_name(node.target) in self.ops


def _checked_options(delegate_ops: Sequence[str] | None, partition: str) -> tuple[str, ...]:
    """The validated delegate ops (DEFAULT_DELEGATE_OPS for None); a ValueError naming the valid partitions."""
    if partition not in PARTITIONS:
        raise ValueError(f"Unknown partition {partition!r}. Valid: {', '.join(PARTITIONS)}. 'capability' groups "
                         f"supported ops like ExecuTorch's partitioners; 'per_node' makes one delegate per op.")
    return validate_overloads(DEFAULT_DELEGATE_OPS if delegate_ops is None else delegate_ops)


def export_program(model: torch.nn.Module, example_inputs: Sequence[Any], dynamic_shapes: Any = None) -> ExportedProgram:
    """`torch.export` + `run_decompositions()`: the expensive half of lowering, done once per model and input set."""
    return torch.export.export(model, tuple(example_inputs), dynamic_shapes=dynamic_shapes).run_decompositions()


def lower(exported: ExportedProgram, delegate_ops: Sequence[str] | None = None, target_device: Any = "cuda:0",
          partition: str = "capability") -> LoweredProgram:
    """Make each proposed partition of `delegate_ops` in a decomposed program a delegate on `target_device`.

    `exported` is read, never changed, so one `export_program` result can be lowered with many delegate sets.
    `target_device`: a device string / Device for every delegate, None for none, or a mapping from delegate name
    (`delegate_0`) or op overload (`add.Tensor`) to a device (delegates it does not cover get no device).
    """
    ops = _checked_options(delegate_ops, partition)
    gm = exported.graph_module
    support = _OverloadSupport(ops)
    if partition == "capability":
        proposed = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True).propose_partitions()
        groups = [set(p.nodes) for p in proposed]
    else:
        groups = [{n} for n in gm.graph.nodes if support.is_node_supported(None, n)]
    example_inputs = tuple(exported.example_inputs[0]) if exported.example_inputs else ()
    return _Builder(exported, groups, target_device).build(example_inputs, ops, partition)


def export_and_lower(model: torch.nn.Module, example_inputs: Sequence[Any], delegate_ops: Sequence[str] | None = None,
                     target_device: Any = "cuda:0", dynamic_shapes: Any = None,
                     partition: str = "capability") -> LoweredProgram:
    """`export_program` then `lower`: export `model`, decompose, and delegate the partitions of `delegate_ops`."""
    _checked_options(delegate_ops, partition)  # refuse bad options before the expensive export
    return lower(export_program(model, example_inputs, dynamic_shapes), delegate_ops, target_device, partition)


def _resolve_device(target_device: Any, name: str, ops: tuple[str, ...]) -> Device | None:
    """The device of one delegate: from a single target, or from a mapping by delegate name, then by its ops."""
    if target_device is None:
        return None
    if not isinstance(target_device, Mapping):
        return Device.parse(target_device)
    if name in target_device:
        return Device.parse(target_device[name])
    found = {Device.parse(target_device[op]) for op in ops if op in target_device}
    if len(found) > 1:
        raise ValueError(f"{name} (ops {list(ops)}) maps to several devices {sorted(map(str, found))}. A delegate "
                         f"runs on one device: map it by name ({name!r}: 'cuda:0') or use partition='per_node'.")
    return found.pop() if found else None


def _constant_tensors(exported: ExportedProgram) -> tuple[dict[str, torch.Tensor], list[str]]:
    """Placeholder name -> tensor for parameters, buffers and lifted constants; plus the user-input names."""
    constants, user_inputs = {}, []
    for spec in exported.graph_signature.input_specs:
        if spec.kind is InputKind.USER_INPUT:
            user_inputs.append(spec.arg.name)
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            source = exported.state_dict if spec.target in exported.state_dict else exported.constants
            constants[spec.arg.name] = source[spec.target]
        else:
            raise ValueError(f"Input {spec.arg.name!r} is a {spec.kind.name}, which lowering does not support: "
                             f"only user inputs, parameters, buffers and tensor constants.")
    mutated = [s.arg.name for s in exported.graph_signature.output_specs if s.kind is not OutputKind.USER_OUTPUT]
    if mutated:
        raise ValueError(f"The program mutates {mutated}; lowering supports functional programs only. "
                         f"Return the new value instead of updating a buffer in place.")
    return constants, user_inputs


class _Builder:
    """Builds the top-level graph: CPU nodes copied, each partition replaced by a delegate call and getitems."""

    def __init__(self, exported: ExportedProgram, groups: list[set[fx.Node]], target_device: Any):
        self.exported = exported
        self.graph = exported.graph_module.graph
        self.order = {n: i for i, n in enumerate(self.graph.nodes)}
        self.groups = [sorted(g, key=self.order.__getitem__) for g in groups]
        self.group_of = {n: i for i, g in enumerate(self.groups) for n in g}
        self.target_device = target_device
        self.constants, self.user_inputs = _constant_tensors(exported)
        self.new = fx.Graph()
        self.root = torch.nn.Module()
        self.env: dict[fx.Node, fx.Node] = {}
        self.delegates: dict[str, Delegate] = {}
        self.cpu_constants: dict[str, torch.Tensor] = {}

    def build(self, example_inputs, ops, partition) -> LoweredProgram:
        placeholders = {n.name: n for n in self.graph.nodes if n.op == "placeholder"}
        for name in self.user_inputs:
            self.env[placeholders[name]] = self._copy(placeholders[name])
        for name, tensor in self.constants.items():
            node = placeholders[name]
            if any(u not in self.group_of for u in node.users):  # a CPU op or the output reads it
                self.root.register_buffer(name, tensor)
                self.cpu_constants[name] = tensor
                attr = self.new.get_attr(name)
                attr.meta = copy.copy(node.meta)
                self.env[node] = attr
        for unit in self._units_in_order():
            if isinstance(unit, int):
                self._add_delegate(self.groups[unit])
            else:
                self.env[unit] = self._copy(unit)
        output = self.graph.output_node()
        self.new.output(fx.map_arg(output.args[0], self.env.__getitem__))
        gm = fx.GraphModule(self.root, self.new, class_name="LoweredGraph")
        return LoweredProgram(
            graph_module=gm, delegates=dict(self.delegates), constants=self.cpu_constants,
            input_names=tuple(self.user_inputs), output_names=tuple(_names(output.args[0])),
            example_inputs=example_inputs, exported_program=self.exported, delegate_ops=tuple(ops),
            partition=partition,
        )

    def _copy(self, node: fx.Node) -> fx.Node:
        new = self.new.node_copy(node, self.env.__getitem__)
        new.meta = copy.copy(node.meta)
        return new

    def _units_in_order(self) -> list:
        """Compute nodes and partitions (by index) in a topological order, each as early as the original order allows."""
        units: dict[Any, list[fx.Node]] = {}
        for node in self.graph.nodes:
            if node.op in ("call_function", "call_method", "call_module", "get_attr"):
                units.setdefault(self.group_of.get(node, node), []).append(node)
        unit_of = {n: u for u, nodes in units.items() for n in nodes}
        deps = {u: {unit_of[i] for n in ns for i in n.all_input_nodes if i in unit_of and unit_of[i] != u}
                for u, ns in units.items()}
        users: dict[Any, set] = {u: set() for u in units}
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
        """Replace one partition by a delegate call: distinct inputs in first-use order, owned constants inside."""
        members = set(nodes)
        inputs, owned = [], []
        for node in nodes:
            for arg in node.all_input_nodes:
                if arg not in members and arg not in inputs and arg not in owned:
                    (owned if arg.name in self.constants else inputs).append(arg)
        outputs = [n for n in nodes if any(u not in members for u in n.users)]
        sub = fx.Graph()
        sub_env = {}
        for arg in (*inputs, *owned):
            sub_env[arg] = sub.placeholder(arg.name)
            sub_env[arg].meta = copy.copy(arg.meta)
        for node in nodes:
            sub_env[node] = sub.node_copy(node, sub_env.__getitem__)
        sub.output(tuple(sub_env[n] for n in outputs))
        name = f"delegate_{len(self.delegates)}"
        ops = tuple(overload_name(n.target) for n in nodes)
        delegate = Delegate(
            name, fx.GraphModule(torch.nn.Module(), sub, class_name="DelegateGraph"),
            _resolve_device(self.target_device, name, ops),
            {a.name: self.constants[a.name] for a in owned}, ops, tuple(a.name for a in inputs),
        )
        self.delegates[name] = delegate
        self.root.add_module(name, delegate)
        call = self.new.call_module(name, tuple(self.env[a] for a in inputs))
        call.meta["val"] = tuple(n.meta.get("val") for n in outputs)
        for index, node in enumerate(outputs):
            item = self.new.create_node("call_function", operator.getitem, (call, index), name=node.name)
            item.meta["val"] = node.meta.get("val")
            self.env[node] = item


def _names(value) -> list[str]:
    """Names of the nodes in an output structure, flattened in order."""
    names = []
    fx.map_arg(value, lambda n: names.append(n.name))
    return names
