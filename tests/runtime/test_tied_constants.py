"""A tensor two delegates own (a tied weight, as GPT-2's token embedding and lm_head) is one copy per device in a
loaded method, and one in the placement report's constant bytes; a reload that finds it untied is refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from devcopy_lib import make_allocator, scoped_allocators
from devcopy_lib.load import load_method
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.names import MODES
from devcopy_lib.ops.schema import ET_COPY_OPS_YAML
from devcopy_lib.placement.place import place_devices
from devcopy_lib.runtime.failures import ConstantsChangedError, LoadError
from devcopy_lib.runtime.libs import aten_lib
from devcopy_lib.runtime.method import Method

BACKENDS = ["simulated", pytest.param("cupy", marks=pytest.mark.gpu)]
WEIGHT_BYTES = 8 * 8 * 4


class _Tied(nn.Module):
    """Two linear layers, one delegate each (the CPU `cos` between them splits the delegates); `tied`: one weight."""

    def __init__(self, tied: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Linear(8, 8, bias=False)
        self.head = nn.Linear(8, 8, bias=False)
        if tied:
            self.head.weight = self.embed.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cos(self.embed(x)))


def _placed(model: nn.Module, x: torch.Tensor):
    return place_devices(export_and_lower(model, (x,), delegate_ops=["mm.default", "permute.default"]))


def _load(model: nn.Module, x: torch.Tensor, mode: str) -> Method:
    return load_method(_placed(model, x), mode, None if mode == "portable" else aten_lib(custom_ops=[ET_COPY_OPS_YAML]))


def _eager(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x)


def test_the_report_counts_a_tied_weight_once():
    x = torch.randn(4, 8)
    tied, untied = _placed(_Tied(tied=True), x), _placed(_Tied(tied=False), x)
    assert len(tied.delegates) == 2 and all(d.constants for d in tied.delegates.values())
    assert tied.report.constant_bytes == tied.constant_bytes == WEIGHT_BYTES
    assert untied.report.constant_bytes == 2 * WEIGHT_BYTES


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_a_tied_weight_is_one_device_copy_and_outputs_equal_eager(backend, mode):
    x = torch.randn(4, 8)
    held = {}
    for tied in (True, False):
        model = _Tied(tied)
        with make_allocator(backend) as allocator, scoped_allocators(allocator), _load(model, x, mode) as method:
            held[tied] = allocator.stats.live_bytes
            for _ in range(2):
                torch.testing.assert_close(method(x)[0], _eager(model, x))
    assert held[False] - held[True] >= WEIGHT_BYTES  # the untied model holds a second weight copy (aligned)


@pytest.mark.parametrize("mode", MODES)
def test_a_reload_reaches_both_delegates(sim, mode):
    model, x = _Tied(tied=True), torch.randn(4, 8)
    with _load(model, x, mode) as method:
        with torch.no_grad():
            model.embed.weight.add_(0.5)  # both layers read it
        method.reload_constants()
        torch.testing.assert_close(method(x)[0], _eager(model, x))


class _Aliased(nn.Module):
    """A parameter and a buffer over the same storage (two names, one tensor's elements), one delegate each."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(8, 8))
        self.register_buffer("v", self.w.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mm(torch.cos(torch.mm(x, self.w)), self.v)


@pytest.mark.parametrize("mode", MODES)
def test_a_reload_that_finds_the_shared_tensor_untied_is_refused(sim, mode):
    model, x = _Aliased(), torch.randn(4, 8)
    assert _placed(model, x).report.constant_bytes == WEIGHT_BYTES
    with _load(model, x, mode) as method:
        torch.testing.assert_close(method(x)[0], _eager(model, x))
        model.v = model.w.detach() * 2  # a tensor of its own now
        with pytest.raises(LoadError, match=r"v and w were one tensor at load \(tied\).*load_method"):
            method.reload_constants()
        with pytest.raises(ConstantsChangedError):  # the method keeps its snapshot and refuses the changed model
            method(x)
