"""ExecuTorch's ATen-mode rule, pinned: a planned tensor need not say where its memory is, so the copy direction comes
from the op's identity (`_h2d` = to the device), never from the tensors' device labels (docs/semantics.md §4). Every
device tensor here is labelled `cpu` (`carry_device=False`, as in an ATen-mode build without device info): through
the kernel and through a loaded Method, under both device rules.

A kernel that took its direction from `self`'s label would call a D2H or a D2D an H2D; these tests then fail.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devcopy_lib import SimulatedCudaAllocator, export_and_lower, place_devices, scoped_allocators
from devcopy_lib.kernels.device_copy import d2d_copy_out, d2h_copy_out, h2d_copy_out
from devcopy_lib.load import load_method
from devcopy_lib.names import DEVICE_COPY_LIB, DEVICE_RULES, PEER_COPY_LIB
from devcopy_lib.runtime import mode_tensors
from devcopy_lib.runtime.libs import lib_by_name, native_lib
from devcopy_lib.tensors.aten_tensor import device_tensor


def _unlabelled(sim, data: torch.Tensor, index: int) -> torch.Tensor:
    """`data` copied to simulated cuda:`index`, as a tensor labelled cpu."""
    ptr = sim.allocate(max(data.nbytes, 1), index)
    sim.copy_host_to_device(ptr, data.numpy(), data.nbytes, index)
    return device_tensor(ptr, data.dtype, tuple(data.shape), carry_device=False)


def _read(sim, tensor: torch.Tensor) -> list[float]:
    return sim.device_array(tensor.ptr, np.float32, tuple(tensor.shape)).tolist()


@pytest.fixture
def sim():
    allocator = SimulatedCudaAllocator(peer_access=True)
    allocator.set_current_index(1)
    with scoped_allocators(allocator):
        yield allocator


@pytest.mark.parametrize("rule", DEVICE_RULES)
def test_h2d_into_an_unlabelled_device_tensor(sim, rule):
    out = _unlabelled(sim, torch.zeros(3), 1)
    assert out.device.type == "cpu"
    before = sim.stats.h2d_count
    assert h2d_copy_out(torch.tensor([1.0, -0.0, 3.5]), out, rule) is out
    assert (sim.stats.h2d_count - before, sim.stats.d2h_count) == (1, 0)
    assert sim.stats.last_h2d.index == 1  # no carried device: the current one, under either rule
    assert _read(sim, out) == [1.0, -0.0, 3.5]


@pytest.mark.parametrize("rule", DEVICE_RULES)
def test_d2h_from_an_unlabelled_device_tensor(sim, rule):
    src = _unlabelled(sim, torch.tensor([4.0, 5.0]), 1)
    h2d_before = sim.stats.h2d_count
    out = torch.zeros(2)
    assert d2h_copy_out(src, out, rule) is out
    assert (sim.stats.d2h_count, sim.stats.h2d_count - h2d_before) == (1, 0)
    assert out.tolist() == [4.0, 5.0]


@pytest.mark.parametrize("rule", DEVICE_RULES)
def test_d2d_between_unlabelled_device_tensors(sim, rule):
    src, out = _unlabelled(sim, torch.tensor([7.0, 8.0]), 0), _unlabelled(sim, torch.zeros(2), 1)
    h2d_before = sim.stats.h2d_count
    assert d2d_copy_out(src, out, rule) is out
    assert (sim.stats.d2d_count, sim.stats.d2h_count, sim.stats.h2d_count - h2d_before) == (1, 0, 0)
    assert _read(sim, out) == [7.0, 8.0]


class AddThenScale(torch.nn.Module):
    def forward(self, a, b):
        return (a + b) * b


@pytest.fixture
def unlabelled_method_tensors(monkeypatch):
    """Every device tensor a Method builds is labelled cpu; returns the list of the tensors built."""
    built = []

    def build(*args, **kwargs):
        tensor = device_tensor(*args, **{**kwargs, "carry_device": False})
        built.append(tensor)
        return tensor

    monkeypatch.setattr(mode_tensors, "device_tensor", build)
    return built


@pytest.fixture(scope="module")
def two_device_program():
    inputs = (torch.tensor([1.0, -2.0, 3.0]), torch.tensor([0.5, 4.0, -1.0]))
    return export_and_lower(
        AddThenScale(),
        inputs,
        ["add.Tensor", "mul.Tensor"],
        partition="per_node",
        target_device={"delegate_0": "cuda:0", "delegate_1": "cuda:1"},
    ), inputs


@pytest.mark.parametrize("rule", DEVICE_RULES)
@pytest.mark.parametrize("strategy", ["executorch", "peer"])
def test_a_loaded_method_with_unlabelled_device_tensors_equals_eager(
    unlabelled_method_tensors, two_device_program, rule, strategy
):
    """H2D and D2H (`executorch`), and D2D (`peer`: add on cuda:0, mul on cuda:1, so the sum goes device to device),
    all through the ATen-mode libs built for `rule`."""
    lowered, inputs = two_device_program
    libs = [native_lib(), lib_by_name(DEVICE_COPY_LIB, rule), lib_by_name(PEER_COPY_LIB, rule)]
    sim = SimulatedCudaAllocator(peer_access=True)
    with scoped_allocators(sim), load_method(place_devices(lowered, strategy=strategy), "aten", libs) as method:
        (out,) = method(*inputs)
        executed = dict(method.copies_executed)
    assert unlabelled_method_tensors and all(t.device.type == "cpu" for t in unlabelled_method_tensors)
    torch.testing.assert_close(out, AddThenScale()(*inputs))
    if strategy == "peer":
        assert executed == {"h2d": 3, "d2h": 1, "d2d": 1} and sim.stats.d2d_count == 1
    else:
        assert executed == {"h2d": 4, "d2h": 2} and sim.stats.d2d_count == 0
