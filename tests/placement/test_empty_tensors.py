"""Empty tensors, as ExecuTorch's `to_edge` treats them: an input of `cat` with no elements is dropped before
partitioning (`PruneEmptyTensorsPass`), with what only it read, so no copy moves it and skip-H2D sees one user fewer;
a `cat` of empty inputs only becomes a `full`. Placement counts equal ExecuTorch 1.5.1's under every skip switch,
and the programs run equal to eager in both modes."""

import pytest
import torch
from test_executorch_reference import assert_agree, both

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, load_method, place_devices
from devcopy_lib.lowering.nodes import node_kind

SKIPS = {
    "": {},
    "skip_h2d": {"skip_h2d_for_method_inputs": True},
    "skip_d2h": {"skip_d2h_for_method_outputs": True},
    "both": {"skip_h2d_for_method_inputs": True, "skip_d2h_for_method_outputs": True},
}


class SinThenEmpty(torch.nn.Module):
    """`y[:, 4:]` of a (3, 4) input has no elements: a rotary pass-through when the rotary covers the whole head."""

    def forward(self, y):
        return torch.cat([torch.sin(y), y[:, 4:]], 1)


class OnlyEmpty(torch.nn.Module):
    """A cat of two empty slices: a (3, 0) `full`; the sin keeps the program's delegate."""

    def forward(self, y):
        return torch.cat([y[:, 4:], y[:, 5:]], 1) + 1, torch.sin(y)


CASES = {"sin_then_empty": SinThenEmpty, "only_empty": OnlyEmpty}
# (delegates, H2D, D2H) per skip switch, ExecuTorch 1.5.1's answer with the default ops
EXPECTED = {
    "sin_then_empty": {"": (1, 1, 1), "skip_h2d": (1, 0, 1), "skip_d2h": (1, 1, 0), "both": (1, 0, 0)},
    "only_empty": {"": (1, 3, 2), "skip_h2d": (1, 2, 2), "skip_d2h": (1, 3, 0), "both": (1, 2, 0)},
}


def _placed(name, **options):
    module = CASES[name]()
    return module, place_devices(export_and_lower(module, (torch.randn(3, 4),)), **options)


@pytest.mark.parametrize("skip", SKIPS)
@pytest.mark.parametrize("name", CASES)
def test_empty_cat_inputs_place_with_executorchs_counts_and_no_refusal(name, skip):
    _, placed = _placed(name, **SKIPS[skip])
    report = placed.report
    assert (report.delegates, report.copies["h2d"], report.copies["d2h"]) == EXPECTED[name][skip]
    kinds = [node_kind(node) for node in placed.graph_module.graph.nodes]
    assert kinds.count("h2d") == EXPECTED[name][skip][1]


def _nodes(placed):
    """Every call of the placed program, its delegates' included."""
    graphs = [m.graph for m in placed.graph_module.modules() if isinstance(getattr(m, "graph", None), torch.fx.Graph)]
    return [node for graph in graphs for node in graph.nodes if node.op == "call_function"]


def test_the_empty_input_and_its_slice_leave_the_graph():
    _, placed = _placed("sin_then_empty")
    cats = [n for n in _nodes(placed) if n.target is torch.ops.aten.cat.default]
    assert len(cats) == 1 and len(cats[0].args[0]) == 1
    assert not [n for n in _nodes(placed) if n.target is torch.ops.aten.slice.Tensor]
    _, placed = _placed("only_empty")
    targets = {n.target for n in _nodes(placed)}
    assert torch.ops.aten.cat.default not in targets and torch.ops.aten.full.default in targets


@pytest.mark.parametrize("mode", ["portable", "aten"])
@pytest.mark.parametrize("skip", ["", "both"])
@pytest.mark.parametrize("name", CASES)
def test_empty_cat_programs_run_equal_to_eager(sim, name, skip, mode):
    module, placed = _placed(name, **SKIPS[skip])
    y = torch.randn(3, 4)
    expected = module(y)
    expected = expected if isinstance(expected, tuple) else (expected,)
    with load_method(placed, mode) as method:
        got = method(y)
    assert len(got) == len(expected)
    for mine, eager in zip(got, expected, strict=True):
        assert mine.shape == eager.shape and torch.equal(mine, eager)


@pytest.mark.reference
@pytest.mark.parametrize("skip", SKIPS)
@pytest.mark.parametrize("name", CASES)
def test_empty_cat_inputs_match_executorch(name, skip):
    assert_agree(*both(CASES[name](), (torch.randn(3, 4),), DEFAULT_DELEGATE_OPS, **SKIPS[skip]), (name, skip))


def _phi3_tiny():
    """A tiny Phi-3 at 7 tokens: its rotary covers the whole head, so each layer's query and key pass-through
    slices are (1, 4, 7, 0): four empty cat inputs per layer."""
    from devcopy_lib import models
    from devcopy_lib.models.real import TINY_DECODER, causal_lm

    try:
        torch.manual_seed(0)
        return causal_lm("Phi3Config", "phi3_tiny", 7, pad_token_id=0, **TINY_DECODER)
    except models.ModelsExtraMissing as exc:
        pytest.skip(f"needs the models extra: {exc}")


@pytest.mark.reference
def test_phi3_tiny_places_with_executorchs_31_h2d():
    """35 H2D before the empty pass-through slices were pruned; ExecuTorch's 31."""
    mine, theirs = both(*_phi3_tiny(), DEFAULT_DELEGATE_OPS)
    assert_agree(mine, theirs, "phi3_tiny")
    assert (mine["delegates"], mine["h2d"], mine["d2h"]) == (10, 31, 17)


@pytest.mark.reference
@pytest.mark.deep  # three more ExecuTorch lowerings of a transformer, ~25 s each
@pytest.mark.parametrize("skip", ["skip_h2d", "skip_d2h", "both"])
def test_phi3_tiny_matches_executorch_under_the_skip_switches(skip):
    assert_agree(*both(*_phi3_tiny(), DEFAULT_DELEGATE_OPS, **SKIPS[skip]), ("phi3_tiny", skip))


@pytest.mark.deep  # a transformer loaded and run twice
@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_phi3_tiny_runs_equal_to_eager(sim, mode):
    module, inputs = _phi3_tiny()
    placed = place_devices(export_and_lower(module, inputs), skip_h2d_for_method_inputs=True)
    with load_method(placed, mode) as method:
        (logits,) = method(*inputs)
    torch.testing.assert_close(logits, module(*inputs), rtol=1e-4, atol=1e-5)
