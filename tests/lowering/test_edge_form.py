"""`edge_form` rewrites a program's graph once and shares it between lowerings of that program (the explorer lowers
one program with a new delegate set at each op toggle), while each lowering gets its own mutated buffers: running
one lowered program never changes another's state or the model's."""

import torch

from devcopy_lib import export_program, lower
from devcopy_lib.lowering.edge_form import edge_form


class Counter(torch.nn.Module):
    """A buffer written in place at each call: program state, written back at the end of the lowered graph."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x):
        self.count.add_(x)
        return self.count * 2


def test_the_graph_is_rewritten_once_per_program_and_the_mutated_buffers_are_fresh_each_time():
    exported = export_program(Counter(), (torch.ones(3),))
    first, second = edge_form(exported), edge_form(exported)
    assert first.graph_module is second.graph_module and first.mutable == second.mutable != frozenset()
    for name in first.mutable:
        assert first.constants[name] is not second.constants[name]
        torch.testing.assert_close(first.constants[name], second.constants[name])
    other = edge_form(export_program(Counter(), (torch.ones(3),)))
    assert other.graph_module is not first.graph_module


def test_running_one_lowering_leaves_another_of_the_same_program_and_the_model_unchanged():
    model = Counter()
    exported = export_program(model, (torch.ones(3),))
    ran, kept = lower(exported, ["mul.Tensor"]), lower(exported, ["add.Tensor"])
    out = ran(torch.ones(3))
    torch.testing.assert_close(out, torch.full((3,), 2.0))
    again = ran(torch.ones(3))
    torch.testing.assert_close(again, torch.full((3,), 4.0))  # the first program keeps its own state
    fresh = kept(torch.ones(3))
    torch.testing.assert_close(fresh, torch.full((3,), 2.0))  # the second starts from the model's value
    torch.testing.assert_close(model.count, torch.zeros(3))


class TwoBranches(torch.nn.Module):
    """Two chains that partition apart: toggling `sin` changes one partition and leaves the `mul`/`add` one."""

    def forward(self, x, y):
        return torch.sin(x).cos() + 0, (y * 3 + 1).relu()


def _graphs(lowered):
    return {tuple(d.ops): d.graph_module for d in lowered.delegates.values()}


def test_a_partition_two_delegate_sets_share_is_built_once_and_runs_as_a_fresh_lowering_does():
    inputs = (torch.randn(4), torch.randn(4))
    exported = export_program(TwoBranches(), inputs)
    ops = ["mul.Tensor", "add.Tensor", "relu.default"]
    first, other, again = lower(exported, ops), lower(exported, [*ops, "sin.default"]), lower(exported, ops)
    shared = _graphs(first)
    assert _graphs(again) == shared  # the same graph objects, not copies
    assert all(graph is shared[key] for key, graph in _graphs(again).items())
    assert all(graph is not shared.get(key) for key, graph in _graphs(other).items() if "sin.default" in key)
    fresh = lower(export_program(TwoBranches(), inputs), ops)
    assert all(graph is not shared[key] for key, graph in _graphs(fresh).items())
    for lowered in (first, other, again):
        for got, want in zip(lowered(*inputs), fresh(*inputs), strict=True):
            torch.testing.assert_close(got, want)
    assert [d.name for d in again.delegates.values()] == [d.name for d in first.delegates.values()]
