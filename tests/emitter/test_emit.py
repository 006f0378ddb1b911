"""Emit (docs/semantics.md §5b): out variants with planned outs, lifted scalars, delegate instructions,
operator-table order."""

from __future__ import annotations

import pytest
import torch
from placement_helpers import Fn

from devcopy_lib import models
from devcopy_lib.devices import CPU, Device
from devcopy_lib.emitter.emit import emit
from devcopy_lib.emitter.out_variant import operator_name, out_variant
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.placement.place import place_devices
from devcopy_lib.runtime.program import DelegateCall, KernelCall, TensorValue

CUDA0 = Device.parse("cuda:0")


def _emitted(model, inputs, delegate_ops=None, **placement):
    return emit(place_devices(export_and_lower(model, inputs, delegate_ops=delegate_ops), **placement))


@pytest.mark.parametrize(
    "op, name",
    [
        (torch.ops.aten.add.Tensor, "aten::add.out"),
        (torch.ops.aten.view.default, "aten::view_copy.out"),
        (torch.ops.aten.permute.default, "aten::permute_copy.out"),
        (torch.ops.aten.transpose.int, "aten::transpose_copy.int_out"),
        (torch.ops.aten.max.dim, "aten::max.dim_max"),
        (torch.ops.et_copy._h2d_copy.default, "et_copy::_h2d_copy.out"),
        (torch.ops.et_copy._d2h_copy.default, "et_copy::_d2h_copy.out"),
    ],
)
def test_functional_ops_become_out_variants_and_views_their_copy_variants(op, name):
    assert operator_name(out_variant(op)) == name


def test_add_emits_h2d_h2d_delegate_d2h_with_the_copies_in_first_use_order():
    program = _emitted(*models.add())
    assert program.operators == ["et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"]
    ops = [program.operators[i.op] if isinstance(i, KernelCall) else "delegate" for i in program.instructions]
    assert ops == ["et_copy::_h2d_copy.out", "et_copy::_h2d_copy.out", "delegate", "et_copy::_d2h_copy.out"]
    h2d = program.instructions[0]
    source, out = (program.tensor(i) for i in h2d.args)
    assert (source.spec.device, out.spec.device) == (CPU, CUDA0)
    assert out.planned and not out.is_constant


def test_delegate_reads_device_values_and_its_owned_constants_are_device_constants():
    program = _emitted(*models.mlp())
    (call,) = [i for i in program.instructions if isinstance(i, DelegateCall)]
    delegate = program.delegates[call.delegate]
    assert delegate.device == CUDA0
    assert all(program.tensor(i).spec.device == CUDA0 for i in (*call.args, *call.outputs))
    constants = [program.tensor(i) for i in delegate.constants]
    assert constants and all(c.is_constant and c.spec.device == CUDA0 and not c.planned for c in constants)


def test_python_scalar_where_a_tensor_is_wanted_becomes_a_lifted_constant():
    program = _emitted(Fn(lambda x: torch.sin(x) * 2.0), (torch.randn(3),), delegate_ops=["sin.default"])
    mul = next(
        i for i in program.instructions if isinstance(i, KernelCall) and program.operators[i.op] == "aten::mul.out"
    )
    scalar = program.tensor(mul.args[1])
    assert scalar.is_constant and scalar.data.item() == 2.0 and scalar.spec.sizes == ()


def test_multi_output_ops_get_one_planned_out_each_and_getitem_reads_them():
    program = _emitted(*models.transformer_block(), delegate_ops=["mm.default"])  # layer norm and split on CPU
    layer_norm = next(
        i
        for i in program.instructions
        if isinstance(i, KernelCall) and program.operators[i.op] == "aten::native_layer_norm.out"
    )
    outs = [program.tensor(i) for i in layer_norm.args[-3:]]
    assert all(o.planned for o in outs)
    assert "aten::split_with_sizes_copy.out" in program.operators


def test_skip_switches_leave_graph_inputs_and_outputs_to_the_caller():
    program = _emitted(*models.add(), skip_h2d_for_method_inputs=True, skip_d2h_for_method_outputs=True)
    assert program.operators == []
    for index in (*program.inputs, *program.outputs):
        value = program.tensor(index)
        assert not value.planned and value.spec.device == CUDA0


def test_without_non_cpu_memory_planning_every_tensor_is_planned_on_cpu():
    program = _emitted(*models.add(), non_cpu_memory_planning=False)
    tensors = [v for v in program.values if isinstance(v, TensorValue)]
    assert all(v.spec.device == CPU for v in tensors)


def test_dynamic_dimensions_are_planned_at_their_upper_bound():
    batch = torch.export.Dim("batch", max=16)
    model, _ = models.add()
    lowered = export_and_lower(model, (torch.randn(4, 4), torch.randn(4, 4)), dynamic_shapes=({0: batch}, {0: batch}))
    program = emit(place_devices(lowered))
    value = program.tensor(program.outputs[0])
    assert value.spec.sizes == (16, 4) and value.spec.dynamic


def test_an_unbounded_dynamic_dimension_is_refused_with_the_fix():
    batch = torch.export.Dim("batch")
    model, _ = models.add()
    lowered = export_and_lower(model, (torch.randn(4, 4), torch.randn(4, 4)), dynamic_shapes=({0: batch}, {0: batch}))
    with pytest.raises(ValueError, match="Give its torch.export.Dim a max"):
        emit(place_devices(lowered))
