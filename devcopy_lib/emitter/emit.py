"""Emit: a placed graph -> a `Program` (docs/semantics.md §5b), the step between device placement and memory planning.

Every functional op becomes its out variant plus a planned `out` (the copies become `et_copy::_h2d_copy.out` /
`_d2h_copy.out`, views their `_copy` variants); Python scalars where the schema wants a Tensor become lifted tensor
constants; a delegate call becomes a delegate instruction whose outputs `getitem` reads; constants a delegate owns
become device constants, copied host -> device once at load. A constant that is the model's own tensor keeps its
source (`TensorValue.source`, lowering/sources.py): a loaded method takes its snapshot from there at load.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import fx
from torch.utils._sympy.numbers import int_oo

from ..devices.device import CPU, Device
from ..kernels.prim_ops import prim_name
from ..lowering.arguments import expect
from ..lowering.delegate import delegate_of
from ..lowering.edge_form import WRITE_BACK
from ..lowering.nodes import node_arg
from ..lowering.sources import constant_sources
from ..placement.hoist import HOISTED
from ..runtime.program import (
    BackendDelegate,
    ConstantSource,
    DelegateCall,
    KernelCall,
    MoveCall,
    Program,
    ScalarValue,
    SymListValue,
    SymValue,
    TensorListValue,
    TensorSpec,
    TensorValue,
    Value,
)
from .control_flow import emit_control_flow
from .out_variant import operator_name, out_variant

if TYPE_CHECKING:
    from ..lowering.lower import LoweredProgram

# What a node emits as: one value index, or a tuple of them (a delegate call's or a multi-output op's results)
NodeValue = int | tuple[int, ...]

# Graph assertions carry no data; ExecuTorch removes them before emitting too.
_SKIPPED = {
    "aten::_assert_async",
    "aten::_assert_scalar",
    "aten::_assert_tensor_metadata",
    "aten::sym_constrain_range_for_size",
}


def _static_int(value: Any, where: str) -> int:
    if isinstance(value, torch.SymInt):
        hint = value.node.maybe_as_int()
        if hint is None:
            raise NotImplementedError(
                f"{where}: a symbolic size ({value}) is a CPU-op argument; devcopy emits symbolic sizes only in "
                "tensor metadata. Delegate that op, or export with static shapes."
            )
        return int(hint)
    return int(value)


def _hint(value: Any) -> Any:
    """A traced scalar's value for the example inputs (0 when torch has none): what a run-time scalar holds at load."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        hint = value.node.hint
        return 0 if hint is None else hint
    return 0 if value is None else value


def _upper_bound(size: Any, where: str) -> tuple[int, bool]:
    """A dimension's planned size and whether it is dynamic (planned at its upper bound, DYNAMIC_BOUND)."""
    if not isinstance(size, torch.SymInt) or size.node.maybe_as_int() is not None:
        return int(size), False
    bound = size.node.shape_env.bound_sympy(size.node.expr).upper
    if bound == int_oo or bound.is_finite is not True:  # torch's int_oo calls itself finite
        raise ValueError(
            f"{where}: dimension {size} has no finite upper bound, so it cannot be memory planned. "
            "Give its torch.export.Dim a max (Dim('batch', max=64))."
        )
    return int(bound), True


def _dim_range(size: Any, exported: Mapping[Any, Any]) -> tuple[str, int, int] | None:
    """A graph input's dimension as its torch.export.Dim: (name, min, max), the bounds as torch.export states them
    in `exported` (its range constraints; the shape environment's own start at 2); None when it is static."""
    if not isinstance(size, torch.SymInt) or size.node.maybe_as_int() is not None:
        return None
    env, expr = size.node.shape_env, size.node.expr
    bounds = exported.get(expr) or env.bound_sympy(expr)
    sources = env.var_to_sources.get(expr, [])
    names = [env.source_name_to_debug_name.get(source.name) for source in sources]
    name = next((n for n in names if n), str(expr))
    return name, int(bounds.lower), int(bounds.upper)


