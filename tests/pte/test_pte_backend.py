"""devcopy's ExecuTorch backend inside ExecuTorch's own `to_edge_transform_and_lower(...).to_executorch()`: the
partitioner's compile spec drives ExecuTorch's device pass (copies, device buffer), and the backend's blob is the
delegated subgraph as torch.export serializes it, which runs again after loading."""

import pytest
import torch

from devcopy_lib.devices.device import Device, DeviceType
from devcopy_lib.pte.backend import BACKEND_ID, backend, executorch_manager, load_delegate, partitioner
from devcopy_lib.pte.reader import PteDelegate, PteKernel, open_pte

pytestmark = pytest.mark.reference

SIN_OPERATORS = ["et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out", "aten::sin.out", "aten::mul.out"]


def test_the_partitioner_is_an_executorch_partitioner_with_the_target_device_spec():
    from executorch.exir.backend.partitioner import Partitioner
    from executorch.exir.passes.propagate_device_pass import TARGET_DEVICE_COMPILE_SPEC_KEY

    p = partitioner(["add.Tensor"], "cuda:1")
    assert isinstance(p, Partitioner)
    assert p.delegate_ops == frozenset({"add.Tensor"}) and p.target_device == "cuda:1"
    assert p.delegation_spec.backend_id == BACKEND_ID == backend().__name__
    assert [(s.key, s.value) for s in p.delegation_spec.compile_specs] == [(TARGET_DEVICE_COMPILE_SPEC_KEY, b"cuda:1")]
    assert partitioner(["add.Tensor"], None).delegation_spec.compile_specs == []


def test_sin_add_mul_plan_is_executorchs_device_plan(sin_program):
    p = sin_program
    assert p.plan == "forward" and p.plans == ("forward",)
    assert p.operators == SIN_OPERATORS
    kinds = [(i.kind, p.operators[i.op] if isinstance(i, PteKernel) else None) for i in p.instructions]
    assert kinds == [
        ("kernel", "et_copy::_h2d_copy.out"),
        ("kernel", "et_copy::_h2d_copy.out"),
        ("delegate", None),
        ("kernel", "et_copy::_d2h_copy.out"),
        ("kernel", "aten::sin.out"),
        ("kernel", "aten::mul.out"),
    ]
    # float32 [2, 3] = 24 bytes, planned in 32-byte steps: two H2D outs + the delegate's output on the device
    assert p.buffer_sizes == [0, 96, 96]
    assert p.buffer_devices == {2: Device(DeviceType.CUDA, 0)}
    assert [d.backend_id for d in p.delegates] == [BACKEND_ID]
    assert p.delegates[0].device == Device(DeviceType.CUDA, 0)
    assert p.delegates[0].compile_specs == {"target_device": b"cuda:0"}


def test_the_delegate_blob_runs_the_delegated_subgraph(sin_program):
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    program = load_delegate(sin_program.delegates[0].blob)
    assert isinstance(program, torch.export.ExportedProgram)
    (out,) = program.module()(a, b)
    torch.testing.assert_close(out, a + b)


def test_the_delegate_reads_and_writes_device_values(sin_program):
    p = sin_program
    (call,) = [i for i in p.instructions if isinstance(i, PteDelegate)]
    assert all(p.tensor(v).device == Device(DeviceType.CUDA, 0) and p.tensor(v).mem_id == 2 for v in call.args)


def test_cuda_1_reaches_the_program_and_no_target_device_means_no_copies():
    from devcopy_lib.pte.backend import executorch_pte

    class Add(torch.nn.Module):
        def forward(self, a, b):
            return a + b

    args = (torch.randn(2), torch.randn(2))
    on_1 = open_pte(executorch_pte(Add(), args, ["add.Tensor"], "cuda:1"))
    assert on_1.buffer_devices == {2: Device(DeviceType.CUDA, 1)} and on_1.delegates[0].device.index == 1
    on_cpu = open_pte(executorch_pte(Add(), args, ["add.Tensor"], None))
    assert on_cpu.operators == [] and on_cpu.buffer_devices == {} and on_cpu.delegates[0].device is None
    assert [i.kind for i in on_cpu.instructions] == ["delegate"]


def test_the_manager_opens_like_its_bytes(sin_model, sin_bytes):
    module, inputs = sin_model
    manager = executorch_manager(module, inputs, ["add.Tensor"])
    assert open_pte(manager).operators == open_pte(sin_bytes).operators == SIN_OPERATORS


def test_a_foreign_backends_program_still_opens(pass_through_bytes):
    p = open_pte(pass_through_bytes)
    assert p.operators == SIN_OPERATORS
    assert p.delegates[0].backend_id == "DevcopyPassThroughBackend" and p.delegates[0].blob == b"devcopy-pass-through"
    with pytest.raises(ValueError, match="not a DevcopyExportBackend blob"):
        load_delegate(p.delegates[0].blob)
