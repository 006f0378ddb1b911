"""The single-number targets (call overhead, explorer) evaluated in bench.targets: which rule applies where, and that
the device kind comes from the run's `simulated` flag, not its backend's name."""

import pytest

from devcopy_lib.bench.targets import MiB, call_overhead_targets, explorer_targets, goal_row, profiled_copies


def test_goal_rules():
    assert goal_row("t", 20.0, 20.0)["met"] and not goal_row("t", 20.0, 20.0, "<")["met"]
    assert goal_row("p", 1.14, 0.15, "within")["met"] and not goal_row("p", 0.8, 0.15, "within")["met"]
    with pytest.raises(KeyError):
        goal_row("t", 1.0, 1.0, ">")


def _row(model, strategy="executorch", mode="portable", call=10e-6, module=5e-6, placed=8e-6, n=4, copies=()):
    return {
        "model": model,
        "strategy": strategy,
        "mode": mode,
        "call_s": call,
        "eager_module_s": module,
        "eager_placed_s": placed,
        "per_instruction_s": call / n,
        "copies": list(copies),
    }


COPY = {"op": "et_copy::_h2d_copy.out", "bytes": 4 * MiB, "measured_s": 1e-3, "predicted_s": 1.1e-3}
COPY.update(clock="events", memory="pinned")


def test_a_simulated_run_checks_the_runtime_cost_and_no_prediction():
    data = {"simulated": True, "backend": "anything", "models": [_row("add", copies=[COPY]), _row("transformer_block")]}
    rows = {r["target"]: r for r in call_overhead_targets(data)}
    assert set(rows) == {
        "add (portable) call <= 20 µs (µs)",
        "add (portable) <= 5 µs per instruction (µs)",
        "transformer_block (executorch, portable) <= 2x eager CPU",
    }
    assert rows["add (portable) call <= 20 µs (µs)"]["value"] == pytest.approx(10.0)
    assert rows["transformer_block (executorch, portable) <= 2x eager CPU"]["met"]


def test_a_real_device_run_checks_eager_ratios_small_copies_and_predictions():
    data = {
        "simulated": False,
        "backend": "anything",
        "models": [_row("mlp256x256", call=7e-6), _row("transformer_block", call=12e-6, copies=[COPY])],
        "small_copies": [{"direction": "h2d", "ratio": 1.2}],
    }
    rows = {r["target"]: r for r in call_overhead_targets(data)}
    assert rows["mlp256x256 (portable) <= 1.5x torch eager on CUDA"]["value"] == pytest.approx(1.4)
    assert rows["transformer_block (executorch, portable) <= 1.3x the placement run by torch eager"]["value"] == (
        pytest.approx(1.5)
    )
    assert not rows["4 KiB h2d through et_copy <= 1.1x torch copy_ pinned + sync"]["met"]
    (prediction,) = [r for r in rows.values() if r["target"].startswith("predicted/measured")]
    assert prediction["value"] == pytest.approx(1.1) and prediction["met"]


def test_profiled_copies_keep_measured_copies_of_a_mebibyte_or_more():
    small = {**COPY, "bytes": MiB - 1}
    unmeasured = {**COPY, "measured_s": None}
    data = {"copy_sizes": [COPY, small], "models": [_row("add", copies=[unmeasured, COPY])]}
    assert profiled_copies(data) == [COPY, COPY]
    assert profiled_copies(data, smallest=0) == [COPY, small, COPY]  # the small-copy band's fit and check


def test_explorer_targets_are_strictly_under_their_goals():
    targets = explorer_targets({"build_s": 5.0, "median_op_toggle_s": 0.5})
    assert not targets["build_s"]["met"] and targets["median_op_toggle_s"]["met"]
