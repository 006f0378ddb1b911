"""A loaded Method is a snapshot of the model at load (docs/reliability.md, "Constants: a snapshot at load"): every
constant - delegate-owned on the device, read by CPU ops, hoisted - is the method's own copy, so a change to the model
never gives a mix of old and new weights; a change torch tracks is refused with ConstantsChangedError naming the
tensor, and `reload_constants()` (or loading again) gives the new model. Both modes, simulated and CuPy backends."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from devcopy_lib import make_allocator, models, scoped_allocators
from devcopy_lib.cli import common
from devcopy_lib.emitter.emit import emit
from devcopy_lib.load import load_method
from devcopy_lib.lowering.lower import export_and_lower, lower
from devcopy_lib.names import MODES, ErrorKind
from devcopy_lib.ops.schema import ET_COPY_OPS_YAML
from devcopy_lib.placement.place import place_devices
from devcopy_lib.runtime.eager import eager_program
from devcopy_lib.runtime.failures import ConstantsChangedError, ExecutionError, LoadError
from devcopy_lib.runtime.libs import aten_lib
from devcopy_lib.runtime.method import Method
from devcopy_lib.tensors.error import Error

BACKENDS = ["simulated", pytest.param("cupy", marks=pytest.mark.gpu)]


class _Mixed(nn.Module):
    """Two delegates and CPU ops: `fc` is delegate-owned, `w` is read by a delegate (its own device copy) and by a
    CPU op, `scale` by a CPU op only (a hoisted constant with `hoist_constants=True`)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.w = nn.Parameter(torch.randn(4))
        self.register_buffer("scale", torch.rand(4) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x) + self.w
        return torch.cumsum(y, 0) - torch.cumsum(self.w, 0) * torch.cumsum(self.scale, 0)


NAMES = ["fc.weight", "fc.bias", "w", "scale"]


def _mixed() -> tuple[_Mixed, torch.Tensor]:
    torch.manual_seed(0)
    return _Mixed(), torch.randn(3, 4)


def _load(model: nn.Module, inputs: tuple[torch.Tensor, ...], mode: str, hoist: bool = False) -> Method:
    placed = place_devices(export_and_lower(model, inputs), hoist_constants=hoist)
    return load_method(placed, mode, None if mode == "portable" else aten_lib(custom_ops=[ET_COPY_OPS_YAML]))


