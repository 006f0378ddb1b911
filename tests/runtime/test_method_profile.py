"""`Method.profile` and `devcopy run --profile`: one row per instruction, copies priced by the cost model passed in,
and the table / timeline the workbench shows."""

from __future__ import annotations

import json

import pytest
import torch

from devcopy_lib import models
from devcopy_lib.bench.cost_model import FIT_METHOD
from devcopy_lib.bench.profile_view import markdown_table, plot_timeline, profile_table
from devcopy_lib.cli import main
from devcopy_lib.devices import SimulatedCudaAllocator, scoped_allocators
from devcopy_lib.devices.allocator import Capabilities, DeviceTimer
from devcopy_lib.load import load_method
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.placement.place import place_devices


class _PerByte:
    """A cost model that charges 1 ns per byte and records what it was asked."""

    def __init__(self) -> None:
        self.asked = []

    def predict(self, direction, nbytes, memory="pinned"):
        self.asked.append((direction, nbytes, memory))
        return nbytes * 1e-9


def _add_method():
    module, inputs = models.add()
    return module, inputs, load_method(place_devices(export_and_lower(module, inputs)))


def test_profile_times_every_instruction_and_prices_only_copies(sim):
    module, inputs, method = _add_method()
    model = _PerByte()
    with method:
        rows = method.profile(*inputs, repeat=3, cost_model=model)
        assert [(r["index"], r["kind"]) for r in rows] == [(0, "copy"), (1, "copy"), (2, "delegate"), (3, "copy")]
        assert [r["bytes"] for r in rows] == [64, 64, None, 64]
        assert [r["predicted_s"] for r in rows] == [64e-9, 64e-9, None, 64e-9]
        assert set(model.asked) == {("h2d", 64, "pageable"), ("d2h", 64, "pageable")}
        assert all(r["measured_s"] > 0 and r["clock"] == "wall" and r["device_s"] is None for r in rows)
        assert method.copies_executed == {"h2d": 6, "d2h": 3}  # profiled calls are real calls
        torch.testing.assert_close(method(*inputs)[0], module(*inputs))
        with pytest.raises(ValueError, match="repeat must be an int >= 1, got 0"):
            method.profile(*inputs, repeat=0)
        assert all(r["predicted_s"] is None for r in method.profile(*inputs, repeat=1))


def test_profile_runs_ten_calls_by_default(sim):
    _, inputs, method = _add_method()
    with method:
        method.profile(*inputs)
        assert method.copies_executed == {"h2d": 20, "d2h": 10}


def test_profile_table_and_timeline_show_each_step_and_the_prediction_ratio(sim):
    _, inputs, method = _add_method()
    with method:
        rows = method.profile(*inputs, repeat=2, cost_model=_PerByte())
    table = profile_table(rows)
    assert [r["kind"] for r in table] == ["copy", "copy", "delegate", "copy", ""]
    assert table[0]["pred/meas"] == f"{64e-9 / rows[0]['wall_s']:.2f}" and table[2]["pred/meas"] == ""
    assert table[-1]["#"] == "total" and "| delegate |" in markdown_table(rows)
    figure = plot_timeline(rows)
    bars = figure.axes[0].patches
    assert len(bars) == len(rows) + 3  # one bar per instruction, one outline per predicted copy


class _Checked(_PerByte):
    """A pricer that also knows its out-of-sample error: 8% for every size."""

    def error(self, direction, nbytes, memory=None):
        return 0.08


def test_a_checked_pricer_puts_its_error_beside_each_predicted_copy(sim):
    _, inputs, method = _add_method()
    with method:
        rows = method.profile(*inputs, repeat=1, cost_model=_Checked())
        plain = method.profile(*inputs, repeat=1, cost_model=_PerByte())
    assert [r["predicted_error"] for r in rows] == [0.08, 0.08, None, 0.08]
    assert all(r["predicted_error"] is None for r in plain)
    table = profile_table(rows)
    assert table[0]["predicted"] == "0.1 us ±8%" and table[2]["predicted"] == ""
    assert "±" not in profile_table(plain)[0]["predicted"]


def test_devcopy_run_profile_puts_rows_in_the_json(capsys):
    code = main(["run", "add", "--backend", "simulated", "--profile", "2", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["ok"] is True
    assert [r["kind"] for r in result["profile"]] == ["copy", "copy", "delegate", "copy"]
    assert all(set(r) >= {"index", "kind", "op", "bytes", "measured_s", "predicted_s"} for r in result["profile"])
    assert result["profile"][0]["predicted_s"] > 0 and result["profile"][2]["predicted_s"] is None
    assert result["cost_model"]["method"] == FIT_METHOD


class _MutateInput(torch.nn.Module):
    def forward(self, x, y):
        x.mul_(2)
        return x + y


def test_profiled_and_plain_calls_give_the_same_outputs_and_write_back_a_mutated_input(sim):
    module = _MutateInput()
    x, y = torch.randn(2, 2), torch.randn(2, 2)
    placed = place_devices(export_and_lower(module, (x.clone(), y)))
    assert placed.written_back_inputs == (0,)
    with load_method(placed) as method:
        plain_x, hooked_x, profiled_x = x.clone(), x.clone(), x.clone()
        plain = method(plain_x, y)
        hooked = method(hooked_x, y, on_step=lambda step: step.run())
        method.profile(profiled_x, y, repeat=1)
    torch.testing.assert_close(plain, hooked)
    torch.testing.assert_close(plain[0], x * 2 + y)
    for written in (plain_x, hooked_x, profiled_x):  # every way of calling writes the mutated input back
        torch.testing.assert_close(written, x * 2)


def test_on_step_sees_every_step_of_a_call_in_order_and_profiled_calls_count_as_calls(sim):
    module, inputs, method = _add_method()
    seen = []

    def record(step):
        seen.append(step.index)
        step.run()

    with method:
        (got,) = method(*inputs, on_step=record)
        assert seen == [step.index for step in method.steps] == [0, 1, 2, 3]
        torch.testing.assert_close(got, module(*inputs))
        assert method.copies_executed == {"h2d": 2, "d2h": 1} and method.caller_copies == 0


class _FixedTimer(DeviceTimer):
    """A device clock that always reads 5 us."""

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        pass

    def seconds(self) -> float:
        return 5e-6


class _RealLikeAllocator(SimulatedCudaAllocator):
    """The simulated device claiming a real device's capabilities, counting what the runtime asks of them."""

    capabilities = Capabilities(real_device=True, device_clock=True, pinned_host=True)

    def __init__(self) -> None:
        super().__init__()
        self.synchronized = 0

    def synchronize(self) -> None:
        self.synchronized += 1

    def event_timer(self) -> DeviceTimer:
        return _FixedTimer()

    def is_pinned(self, host, nbytes=None) -> bool:
        return True


def test_the_runtime_asks_the_allocators_capabilities_not_its_backend_name():
    module, inputs = models.add()
    allocator = _RealLikeAllocator()
    with scoped_allocators(allocator), load_method(place_devices(export_and_lower(module, inputs))) as method:
        torch.testing.assert_close(method(*inputs)[0], module(*inputs))
        assert allocator.synchronized == 1  # after the one delegate, before the next copy
        rows = method.profile(*inputs, repeat=2)
        assert {(r["clock"], r["device_s"]) for r in rows} == {("events", 5e-6)}
        assert {r["memory"] for r in rows if r["kind"] == "copy"} == {"pinned"}
        assert allocator.synchronized == 3

        def interrupt(step):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            method(*inputs, on_step=interrupt)
        method(*inputs)
        assert allocator.synchronized == 5  # the next call first waits for what the interrupted one left
