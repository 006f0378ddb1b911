"""The artifact as the measure: devcopy's emitted program and the `.pte` ExecuTorch 1.5.1
writes for the same model and delegated ops agree on the operator table, the instructions, the copies and the memory
plan per device, except the differences docs/differences.md documents ("The artifact"); and the comparison fails on
a one-line breakage of either side."""

from __future__ import annotations

import dataclasses

import pytest

from devcopy_lib import emit, export_and_lower, models, place_devices
from devcopy_lib.pte.artifact import ASPECTS, KnownDifference, compare_artifacts, compare_model
from devcopy_lib.pte.reader import PteKernel

pytestmark = [pytest.mark.reference, pytest.mark.filterwarnings("ignore:torchvision's compiled ops did not load")]

K = KnownDifference
# Small inputs, as tests/test_real_models.py runs them (gpt2_12l: the 2-layer model's graph, six times over)
SMALL = {
    "resnet18": {"image_size": 32},
    "mobilenet_v3_small": {"image_size": 32},
    "gpt2_2l": {"seq_len": 8},
    "gpt2_12l": {"seq_len": 8},
    "bert_small": {"seq_len": 16},
    "llama_tiny": {"seq_len": 16},
}


def _comparison(name: str, ops: str):
    if name in models.MODELS:
        module, inputs = models.MODELS[name]()
    else:
        try:
            module, inputs = models.REAL_MODELS[name](**SMALL[name])
        except models.ModelsExtraMissing as exc:
            pytest.skip(f"the models extra is not installed: {exc}")
    return compare_model(module, inputs, models.DELEGATE_SETS[ops])


def _assert_documented(comparison, allowed: set[KnownDifference]) -> None:
    assert comparison.ok, f"new differences:\n{comparison.to_markdown()}"
    assert comparison.documented <= allowed, comparison.to_markdown()


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_each_sample_with_the_default_ops_equals_executorchs_except_alignment(name):
    comparison = _comparison(name, "default")
    _assert_documented(comparison, {K.ALIGNMENT})
    assert comparison.documented == ({K.ALIGNMENT} if name == "mlp" else set()), comparison.to_markdown()


@pytest.mark.deep
@pytest.mark.parametrize("ops", sorted(set(models.DELEGATE_SETS) - {"default"}))
@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_each_sample_with_each_delegate_set(name, ops):
    _assert_documented(_comparison(name, ops), set(KnownDifference))


@pytest.mark.deep  # 8 to 60 s each on 2 cores (ExecuTorch's lowering), more than `make test` affords
@pytest.mark.parametrize("ops", sorted(models.DELEGATE_SETS))
@pytest.mark.parametrize("name", sorted(models.REAL_MODELS))
def test_each_real_model_with_each_delegate_set(name, ops):
    _assert_documented(_comparison(name, ops), set(KnownDifference))


# ---- the comparison can fail: one line of either program changed --------------------------------------------------


@pytest.fixture(scope="module")
def ours(sin_model):
    """devcopy's program of `sin(a + b) * b`, `add` delegated (the .pte of `sin_program`)."""
    module, inputs = sin_model
    return emit(place_devices(export_and_lower(module, inputs, ["add.Tensor"])))


def test_the_sin_program_is_executorchs_but_for_the_alignment(ours, sin_program):
    comparison = compare_artifacts(ours, sin_program)
    assert all(not comparison.aspects[a] for a in ("operators", "instructions", "copies"))
    assert [str(d) for d in comparison.aspects["memory_plan"]] == [
        "[alignment] devcopy: buffer 1: 192 bytes on cpu | executorch: buffer 1: 96 bytes on cpu",
        "[alignment] devcopy: buffer 2: 192 bytes on cuda:0 | executorch: buffer 2: 96 bytes on cuda:0",
    ]
    assert comparison.ok and not comparison.equal and comparison.documented == {K.ALIGNMENT}
    assert "| memory_plan | 2 | 2 | equal except [alignment](docs/differences.md#alignment) |" in str(comparison)


def _new_aspects(ours, program) -> set[str]:
    comparison = compare_artifacts(ours, program)
    assert not comparison.ok and "NEW" in comparison.to_markdown()
    return {d.aspect for d in comparison.new}


