"""Graph replay of the device work (runtime/capture.py): which steps group into one graph, why the others run
uncaptured (said in `method.capture` and in every profile row), and, on CUDA, replays equal to the uncaptured run
with the counters kept, inputs of another shape refused before any replay, interrupts and profiles as before."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from devcopy_lib import models
from devcopy_lib.devices import scoped_allocators
from devcopy_lib.devices.errors import InvalidArgumentError
from devcopy_lib.emitter.emit import emit
from devcopy_lib.load import load_method
from devcopy_lib.lowering.lower import export_and_lower
from devcopy_lib.ops.schema import ET_COPY_OPS_YAML
from devcopy_lib.placement.place import place_devices
from devcopy_lib.runtime.capture import DeviceWork, group_steps
from devcopy_lib.runtime.failures import ExecutionError, LoadError
from devcopy_lib.runtime.libs import aten_lib
from devcopy_lib.tensors.error import Error

MODES = ["portable", "aten"]


def _libs(mode: str):  # noqa: ANN202 - a test helper
    return None if mode == "portable" else aten_lib(custom_ops=[ET_COPY_OPS_YAML])


@functools.cache
def _program(name: str):  # noqa: ANN202 - a test helper
    module, inputs = models.MODELS[name]()
    return module, inputs, emit(place_devices(export_and_lower(module, inputs)))


def _recordable(step):  # noqa: ANN001, ANN202 - a step as a CUDA machine would prepare it
    return dataclasses.replace(step, work=DeviceWork(step.run), no_capture="") if step.kind != "kernel" else step


# ---- decisions (any machine) ----------------------------------------------------------------------------------
def test_the_simulated_backend_records_nothing_and_every_step_says_why(sim):
    _, inputs, program = _program("cpu_between")
    with load_method(program) as method:
        method(*inputs)
        summary = method.capture
        rows = method.profile(*inputs, repeat=2)
    assert (summary["option"], summary["on"], summary["graphs"], summary["pending"]) == ("auto", False, 0, False)
    reasons = {row["op"].split("::")[-1].split()[0]: row["capture"] for row in rows}
    assert reasons == {
        "_h2d_copy.out": "the simulated backend has no CUDA graphs",
        "_d2h_copy.out": "the simulated backend has no CUDA graphs",
        "delegate": "the simulated backend has no CUDA graphs",
        "cumsum.out": "runs on the host (a CPU op)",
    }
    assert [f["index"] for f in summary["fallbacks"]] == [row["index"] for row in rows]


def test_capture_off_says_so_for_every_step(sim):
    _, inputs, program = _program("add")
    with load_method(program, capture=False) as method:
        rows = method.profile(*inputs, repeat=1)
    assert {row["capture"] for row in rows} == {"capture is off (capture=False)"}


def test_capture_required_where_nothing_can_be_recorded_is_refused_naming_why(sim):
    _, _, program = _program("add")
    with pytest.raises(LoadError, match="capture=True, but no step can be recorded: the simulated backend") as info:
        load_method(program, capture=True)
    assert info.value.error == Error.NotSupported


def test_a_capture_option_of_another_kind_is_refused_naming_the_choices(sim):
    _, _, program = _program("add")
    with pytest.raises(InvalidArgumentError, match=r"'auto' \(graphs where safe\), True .* False .* got 'on'"):
        load_method(program, capture="on")


def test_consecutive_device_steps_group_and_a_cpu_op_splits_them(sim):
    _, _, program = _program("cpu_between")
    with load_method(program) as method:
        steps = [_recordable(step) for step in method.steps]
    kinds = [step.kind for step in steps]
    assert kinds == ["copy", "copy", "delegate", "copy", "kernel", "copy", "copy", "delegate", "copy"]
    assert group_steps(steps) == [(0, 4), (5, 9)]
    assert group_steps(steps[:4]) == [(0, 4)]
    unrecordable_delegate = [*steps[:2], dataclasses.replace(steps[2], work=None), *steps[3:]]
    assert group_steps(unrecordable_delegate) == [(0, 2), (3, 4), (5, 9)]
    assert group_steps([step for step in steps if step.kind == "kernel"]) == []


@pytest.mark.parametrize("mode", MODES)
def test_a_group_run_in_place_of_its_steps_keeps_outputs_and_counters(sim, mode):
    """The plan's side of a replay (`Plan.use_groups`): outputs, copies and a failure's instruction stay right."""
    module, inputs, program = _program("cpu_between")
    with load_method(program, mode, _libs(mode)) as method:
        plan = method._plan  # the replay's hook is the plan's; no public path sets a group on the simulated backend
        calls = []

        def group(start: int, stop: int):  # noqa: ANN202
            def replay() -> None:
                calls.append(start)
                for step in plan.steps[start:stop]:
                    step.run()

            return start, stop, replay

        plan.use_groups([group(5, 9), group(0, 4)])
        (got,) = method(*inputs)
        torch.testing.assert_close(got, module(*inputs))
        assert calls == [0, 5]
        assert method.copies_executed == {"h2d": 4, "d2h": 2}

        def broken() -> None:
            raise RuntimeError("the graph failed")

        plan.use_groups([group(0, 4), (5, 9, broken)])
        with pytest.raises(ExecutionError, match=r"instruction 5 \(et_copy::_h2d_copy.out\) raised: the graph failed"):
            method(*inputs)
        assert method.copies_executed == {"h2d": 6, "d2h": 3}  # the first group's copies ran, the failed one's not


# ---- on CUDA --------------------------------------------------------------------------------------------------
def _cupy():  # noqa: ANN202 - a test helper
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    return CupyCudaAllocator()


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_every_sample_model_replays_equal_to_its_uncaptured_run(replays_equal_uncaptured, mode, name):
    _, inputs, program = _program(name)
    with scoped_allocators(_cupy()):
        summary = replays_equal_uncaptured(program, inputs, mode, _libs(mode))
    assert summary["on"] and summary["graphs"] >= 1
    uncaptured = {f["reason"] for f in summary["fallbacks"]}
    assert uncaptured <= {"runs on the host (a CPU op)"}, uncaptured


@pytest.mark.gpu
def test_a_cpu_op_between_splits_the_graphs_and_is_named():
    _, inputs, program = _program("cpu_between")
    with scoped_allocators(_cupy()), load_method(program) as method:
        before = method.capture["line"]
        method(*inputs)
        summary = method.capture
        rows = method.profile(*inputs, repeat=2)
    assert before == "graph replay: 8 step(s) to record after the first call; uncaptured: runs on the host (a CPU op)"
    assert summary["line"] == "graph replay: 2 graph(s) covering 8/9 steps; uncaptured: runs on the host (a CPU op)"
    assert (summary["graphs"], summary["captured_steps"], summary["steps"]) == (2, 8, 9)
    assert [f["reason"] for f in summary["fallbacks"]] == ["runs on the host (a CPU op)"]
    assert [row["capture"] for row in rows][3:6] == [
        "graph 0 (steps 0..3)",
        "runs on the host (a CPU op)",
        "graph 1 (steps 5..8)",
    ]
    assert {row["clock"] for row in rows if row["kind"] != "kernel"} == {"events"}  # profiled uncaptured


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_an_input_of_another_shape_is_refused_before_any_replay_and_replays_go_on(mode):
    module, inputs, program = _program("transformer_block")
    with scoped_allocators(_cupy()), load_method(program, mode, _libs(mode), capture=True) as method:
        method(*inputs)
        assert method.capture["on"]
        copies = dict(method.copies_executed)
        with pytest.raises(ExecutionError, match="input 0: dimension 1 is static in the plan") as info:
            method(torch.randn(1, 5, 16))
        assert info.value.error == Error.InvalidArgument
        assert method.copies_executed == copies  # refused before any step ran
        x = torch.randn(inputs[0].shape)
        with torch.no_grad():
            torch.testing.assert_close(method(x)[0], module(x), atol=1e-5, rtol=1e-4)


@pytest.mark.gpu
def test_an_interrupt_mid_call_leaves_a_captured_method_usable():
    module, inputs, program = _program("mlp")
    with scoped_allocators(_cupy()), load_method(program) as method:
        method(*inputs)

        def interrupt_at_the_delegate(step):  # noqa: ANN001, ANN202
            if step.kind == "delegate":
                raise KeyboardInterrupt
            step.run()

        with pytest.raises(KeyboardInterrupt):
            method(*inputs, on_step=interrupt_at_the_delegate)
        x = torch.randn(inputs[0].shape)
        with torch.no_grad():
            torch.testing.assert_close(method(x)[0], module(x), atol=1e-5, rtol=1e-4)
        assert method.capture["on"]


@pytest.mark.gpu
def test_dynamic_shapes_run_uncaptured_and_say_so():
    batch = torch.export.Dim("batch", min=1, max=8)
    module, inputs = models.MODELS["mlp"]()
    lowered = export_and_lower(module, inputs, dynamic_shapes=({0: batch},))
    with scoped_allocators(_cupy()), load_method(place_devices(lowered)) as method:
        for rows in (2, 5):
            x = torch.randn(rows, *inputs[0].shape[1:])
            with torch.no_grad():
                torch.testing.assert_close(method(x)[0], module(x), atol=1e-5, rtol=1e-4)
        reasons = {f["reason"] for f in method.capture["fallbacks"]}
    assert "dynamic shapes (sizes known only at the call)" in reasons


@pytest.mark.gpu
def test_a_closed_allocator_is_refused_by_the_replay_as_by_the_uncaptured_run():
    _, inputs, program = _program("add")
    allocator = _cupy()
    with scoped_allocators(allocator):
        method = load_method(program)
        method(*inputs)
        assert method.capture["on"]
        allocator.close()
        with pytest.raises(ExecutionError, match="instruction 0"):
            method(*inputs)


# ---- the recording's timing, with a fake recorder (any machine) ---------------------------------------------------
class _FakeGraph:
    """Stands in for a recorded CUDA graph: a replay runs the recorded steps' device work."""

    def __init__(self, steps) -> None:  # noqa: ANN001
        self.works = [step.work for step in steps]
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        for work in self.works:
            work.record()


