"""workflows.model without the CLI: `place_model` and `run_model` take plain options and return the result
`devcopy place` / `devcopy run` print; a bad argument is the library's own InvalidArgumentError."""

from __future__ import annotations

import contextlib

import pytest
import torch

from devcopy_lib import models
from devcopy_lib.errors import InvalidArgumentError
from devcopy_lib.workflows.model import NoSuchDelegate, NoSuchDevice, PlacementOptions, place_model, run_model
from devcopy_lib.workflows.trial import RunOptions


def _mlp():
    module, inputs = models.load_model("mlp")
    return module, tuple(inputs)


def test_place_model_reports_the_delegates_their_devices_and_the_copies():
    module, inputs = _mlp()
    result = place_model(module, inputs, PlacementOptions(), "simulated", "mlp")
    assert result["ok"] and result["model"] == "mlp" and result["target"] == "cuda:0" and result["targets"] == {}
    assert result["delegates"] == len(result["delegate_devices"]) > 0
    assert set(result["delegate_devices"].values()) == {"cuda:0"}
    assert result["strategy"] == "executorch" and result["copies"]["h2d"] > 0 and result["copies"]["d2h"] > 0
    assert set(result["model_delegate_ops"]) <= set(result["delegate_ops"])


def test_place_model_with_a_diff_compares_the_second_placement():
    module, inputs = _mlp()
    result = place_model(
        module, inputs, PlacementOptions(), "simulated", "mlp", diff=PlacementOptions(strategy="dedupe")
    )
    assert set(result["diff"]) >= {"appear", "vanish", "changed", "a", "b", "totals"}


def test_a_target_naming_no_delegate_is_the_librarys_invalid_argument_error():
    module, inputs = _mlp()
    with pytest.raises(NoSuchDelegate, match="delegate_7: no such delegate") as refused:
        place_model(module, inputs, PlacementOptions(targets={"delegate_7": "cuda:1"}), "simulated", "mlp")
    assert isinstance(refused.value, InvalidArgumentError)
    assert refused.value.names == ["delegate_7"] and refused.value.made == ["delegate_0"]


def test_an_op_target_maps_every_delegated_op():
    options = PlacementOptions(delegate_ops=("add.Tensor", "mm.default"), targets={"mm.default": "cuda:1"})
    assert options.target_device == {"add.Tensor": "cuda:0", "mm.default": "cuda:1"}
    assert PlacementOptions(target="cuda:2").target_device == "cuda:2"


def test_the_models_own_code_runs_inside_the_callers_guard():
    stages = []

    @contextlib.contextmanager
    def guard(stage):
        stages.append(stage)
        yield

    module, inputs = _mlp()
    run_model(module, inputs, PlacementOptions(), RunOptions(steps=2), "simulated", "mlp", guard)
    assert stages == ["torch.export", "the eager run", "the eager run"]


def test_run_model_compares_each_step_with_eager():
    module, inputs = _mlp()
    result = run_model(module, inputs, PlacementOptions(), RunOptions(steps=2), "simulated", "mlp")
    assert result["ok"] and result["backend"] == "simulated" and result["mode"] == "portable"
    assert result["steps"] == 2 and len(result["step_errors"]) == 2 and result["max_abs_err"] == 0.0
    assert result["copies_executed"]["h2d"] > 0 and "profile" not in result


def test_run_model_sees_a_mismatch():
    class Shifted(torch.nn.Module):
        """`x + shift`: the export bakes in the shift of its time, the eager run uses the one of its own."""

        shift = 0.0

        def forward(self, x):
            return x + self.shift

    module = Shifted()

    @contextlib.contextmanager
    def shift_before_the_eager_run(stage):
        module.shift = 1.0 if stage == "the eager run" else 0.0
        yield

    result = run_model(
        module, (torch.ones(3),), PlacementOptions(), RunOptions(), "simulated", "shifted", shift_before_the_eager_run
    )
    assert not result["ok"] and result["max_abs_err"] == 1.0


def test_a_device_the_backend_lacks_is_refused_before_loading(monkeypatch):
    from devcopy_lib.devices import SimulatedCudaAllocator, backend

    class OneDevice(SimulatedCudaAllocator):
        def device_count(self):
            return 1

    monkeypatch.setattr(backend, "make_allocator", lambda name: OneDevice())
    monkeypatch.setattr("devcopy_lib.load.load_method", lambda *a, **k: pytest.fail("loaded before the check"))
    module, inputs = _mlp()
    with pytest.raises(NoSuchDevice) as refused:
        run_model(module, inputs, PlacementOptions(target="cuda:1"), RunOptions(), "simulated", "mlp")
    assert (refused.value.devices, refused.value.backend, refused.value.count) == (["cuda:1"], "simulated", 1)


def test_a_trace_without_profiled_calls_is_refused():
    with pytest.raises(InvalidArgumentError, match="profile"):
        RunOptions(trace="t.json")