def tensor_spec(val: torch.Tensor, device: Device, where: str) -> TensorSpec:
    """The spec of a traced tensor: dtype, upper-bound sizes, device, dynamism."""
    bounds = [_upper_bound(size, where) for size in val.shape]
    return TensorSpec(
        val.dtype,
        tuple(s for s, _ in bounds),
        device,
        any(d for _, d in bounds),
        tuple(dim for dim, (_, dynamic) in enumerate(bounds) if dynamic),
    )


def _device_of(node: fx.Node) -> Device:
    device = node.meta.get("device")
    return CPU if device is None else Device.parse(device)


class _Emitter:
    """Walks the graph once, in order, appending values and instructions."""

    def __init__(
        self,
        graph_module: fx.GraphModule,
        device_planning: bool,
        sources: dict[str, ConstantSource],
        range_constraints: Mapping[Any, Any],
        parent: _Emitter | None = None,
        inputs: list[int | None] | None = None,
        outputs: list[int] | None = None,
    ) -> None:
        self.gm = graph_module
        self.range_constraints = range_constraints
        self.device_planning = device_planning
        self.sources = sources
        self.program = Program(values=[], instructions=[], operators=[], inputs=[], outputs=[])
        self.op_index: dict[str, int] = {}
        self.node_value: dict[fx.Node, NodeValue] = {}
        self.buffer_names: dict[str, str] = {}  # a buffer's constant node -> the model's name for it
        self.identity: dict[Device, int] = {}  # device -> its on-device write-back delegate
        # a subgraph (a branch or loop body) adds to its parent's program: its placeholders are bound to
        # `inputs` (None: a new value, e.g. a loop's slice), its results moved into `outputs` when given
        self.parent = parent
        self.bound_inputs = inputs if inputs is not None else []
        self.binding_outputs = outputs
        self.concrete_outputs: list[int] = []
        self.node_value_inputs: list[int] = []
        if parent is not None:
            self.program, self.op_index, self.node_value = parent.program, parent.op_index, parent.node_value
            self.buffer_names, self.identity = parent.buffer_names, parent.identity

    def subgraph(self, graph_module: fx.GraphModule, inputs: list[int | None], outputs: list[int] | None) -> _Emitter:
        """Emit a control-flow submodule inline, as ExecuTorch's emitter does (`_Emitter` over the submodule sharing
        the program): its instructions follow the current ones; returns the sub-emitter (its bound inputs and
        concrete outputs)."""
        placeholders = [n.name for n in graph_module.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(inputs):
            raise ValueError(
                f"a control-flow submodule takes {len(placeholders)} inputs ({', '.join(placeholders)}), "
                f"its construct passes {len(inputs)}"
            )
        sub = _Emitter(
            graph_module, self.device_planning, self.sources, self.range_constraints, self, list(inputs), outputs
        )
        for node in graph_module.graph.nodes:
            getattr(sub, f"_{node.op}")(node)
        return sub

    def append(self, instruction: Any) -> int:
        """Add an instruction; its position."""
        self.program.instructions.append(instruction)
        return len(self.program.instructions) - 1

    def index(self, arg: object) -> int:
        """The value index a node argument emitted as (a single tensor, not a tuple of results)."""
        if not isinstance(arg, fx.Node):
            raise TypeError(f"expected a node argument, got {arg!r}")
        value = self.node_value[arg]
        if not isinstance(value, int):
            raise TypeError(f"{arg.name} emitted as several values {value}, not one")
        return value

    def add(self, value: Value) -> int:
        self.program.values.append(value)
        return len(self.program.values) - 1

    def constant(self, tensor: torch.Tensor, device: Device = CPU, mutable: bool = False, name: str = "") -> int:
        """A constant value; `name` (its placeholder) finds its source when `tensor` is the model's own."""
        spec = TensorSpec(tensor.dtype, tuple(tensor.shape), device)
        source = self.sources.get(name)
        source = source if source is not None and source.tensor is tensor else None
        data = tensor.detach().contiguous()
        return self.add(TensorValue(spec, planned=False, data=data, mutable=mutable, source=source))

    def planned(self, val: torch.Tensor, node: fx.Node, device: Device | None = None) -> int:
        """A new tensor slot for `node`'s value; a hoisted value gets memory of its own (it lives across runs)."""
        device = (device or _device_of(node)) if self.device_planning else CPU
        return self.add(TensorValue(tensor_spec(val, device, node.name), planned=not node.meta.get(HOISTED, False)))

    # ---- nodes ----------------------------------------------------------------------------------------------
    def run(self) -> Program:
        for node in self.gm.graph.nodes:
            handler = getattr(self, f"_{node.op}")
            handler(node)
            if node.meta.get(HOISTED):  # hoisted nodes come first: the load-time part ends after the last one
                self.program.load_instructions = len(self.program.instructions)
        for node, value in self.node_value.items():  # a getitem's own name wins over its delegate's
            for index in (value,) if isinstance(value, int) else value:
                if isinstance(value, int) or index not in self.program.value_nodes:
                    self.program.value_nodes[index] = node.name
        return self.program

    def _placeholder(self, node: fx.Node) -> None:
        if self.parent is not None:  # a subgraph's input: the value its construct binds (or a new one)
            count = len(self.node_value_inputs)
            bound = self.bound_inputs[count]
            if bound is None:
                bound = self.bound_inputs[count] = self.planned(node.meta["val"], node)
            self.node_value_inputs.append(bound)
            self.node_value[node] = bound
            return
        index = self.planned(node.meta["val"], node)
        value = self.program.values[index]
        if isinstance(value, TensorValue) and value.spec.dynamic:  # a call's sizes are checked against the Dims
            ranges = tuple(_dim_range(size, self.range_constraints) for size in node.meta["val"].shape)
            self.program.values[index] = dataclasses.replace(value, spec=dataclasses.replace(value.spec, ranges=ranges))
        self.node_value[node] = index
        self.program.inputs.append(index)

    def _get_attr(self, node: fx.Node) -> None:
        if not isinstance(node.target, str):
            raise TypeError(f"{node.name}: get_attr target {node.target!r} is not an attribute path")
        attr = operator.attrgetter(node.target)(self.gm)
        if not isinstance(attr, torch.Tensor):
            return
        if not any(u.target is WRITE_BACK and u.args[0] is node for u in node.users):
            self.node_value[node] = self.constant(attr, name=node.target)
            return
        # a mutated buffer: its initial state is a copy of the model's value; a resident one lives in its device's
        # arena for the whole program (placement/resident.py), filled from that copy at load
        device = _device_of(node) if self.device_planning else CPU
        spec = TensorSpec(attr.dtype, tuple(attr.shape), device)
        data = attr.detach().clone().contiguous()
        index = self.add(TensorValue(spec, planned=not device.is_cpu, data=data, mutable=True))
        self.node_value[node] = index
        self.program.buffers[self.buffer_names.get(node.target, node.target)] = index

    def _call_module(self, node: fx.Node) -> None:
        delegate = delegate_of(node)
        if delegate is None:
            raise NotImplementedError(f"{node.name}: call_module {node.target!r} is not a delegate call")
        device = delegate.target_device or CPU
        args = tuple(self.index(arg) for arg in node.args)
        constants = tuple(
            self.constant(t, device if self.device_planning else CPU, name=name)
            for name, t in delegate.constants.items()
        )
        in_place = getattr(delegate, "in_place", {})  # output -> the input whose memory the graph wrote it into
        outputs = tuple(
            args[in_place[i]] if i in in_place else self.planned(v, node, device)
            for i, v in enumerate(node.meta["val"])
        )
        self.program.delegates.append(
            BackendDelegate(delegate.name, delegate.graph_module, device, constants, tuple(sorted(in_place)))
        )
        self.program.instructions.append(DelegateCall(len(self.program.delegates) - 1, args, outputs))
        self.node_value[node] = outputs

    def _call_function(self, node: fx.Node) -> None:
        if node.target is operator.getitem:
            results, item = self.node_value[node_arg(node)], node.args[1]
            if not isinstance(results, tuple) or not isinstance(item, int):
                raise TypeError(f"{node.name}: getitem of {results!r} at {item!r}")
            self.node_value[node] = results[item]
            return
        prim = prim_name(node.target)
        if prim is not None:
            self.prim_call(node, prim)
            return
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            emit_control_flow(self, node)
            return
        if not isinstance(node.target, torch._ops.OpOverload):
            raise NotImplementedError(
                f"{node.name}: {node.target} is not an operator overload; the runtime calls only operators"
            )
        if node.target._schema.name in _SKIPPED:
            return
        if node.target is WRITE_BACK:
            self.write_back(node)
            return
        self.kernel_call(node, node.target)

    def kernel_call(self, node: fx.Node, target: torch._ops.OpOverload) -> None:
        """`op(args)` -> `op.out(args, out=planned)`; arguments in schema order with the outs last (boxed order)."""
        op = out_variant(target)
        bound = dict(zip((a.name for a in target._schema.arguments), node.args, strict=False))  # trailing defaults
        bound.update(node.kwargs)
        vals = node.meta["val"]
        outs = iter(vals if isinstance(vals, (tuple, list)) else (vals,))
        args: list[int] = []
        out_args: list[int] = []
        results: list[int] = []
        for arg in op._schema.arguments:
            if arg.alias_info is not None and arg.alias_info.is_write and arg.kwarg_only:
                if isinstance(arg.type, torch.ListType):  # `Tensor(a!)[] out`: one planned tensor per item
                    items = tuple(self.planned(v, node) for v in outs)
                    results.extend(items)
                    out_args.append(self.add(TensorListValue(items)))
                else:
                    results.append(self.planned(next(outs), node))
                    out_args.append(results[-1])
            elif arg.name in bound:
                args.append(self.argument(arg, bound[arg.name], node))
            elif arg.has_default_value():
                args.append(self.add(ScalarValue(arg.default_value)))
            else:
                raise ValueError(f"{node.name}: {op} needs argument {arg.name!r}, which {node.target} did not get")
        self.program.instructions.append(KernelCall(self.operator(operator_name(op)), (*args, *out_args)))
        self.node_value[node] = tuple(results) if isinstance(vals, (tuple, list)) else results[0]

    def prim_call(self, node: fx.Node, name: str) -> None:
        """A size or arithmetic on sizes -> a primitive instruction `name(operands..., out)` whose out is a scalar
        value the runtime computes at every call (ExecuTorch's `aten::sym_size.int`, `executorch_prim::*`)."""
        operands = [self.index(a) if isinstance(a, fx.Node) else self.add(ScalarValue(a)) for a in node.args]
        out = self.add(SymValue(_hint(node.meta.get("val"))))
        self.program.instructions.append(KernelCall(self.operator(name), (*operands, out)))
        self.node_value[node] = out

    def operator(self, name: str) -> int:
        """The operator-table index of `name`, added on first use."""
        index = self.op_index.setdefault(name, len(self.op_index))
        if index == len(self.program.operators):
            self.program.operators.append(name)
        return index

    def write_back(self, node: fx.Node) -> None:
        """`copy_(target, value)` of a mutated buffer or input: `aten::copy.out(target, value, out=target)` writes
        the new value into the target's own memory, where the next run (a buffer) or the caller (an input) reads it.
        A resident buffer already updated in place (its new value is its own memory) needs nothing; one on a device
        is written there by an on-device copy (`_device_write_back`)."""
        target, value = (self.index(arg) for arg in node.args)
        self.node_value[node] = target
        if target == value:
            return
        device = self.program.tensor(target).spec.device
        if not device.is_cpu:
            self._device_write_back(device, target, value)
            return
        self.program.instructions.append(
            KernelCall(self.operator("aten::copy.out"), (target, value, self.add(ScalarValue(False)), target))
        )

    def _device_write_back(self, device: Device, target: int, value: int) -> None:
        """A resident buffer's write-back on its device: a delegate returning its input, whose output is the
        buffer's own memory, so the runtime's write of the result is the on-device copy (no host in between)."""
        if device not in self.identity:
            graph = fx.Graph()
            graph.output((graph.placeholder("value"),))
            module = fx.GraphModule(torch.nn.Module(), graph, class_name="WriteBack")
            self.program.delegates.append(BackendDelegate(f"write_back_{device}", module, device))
            self.identity[device] = len(self.program.delegates) - 1
        self.program.instructions.append(DelegateCall(self.identity[device], (value,), (target,)))

    def argument(self, arg: torch._C.Argument, value: Any, node: fx.Node) -> int:
        """One argument as a value index: tensors by their node, scalars lifted where the schema wants a Tensor."""
        kind = arg.type
        if isinstance(kind, torch.OptionalType):
            kind = kind.getElementType()
        if isinstance(value, fx.Node):
            return self.index(value)
        if isinstance(kind, torch.TensorType) and isinstance(value, (bool, int, float)):
            return self.constant(torch.tensor(value))
        if isinstance(kind, torch.ListType) and isinstance(
            kind.getElementType(), (torch.TensorType, torch.OptionalType)
        ):
            return self.add(TensorListValue(tuple(None if v is None else self.index(v) for v in value)))
        if isinstance(value, (list, tuple)) and any(isinstance(v, fx.Node) for v in value):  # sizes known at run time
            return self.add(
                SymListValue(
                    tuple(
                        self.index(v) if isinstance(v, fx.Node) else self.add(ScalarValue(_static_int(v, node.name)))
                        for v in value
                    )
                )
            )
        if isinstance(value, (list, tuple)):
            return self.add(
                ScalarValue(tuple(_static_int(v, node.name) if isinstance(v, torch.SymInt) else v for v in value))
            )
        if isinstance(value, torch.SymInt):
            return self.add(ScalarValue(_static_int(value, node.name)))
        return self.add(ScalarValue(value))

    def _output(self, node: fx.Node) -> None:
        items = node.args[0]
        if not isinstance(items, (tuple, list)):
            raise TypeError(f"{node.name}: graph outputs {items!r} are not a tuple")
        if self.parent is not None:  # a subgraph's results, moved where the code after its construct reads them
            self.concrete_outputs = [
                self.index(item) if isinstance(item, fx.Node) else self.add(ScalarValue(item)) for item in items
            ]
            for source, target in zip(self.concrete_outputs, self.binding_outputs or (), strict=False):
                if source != target:
                    self.append(MoveCall(source, target))
            return
        for item in items:
            if isinstance(item, fx.Node):
                self.program.outputs.append(self.index(item))
            else:
                self.program.outputs.append(self.add(ScalarValue(item)))


def _unplanned(program: Program, indices: list[int]) -> None:
    """Leave graph inputs/outputs to the caller (the skip switches): no arena memory for them."""
    for index in indices:
        value = program.values[index]
        if isinstance(value, TensorValue) and not value.is_constant:
            program.values[index] = dataclasses.replace(value, planned=False)


def emit(placed: LoweredProgram | fx.GraphModule) -> Program:
    """Emit a placed program (a `PlacedProgram`, or a bare GraphModule) as a runtime `Program`.

    Its placement options decide what is planned where: with a skip switch the graph inputs (outputs) are left to
    the caller; with non-CPU memory planning off every tensor is planned on CPU (ExecuTorch's legacy planning)."""
    if not isinstance(getattr(placed, "graph_module", placed), fx.GraphModule):
        expect(placed, fx.GraphModule, "placed", "pass place_devices(lowered) (a PlacedProgram) or its graph_module")
    graph_module = placed if isinstance(placed, fx.GraphModule) else placed.graph_module
    options = getattr(placed, "options", {})
    exported = getattr(placed, "exported_program", None)
    ranges = getattr(exported, "range_constraints", {})
    emitter = _Emitter(graph_module, options.get("non_cpu_memory_planning", True), constant_sources(placed), ranges)
    signature = getattr(exported, "graph_signature", None)
    emitter.buffer_names = dict(getattr(signature, "inputs_to_buffers", {}))
    program = emitter.run()
    program.written_back_inputs = list(getattr(placed, "written_back_inputs", ()))
    skip = options.get("skip_h2d_for_method_inputs")
    if skip:  # True: every input; names: those inputs (placement/place.py, skip_names)
        if isinstance(skip, bool):
            _unplanned(program, program.inputs)
        else:
            names = getattr(placed, "input_names", ())
            _unplanned(program, [i for i, n in zip(program.inputs, names, strict=False) if n in set(skip)])
    if options.get("skip_d2h_for_method_outputs"):
        _unplanned(program, program.outputs)
    return program
