"""Control flow as ExecuTorch 1.5.1 handles it (docs/differences.md, docs/semantics.md): `torch.cond` and
`control_flow.map` are placed with the op and its branches on the CPU and only top-level ops partitioned (counts
equal to ExecuTorch's), then refused by name when run (no jump instructions); `torch.while_loop`, which ExecuTorch's
to_edge or emitter refuses, is refused at lowering. Never a traceback, from the library or the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from functorch.experimental.control_flow import map as control_flow_map
from test_executorch_reference import MATRIX, assert_agree, both

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, load_method, place_devices
from devcopy_lib.lowering.lower import UnsupportedModelError
from devcopy_lib.lowering.nodes import node_kind


class Cond(torch.nn.Module):
    def forward(self, x, y):
        z = x + y
        return torch.cond(z.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (z,)) * y


class CondThenAdd(torch.nn.Module):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,)) + x


class Map(torch.nn.Module):
    def forward(self, xs, y):
        return control_flow_map(lambda x, y: x.sin() + y, xs.cos(), y) * y


class WhileLoop(torch.nn.Module):
    def forward(self, x):
        _, out = torch._higher_order_ops.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + 1.0), (0, x))
        return out * 2


PLACED = {
    "cond": (Cond(), (torch.randn(4), torch.randn(4)), "torch.cond"),
    "cond_then_add": (CondThenAdd(), (torch.randn(4),), "torch.cond"),
    "map": (Map(), (torch.randn(3, 4), torch.randn(4)), "control_flow.map"),
}


@pytest.mark.parametrize("name", sorted(PLACED))
def test_control_flow_stays_on_the_cpu_and_only_top_level_ops_are_delegated(name):
    model, inputs, _ = PLACED[name]
    lowered = export_and_lower(model, inputs)  # the branches' sin/cos/add are delegate ops, yet stay in the branches
    assert all(set(d.ops) <= {"add.Tensor", "mul.Tensor", "cos.default"} for d in lowered.delegates.values())
    torch.testing.assert_close(lowered(*inputs), model(*inputs))  # the branches run as CPU submodules
    placed = place_devices(lowered)
    flow = [n for n in placed.graph_module.graph.nodes if isinstance(n.target, torch._ops.HigherOrderOperator)]
    assert len(flow) == 1 and node_kind(flow[0]) == "cpu_op" and str(flow[0].meta["device"]) == "cpu"


def test_cond_places_with_the_counts_executorch_gives():
    """Pinned here (ExecuTorch's own numbers, compared live in the reference test below): z = x + y delegated, z
    copied back for the CPU's predicate and branches, the product delegated again."""
    report = place_devices(export_and_lower(*PLACED["cond"][:2])).report
    assert (report.delegates, report.copies["h2d"], report.copies["d2h"]) == (2, 4, 2)


@pytest.mark.reference
@pytest.mark.parametrize("name", sorted(PLACED))
@pytest.mark.parametrize("ops", [DEFAULT_DELEGATE_OPS, MATRIX], ids=["default", "matrix"])
@pytest.mark.parametrize("options", [{}, {"skip_d2h_for_method_outputs": True}], ids=["", "skip_d2h"])
def test_control_flow_places_like_executorch(name, ops, options):
    model, inputs, _ = PLACED[name]
    assert not assert_agree(*both(model, inputs, list(ops), **options), (name, ops, options))


@pytest.mark.parametrize("name", sorted(PLACED))
def test_running_control_flow_is_refused_naming_the_construct(sim, name):
    model, inputs, construct = PLACED[name]
    placed = place_devices(export_and_lower(model, inputs))
    for mode in ("portable", "aten"):
        with pytest.raises(UnsupportedModelError, match=rf"is {construct} \(control flow over subgraphs\)") as info:
            load_method(placed, mode)
        assert info.value.kind == "unsupported_model" and "places it as ExecuTorch does" in str(info.value)


def test_while_loop_is_refused_at_lowering_naming_the_construct():
    with pytest.raises(UnsupportedModelError, match=r"is torch.while_loop \(control flow over subgraphs\)") as info:
        export_and_lower(WhileLoop(), (torch.randn(4),))
    assert info.value.kind == "unsupported_model" and "ExecuTorch 1.5.1 does not" in str(info.value)


@pytest.mark.reference
def test_executorch_refuses_while_loop_too():
    from devcopy_lib.pte.executorch_reference import ExecuTorchRefusal, executorch_counts

    with pytest.raises(ExecuTorchRefusal):  # here in to_edge; with tensor carries its emitter refuses while_loop
        executorch_counts(WhileLoop(), (torch.randn(4),), DEFAULT_DELEGATE_OPS)


def test_the_cli_places_cond_and_refuses_to_run_it_as_unsupported_model(tmp_path):
    path = tmp_path / "cond_model.py"
    path.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos(), (x,)) + x\n"
        "def build():\n    return M(), (torch.randn(4),)\n"
    )
    cli = [sys.executable, "-m", "devcopy_lib"]
    place = subprocess.run([*cli, "place", f"{path}:build", "--json"], capture_output=True, text=True)
    assert place.returncode == 0 and json.loads(place.stdout)["delegate_devices"] == {"delegate_0": "cuda:0"}
    run = subprocess.run([*cli, "run", f"{path}:build", "--json"], capture_output=True, text=True)
    assert run.returncode == 1, run.stderr
    error = json.loads(run.stdout)["error"]
    assert error["kind"] == "unsupported_model" and "torch.cond" in error["message"]