class _FakeStream:
    def synchronize(self) -> None:
        pass


def test_graphs_are_recorded_after_the_first_successful_call_and_replayed_from_the_second(sim, monkeypatch):
    """The capture logic without CUDA: steps made recordable, a recorder that only notes when it is called. Nothing
    is recorded at load or by a call that fails; the first successful call runs the steps uncaptured and then
    records each group once; later calls replay the graphs in place of the steps, with the same outputs and copy
    counts."""
    from devcopy_lib.runtime import capture as capture_module

    module, inputs, program = _program("cpu_between")
    recorded: list[tuple[tuple[int, ...], dict]] = []
    graphs: list[_FakeGraph] = []

    def fake_record(steps, pool):  # noqa: ANN001, ANN202
        recorded.append((tuple(step.index for step in steps), dict(method.copies_executed)))
        graphs.append(_FakeGraph(steps))
        return graphs[-1]

    monkeypatch.setattr(capture_module, "_record_graph", fake_record)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: _FakeStream())
    with load_method(program) as method:
        steps = [_recordable(step) for step in method.steps]
        method._capture = capture_module.Capture(steps, "auto")  # what a one-GPU CUDA machine decides at load
        assert (
            recorded == []
            and method.capture["pending"]
            and "to record after the first call" in (method.capture["line"])
        )
        with pytest.raises(ExecutionError):
            method(torch.randn(3, 3))  # refused by the input setter: no warm-up, nothing recorded
        assert recorded == [] and method.capture["pending"]

        (first,) = method(*inputs)
        h2d, d2h = method.copies_executed["h2d"], method.copies_executed["d2h"]
        # recorded once per group, after the first call ran every step uncaptured (its copies already counted)
        assert [indices for indices, _ in recorded] == [(0, 1, 2, 3), (5, 6, 7, 8)]
        assert all(counts == {"h2d": h2d, "d2h": d2h} for _, counts in recorded) and h2d > 0
        assert [graph.replays for graph in graphs] == [0, 0]
        summary = method.capture
        assert (summary["pending"], summary["on"], summary["graphs"], summary["captured_steps"]) == (False, True, 2, 8)

        (second,) = method(*inputs)
        assert [graph.replays for graph in graphs] == [1, 1] and len(recorded) == 2
        torch.testing.assert_close(first, module(*inputs))
        torch.testing.assert_close(second, first)
        assert method.copies_executed == {"h2d": 2 * h2d, "d2h": 2 * d2h}
