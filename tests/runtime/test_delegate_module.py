"""`delegate_module`: a delegate's GraphModule as it runs on a device. Ops that create tensors (`arange`,
`scalar_tensor`, `full`) were traced with the CPU as their device; on the delegate's device they must create there,
beside its inputs, or CUDA refuses to mix them ("Expected all tensors to be on the same device"). The meta device
stands in for a second device on this machine: a tensor created on the wrong device shows in its `.device`."""

import pytest
import torch

from devcopy_lib import export_program
from devcopy_lib.runtime.delegates import delegate_module


class Masked(torch.nn.Module):
    """A causal mask built from positions, as a decode step builds one: two `arange`s and a `full`."""

    def forward(self, x):
        positions = torch.arange(x.shape[-1])
        mask = positions[None, :] <= torch.arange(x.shape[-1])[:, None]
        return torch.where(mask, x, torch.full(x.shape, -1.0))


def _graph_module() -> torch.fx.GraphModule:
    return export_program(Masked(), (torch.randn(4, 4),)).graph_module


def _creating(module: torch.fx.GraphModule) -> list[torch.device]:
    return [n.kwargs["device"] for n in module.graph.nodes if isinstance(n.kwargs.get("device"), torch.device)]


@pytest.mark.parametrize("direct", [True, False])
def test_ops_that_create_tensors_create_them_on_the_delegates_device(direct):
    module = _graph_module()
    traced = _creating(module)
    assert traced and set(traced) == {torch.device("cpu")}
    on_meta = delegate_module(module, torch.device("meta"), direct=direct)
    assert _creating(on_meta) == [torch.device("meta")] * len(traced)
    (out,) = on_meta(torch.empty(4, 4, device="meta"))
    assert out.device.type == "meta" and out.shape == (4, 4)
    assert _creating(module) == traced  # the program's own module is unchanged


def test_on_the_cpu_the_module_computes_as_traced_and_each_variant_is_built_once():
    module = _graph_module()
    x = torch.randn(4, 4)
    (ours,) = delegate_module(module, torch.device("cpu"))(x)
    torch.testing.assert_close(ours, Masked()(x))
    cpu = torch.device("cpu")
    assert delegate_module(module, cpu) is delegate_module(module, cpu)
    assert delegate_module(module, cpu, direct=False) is not delegate_module(module, cpu)