def test_two_copies_swapped_are_a_new_difference(ours, sin_program):
    swapped = list(sin_program.instructions)
    swapped[0], swapped[1] = swapped[1], swapped[0]  # the two H2Ds, no longer in the delegate's argument order
    assert _new_aspects(ours, dataclasses.replace(sin_program, instructions=swapped)) == {"copies"}


def test_a_changed_buffer_size_is_a_new_difference(ours, sin_program):
    sizes = list(sin_program.buffer_sizes)
    sizes[2] += 16
    assert _new_aspects(ours, dataclasses.replace(sin_program, buffer_sizes=sizes)) == {"memory_plan"}


def test_a_buffer_on_another_device_is_a_new_difference(ours, sin_program):
    assert _new_aspects(ours, dataclasses.replace(sin_program, buffer_devices={})) == {"memory_plan"}


def test_a_copy_of_another_value_is_a_new_difference(ours, sin_program):
    changed = list(sin_program.instructions)
    h2d = changed[1]
    assert isinstance(h2d, PteKernel) and h2d.args == (1, 3, 3)
    changed[1] = dataclasses.replace(h2d, args=(0, 3, 3))  # copies input 0 again instead of input 1
    assert {"instructions", "copies"} <= _new_aspects(ours, dataclasses.replace(sin_program, instructions=changed))


def test_a_dropped_copy_is_a_new_difference_everywhere_it_shows(ours, sin_program):
    dropped = dataclasses.replace(
        sin_program, instructions=[*sin_program.instructions[:3], *sin_program.instructions[4:]]
    )
    assert _new_aspects(ours, dropped) >= {"instructions", "copies"}


def test_another_operator_is_a_new_difference(ours, sin_program):
    renamed = dataclasses.replace(sin_program, operators=[*sin_program.operators[:2], "aten::cos.out", "aten::mul.out"])
    assert _new_aspects(ours, renamed) >= {"operators", "instructions"}


def test_cpu_steps_in_another_valid_order_are_the_documented_schedule():
    """`sin` before `mul` is the only order here; two independent CPU ops (`a.sin()`, `b.cos()`) in either order
    compute the same values: a schedule difference, documented, never a new one."""
    import torch

    class TwoCpuOps(torch.nn.Module):
        def forward(self, a, b):
            return (a + b) * (a.sin() - b.cos())

    from devcopy_lib.pte.backend import executorch_pte
    from devcopy_lib.pte.reader import open_pte

    inputs = (torch.randn(2, 3), torch.randn(2, 3))
    ours = emit(place_devices(export_and_lower(TwoCpuOps(), inputs, ["add.Tensor"])))
    theirs = open_pte(executorch_pte(TwoCpuOps(), inputs, ["add.Tensor"]))
    kernels = [i for i, ins in enumerate(theirs.instructions) if isinstance(ins, PteKernel)]
    names = [theirs.operators[theirs.instructions[i].op] for i in kernels]
    sin, cos = kernels[names.index("aten::sin.out")], kernels[names.index("aten::cos.out")]
    swapped = list(theirs.instructions)
    swapped[sin], swapped[cos] = swapped[cos], swapped[sin]
    table = list(theirs.operators)  # ExecuTorch's table lists operators in first use: swapped with them
    i, j = table.index("aten::sin.out"), table.index("aten::cos.out")
    table[i], table[j] = table[j], table[i]
    swapped = [
        dataclasses.replace(x, op={i: j, j: i}.get(x.op, x.op)) if isinstance(x, PteKernel) else x for x in swapped
    ]
    reordered = dataclasses.replace(theirs, instructions=swapped, operators=table)
    both = [compare_artifacts(ours, p) for p in (theirs, reordered)]
    assert all(c.ok for c in both), [c.to_markdown() for c in both]
    assert K.SCHEDULE in {d.kind for c in both for d in c.aspects["instructions"]}  # one order is not devcopy's


def test_every_aspect_is_reported(ours, sin_program):
    comparison = compare_artifacts(ours, sin_program)
    assert list(comparison.aspects) == list(ASPECTS)
    assert all(f"| {aspect} |" in comparison.to_markdown() for aspect in ASPECTS)


def test_every_known_difference_has_its_section_in_the_docs():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "differences.md").read_text()
    headings = {line.removeprefix("### ") for line in text.splitlines() if line.startswith("### ")}
    assert {k.value for k in KnownDifference} <= headings
    assert all(k.section == f"docs/differences.md#{k.value}" for k in KnownDifference)