def _eager(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(x).detach().clone()


# ---- the ways a caller changes a model ---------------------------------------------------------------------------
def _tensor(model: nn.Module, name: str) -> torch.Tensor:
    return model.get_parameter(name) if name != "scale" else model.get_buffer(name)


def _add_(model: nn.Module, name: str) -> None:
    with torch.no_grad():
        _tensor(model, name).add_(0.5)


def _load_state_dict(model: nn.Module, name: str, assign: bool = False) -> None:
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state[name] += 0.5
    model.load_state_dict(state, assign=assign)


def _optimizer_step(model: nn.Module, name: str) -> None:
    tensor = _tensor(model, name)
    if not tensor.requires_grad:  # a buffer: no optimizer updates it; write it as a training loop's statistics do
        return _add_(model, name)
    optimizer = torch.optim.SGD([tensor], lr=0.1)
    model(torch.randn(3, 4)).square().sum().backward()
    optimizer.step()
    return None


def _data_assign(model: nn.Module, name: str) -> None:
    tensor = _tensor(model, name)
    tensor.data = tensor.data + 0.5


CHANGES: dict[str, Callable[[nn.Module, str], None]] = {
    "add_ under no_grad": _add_,
    "load_state_dict": _load_state_dict,
    "load_state_dict(assign=True)": lambda model, name: _load_state_dict(model, name, assign=True),
    "optimizer step": _optimizer_step,
    ".data =": _data_assign,
}


# ---- tests ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("hoist", [False, True])
def test_an_unchanged_model_gives_eager_results_on_every_call(backend, mode, hoist):
    model, x = _mixed()
    with make_allocator(backend) as allocator, scoped_allocators(allocator), _load(model, (x,), mode, hoist) as method:
        for _ in range(3):
            torch.testing.assert_close(method(x)[0], _eager(model, x))


@pytest.mark.parametrize("backend", BACKENDS)
@given(
    name=st.sampled_from(NAMES),
    change=st.sampled_from(sorted(CHANGES)),
    mode=st.sampled_from(MODES),
    hoist=st.booleans(),
)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_changed_tensor_is_refused_by_name_then_reload_gives_the_new_model(backend, name, change, mode, hoist):
    model, x = _mixed()
    with make_allocator(backend) as allocator, scoped_allocators(allocator), _load(model, (x,), mode, hoist) as method:
        old = _eager(model, x)
        torch.testing.assert_close(method(x)[0], old)
        CHANGES[change](model, name)
        new = _eager(model, x)
        assert not torch.allclose(new, old)
        with pytest.raises(ConstantsChangedError, match=rf"{name} was .*reload_constants\(\)") as raised:
            method(x)
        # load_state_dict writes (or replaces) every tensor of the model, the other changes only `name`
        assert set(raised.value.changed) == (set(NAMES) if change.startswith("load_state_dict") else {name})
        method.reload_constants()
        torch.testing.assert_close(method(x)[0], new)
        with _load(model, (x,), mode, hoist) as again:  # loading again takes the new model too
            torch.testing.assert_close(again(x)[0], new)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("hoist", [False, True])
def test_a_write_torch_does_not_track_never_mixes_old_and_new_weights(backend, mode, name, hoist):
    """`.data.add_` bypasses the version counter, so the change goes unseen; the method still computes the whole
    model as it was at load, never delegate constants of one model and CPU constants of another."""
    model, x = _mixed()
    with make_allocator(backend) as allocator, scoped_allocators(allocator), _load(model, (x,), mode, hoist) as method:
        old = _eager(model, x)
        _tensor(model, name).data.add_(0.5)
        assert not torch.allclose(_eager(model, x), old)
        torch.testing.assert_close(method(x)[0], old)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("assign", [False, True])
def test_the_snapshot_is_taken_at_load_not_when_the_program_was_emitted(sim, mode, assign):
    model, x = _mixed()
    program = emit(place_devices(export_and_lower(model, (x,))))
    _load_state_dict(model, "w", assign=assign)
    with load_method(program, mode, None if mode == "portable" else aten_lib(custom_ops=[ET_COPY_OPS_YAML])) as m:
        torch.testing.assert_close(m(x)[0], _eager(model, x))


def test_the_error_is_an_execution_failure_in_invalid_state_naming_every_changed_tensor(sim):
    model, x = _mixed()
    with _load(model, (x,), "portable") as method:
        _add_(model, "fc.bias")
        model.w = nn.Parameter(torch.zeros(4))
        with pytest.raises(ConstantsChangedError) as raised:
            method(x)
    error = raised.value
    assert isinstance(error, ExecutionError) and error.kind == ErrorKind.EXECUTION
    assert error.error == Error.InvalidState
    assert common.classify(error) == (ErrorKind.EXECUTION, {"error_code": "InvalidState"})  # as the CLI reports it
    assert sorted(error.changed) == ["fc.bias", "w"]
    message = str(error)
    assert "fc.bias was written in place (its version went from" in message
    assert "w was replaced by another tensor" in message
    assert "load_method(...) again" in message


def test_a_model_moved_to_other_memory_is_seen(sim):
    model, x = _mixed()
    with _load(model, (x,), "aten") as method:
        model.fc.weight.data = model.fc.weight.data.clone()  # what module.to(...) does to each parameter
        with pytest.raises(ConstantsChangedError, match="fc.weight was moved to other memory"):
            method(x)


@pytest.mark.parametrize("mode", MODES)
def test_a_new_shape_is_refused_on_reload_and_the_method_keeps_refusing(sim, mode):
    model, x = _mixed()
    with _load(model, (x,), mode) as method:
        model.w = nn.Parameter(torch.randn(5))
        with pytest.raises(ConstantsChangedError, match="w was replaced"):
            method(x)
        with pytest.raises(LoadError, match=r"'w' is now a torch.float32 tensor of sizes \[5\].*export_and_lower"):
            method.reload_constants()
        with pytest.raises(ConstantsChangedError):  # the old snapshot stands, and still differs from the model
            method(x)


@pytest.mark.parametrize("mode", MODES)
def test_a_reload_failing_midway_refuses_every_call_until_one_succeeds(sim, mode, monkeypatch):
    model, x = _mixed()
    with _load(model, (x,), mode, hoist=True) as method:
        _add_(model, "fc.weight")

        def fail(*args, **kwargs):
            raise RuntimeError("the device is gone")

        with monkeypatch.context() as patch:
            patch.setattr(sim, "copy_host_to_device", fail)
            with pytest.raises(LoadError, match="the device is gone"):
                method.reload_constants()
        with pytest.raises(ConstantsChangedError, match="incomplete: reloading them failed midway"):
            method(x)
        method.reload_constants()
        torch.testing.assert_close(method(x)[0], _eager(model, x))


def test_a_closed_method_refuses_to_reload(sim):
    model, x = _mixed()
    method = _load(model, (x,), "portable")
    method.close()
    with pytest.raises(ExecutionError, match="closed"):
        method.reload_constants()


@pytest.mark.parametrize("mode", MODES)
def test_a_reload_runs_the_load_time_part_again(sim, mode):
    model, x = _mixed()
    with _load(model, (x,), mode, hoist=True) as method:
        first = dict(method.load_copies)
        assert first["h2d"] == 2  # the hoisted cumsums of w and scale
        _add_(model, "scale")
        method.reload_constants()
        assert method.load_copies["h2d"] == 2 * first["h2d"]
        torch.testing.assert_close(method(x)[0], _eager(model, x))


@pytest.mark.parametrize("mode", MODES)
def test_a_program_exported_apart_from_its_model_still_sees_in_place_writes(sim, mode):
    """`lower` of a program the caller exported with torch.export: no module is known to watch for replaced
    tensors, yet an in-place write to the model is still refused."""
    model, x = _mixed()
    exported = torch.export.export(model, (x,)).run_decompositions()
    with load_method(place_devices(lower(exported)), mode) as method:
        at_load = _eager(model, x)
        model.w = nn.Parameter(torch.zeros(4))  # unseen without the module: the method keeps the model at load
        torch.testing.assert_close(method(x)[0], at_load)
        _add_(model, "fc.weight")
        with pytest.raises(ConstantsChangedError, match="fc.weight was written in place"):
            method(x)


@pytest.mark.parametrize("mode", MODES)
def test_a_sample_model_trained_one_step_is_refused_then_reloaded(sim, mode):
    model, inputs = models.mlp()
    with _load(model, inputs, mode) as method:
        torch.testing.assert_close(method(*inputs)[0], _eager(model, *inputs))
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
        model(*inputs).sum().backward()
        optimizer.step()
        with pytest.raises(ConstantsChangedError) as raised:
            method(*inputs)
        assert set(raised.value.changed) == {name for name, _ in model.named_parameters()}
        method.reload_constants()
        torch.testing.assert_close(method(*inputs)[0], _eager(model, *inputs))


def test_the_eager_placed_reference_is_a_snapshot_too(sim):
    model, x = _mixed()
    run = eager_program(emit(place_devices(export_and_lower(model, (x,)))))
    old = _eager(model, x)
    _add_(model, "w")
    torch.testing.assert_close(run(x)[0], old)
