"""Constant hoisting: values computed from parameters/buffers/constants alone are computed and copied once, at load."""

import copy
import operator

import pytest
import torch
from placement_helpers import Fn, TransposedWeight, inputs

from devcopy_lib import export_and_lower, load_method, place_devices
from devcopy_lib.placement.hoist import HOISTED


class MutatedWeight(TransposedWeight):
    """The same, but the weight is a buffer the program updates: its transpose differs on every call."""

    def __init__(self):
        super().__init__()
        del self.w
        self.register_buffer("w", torch.randn(2, 2, generator=torch.Generator().manual_seed(0)))

    def forward(self, x):
        self.w.add_(1.0)
        return torch.mm(x, self.w.t())


class RandomWeight(TransposedWeight):
    """`x @ rand_like(w)`: computed from the weight alone, yet random: it must be drawn again on every call."""

    def forward(self, x):
        return torch.mm(x, torch.rand_like(self.w))


class SwappedHalves(TransposedWeight):
    """`x @ cat(w's rows swapped)`: a constant-derived value read through a multi-output op's getitems."""

    def forward(self, x):
        top, bottom = self.w.split(1)
        return torch.mm(x, torch.cat((bottom, top)))


def place(module, hoist, ops=("mm.default",)):
    return place_devices(export_and_lower(module, inputs(1), list(ops)), hoist_constants=hoist)


def runs_like_eager(placed, module, calls=2):
    """Per mode: each call equals eager; returns (copies made at load, copies made by the last call)."""
    seen = []
    for mode in ("portable", "aten"):
        eager = copy.deepcopy(module)
        with load_method(placed, mode) as method:
            for _ in range(calls):
                before = dict(method.copies_executed)
                torch.testing.assert_close(method(*inputs(1))[0], eager(*inputs(1)))
            seen.append((method.load_copies, {k: method.copies_executed[k] - before[k] for k in before}))
    assert seen[0] == seen[1]
    return seen[0]


def test_a_constant_derived_copy_is_made_once_at_load(sim):
    plain, hoisted = place(TransposedWeight(), False), place(TransposedWeight(), True)
    assert plain.report.copies == {"h2d": 2, "d2h": 1} and hoisted.report.copies == {"h2d": 1, "d2h": 1}
    assert runs_like_eager(plain, TransposedWeight()) == ({"h2d": 0, "d2h": 0}, {"h2d": 2, "d2h": 1})
    assert runs_like_eager(hoisted, TransposedWeight()) == ({"h2d": 1, "d2h": 0}, {"h2d": 1, "d2h": 1})


def test_the_report_marks_constant_derived_copies_and_suggests_hoisting():
    plain, hoisted = place(TransposedWeight(), False), place(TransposedWeight(), True)
    weight_bytes = 2 * 2 * 4
    for report in (plain.report, hoisted.report):
        marked = [row for row in report.rows if "constant-derived" in row.reason]
        assert [row.kind for row in marked] == ["h2d"] and marked[0].bytes == weight_bytes
        assert report.per_call_bytes["without_hoisting"] - report.per_call_bytes["with_hoisting"] == weight_bytes
    assert "hoist_constants=True" in plain.report.suggestions[0] and hoisted.report.suggestions == []
    assert hoisted.report.constant_derived == {"copies": 1, "bytes": weight_bytes, "hoisted": 1}
    assert (
        sum(r.bytes for r in hoisted.report.rows if r.kind == "h2d" and "hoisted" not in r.reason)
        == hoisted.report.copy_bytes["h2d"]
    )


def test_a_lifted_scalars_cast_is_hoisted(sim):
    module = Fn(lambda x: x + 1)
    placed = place(module, True, ops=("add.Tensor",))
    assert placed.report.copies["h2d"] == 1
    assert [n.target for n in placed.graph_module.graph.nodes if n.meta.get(HOISTED)] == [
        torch.ops.aten._to_copy.default,
        torch.ops.et_copy._h2d_copy.default,
    ]
    assert runs_like_eager(placed, module)[1] == {"h2d": 1, "d2h": 1}


def test_nothing_that_reads_a_mutated_buffer_is_hoisted(sim):
    placed = place(MutatedWeight(), True)
    assert not any(n.meta.get(HOISTED) for n in placed.graph_module.graph.nodes)
    assert placed.report.constant_derived["copies"] == 0
    runs_like_eager(placed, MutatedWeight(), calls=3)


def test_a_random_op_on_a_constant_is_not_hoisted(sim):
    placed = place(RandomWeight(), True)
    assert not any(n.meta.get(HOISTED) for n in placed.graph_module.graph.nodes)
    assert placed.report.constant_derived["copies"] == 0
    x = inputs(1)  # draws after seeding: the calls below must not reseed
    with load_method(placed, "aten") as method:  # the portable lib has no random ops
        first, second = (method(*x)[0] for _ in range(2))
    assert not torch.allclose(first, second), "the random weight was drawn once"


def test_a_constant_read_through_getitems_is_hoisted(sim):
    module = SwappedHalves()
    placed = place(module, True)
    assert [n.target for n in placed.graph_module.graph.nodes if n.meta.get(HOISTED)] == [
        torch.ops.aten.split_with_sizes.default,
        operator.getitem,
        operator.getitem,
        torch.ops.aten.cat.default,
        torch.ops.et_copy._h2d_copy.default,
    ]
    assert runs_like_eager(placed, module)[1] == {"h2d": 1, "d2h": 1}


def test_gpt2_with_matrix_ops_and_hoisting_copies_under_3_mb_per_call():
    from devcopy_lib import models

    pytest.importorskip("transformers", reason="needs the models extra (transformers) for GPT-2")
    module, example = models.gpt2_2l(seq_len=32)
    lowered = export_and_lower(module, example, ["mm.default", "addmm.default", "bmm.default"])
    for strategy in ("executorch", "dedupe"):
        report = place_devices(lowered, strategy=strategy, hoist_constants=True).report
        assert report.per_call_bytes["without_hoisting"] > 150e6  # the transposed tied lm_head weight, 154 MB
        assert report.copy_bytes["h2d"] + report.copy_bytes["d2h"] == report.per_call_bytes["with_hoisting"]
        assert report.copy_bytes["h2d"] < 3e6
