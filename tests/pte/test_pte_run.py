"""ExecuTorch's own .pte run by devcopy's runtime: the Program pte_program builds
keeps ExecuTorch's memory plan, loads through load_method in both modes on the simulated accelerator, and its
outputs equal eager; what devcopy cannot run is refused by name."""

import pytest
import torch

from devcopy_lib.devices.device import CPU, Device, DeviceType
from devcopy_lib.load import load_method
from devcopy_lib.pte.convert import PteUnsupportedError, pte_program
from devcopy_lib.pte.reader import open_pte
from devcopy_lib.runtime.memory_plan import Allocation, Buffer
from devcopy_lib.runtime.program import DelegateCall, KernelCall

pytestmark = pytest.mark.reference
CUDA0 = Device(DeviceType.CUDA, 0)


def test_the_program_keeps_executorchs_memory_plan(sin_program):
    program = pte_program(sin_program)
    assert program.memory_plan.buffers == (Buffer(CPU, 0), Buffer(CPU, 96), Buffer(CUDA0, 96))
    assert program.memory_plan.allocations[2] == Allocation(2, sin_program.tensor(2).offset)
    assert len(program.memory_plan.allocations) == 8
    # ExecuTorch's returns are dropped (the out is the last argument); a delegate's outputs are split off
    assert program.instructions[0] == KernelCall(0, (0, 2))
    assert program.instructions[2] == DelegateCall(0, (2, 3), (4,))
    assert program.instructions[5] == KernelCall(3, (6, 1, 7))


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_sin_add_mul_runs_and_equals_eager(sin_model, sin_program, mode, sim):
    module, _ = sin_model
    method = load_method(pte_program(sin_program), mode)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    (out,) = method(a, b)
    torch.testing.assert_close(out, module(a, b))
    # the CUDA buffer came from the device allocator; two H2D copies and one D2H ran on it
    assert sim.stats.allocate_count >= 1 and (sim.stats.h2d_count, sim.stats.d2h_count) == (2, 1)


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_constants_and_int_lists_run(reduce_bytes, mode, sim):
    method = load_method(pte_program(open_pte(reduce_bytes)), mode)
    x = torch.randn(2, 3)
    (out,) = method(x)
    torch.testing.assert_close(out, (x * torch.arange(6.0).reshape(2, 3)).sum(dim=1, keepdim=True))


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_program_needing_a_dim_order_op_runs_as_in_executorch(sim, mode):
    """`+ 1` casts a lifted constant with dim_order_ops::_to_dim_order_copy.out, which both modes' libs hold (more
    such programs in test_pte_dim_order.py)."""
    from devcopy_lib.pte.backend import executorch_pte

    class AddOne(torch.nn.Module):
        def forward(self, x):
            return x + 1

    p = open_pte(executorch_pte(AddOne(), (torch.randn(3),), []))
    assert p.operators[0] == "dim_order_ops::_to_dim_order_copy.out"
    x = torch.randn(3)
    with load_method(pte_program(p), mode) as method:
        (out,) = method(x)
    assert torch.equal(out, x + 1)


def test_another_backends_delegate_is_refused_by_name(pass_through_bytes):
    with pytest.raises(PteUnsupportedError, match="0: DevcopyPassThroughBackend") as info:
        pte_program(open_pte(pass_through_bytes))
    assert info.value.kind == "unsupported_model"


@pytest.fixture(scope="module")
def linear_relu():
    from devcopy_lib.pte.backend import executorch_pte

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
    x = torch.randn(5, 3)
    return model, x, open_pte(executorch_pte(model, (x,), None))


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_delegate_owning_its_weights_runs_with_them_on_its_device(linear_relu, mode, sim):
    """Linear + relu delegated to cuda:0: the weights travel inside the delegate's blob
    (tag_constant_data) and become the delegate's constants on cuda:0, copied there at load; the plan holds only the
    input's H2D and the output's D2H."""
    model, x, p = linear_relu
    assert p.operators == ["et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"]
    program = pte_program(p)
    (delegate,) = program.delegates
    weights = [program.values[i] for i in delegate.constants]
    assert [w.spec.device for w in weights] == [CUDA0] * 2  # the linear's weight and bias
    assert sorted(tuple(w.spec.sizes) for w in weights) == [(4,), (4, 3)]
    with load_method(program, mode) as method:
        (out,) = method(x)
        assert method.copies_executed == {"h2d": 1, "d2h": 1}
    with torch.no_grad():
        torch.testing.assert_close(out, model(x))


def test_a_device_delegate_holding_host_tensors_is_refused_at_load(linear_relu, sim):
    """The simulated device refuses what CUDA refuses: a delegate on cuda:0 whose GraphModule keeps its weights
    itself would read them from host memory."""
    import dataclasses

    from devcopy_lib.pte.backend import load_delegate
    from devcopy_lib.runtime.failures import LoadError

    _, _, p = linear_relu
    program = pte_program(p)
    holding = load_delegate(p.delegates[0].blob).module()  # parameters kept as attributes
    program.delegates[0] = dataclasses.replace(program.delegates[0], module=holding, constants=())
    with pytest.raises(LoadError, match=r"delegate_0.*runs on cuda:0 but its GraphModule holds tensors") as info:
        load_method(program, "portable")
    assert "BackendDelegate.constants" in str(info.value)
