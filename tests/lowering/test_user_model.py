"""Bring your own model (docs/reliability.md, "Bring your own model"): one bare tensor is one input; a branch on a
tensor's value is one clear message (what torch.export needs, its guide), printed once, from the library, the CLI
and the explorer; an op named without its overload suggests the overloads the model uses first."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from devcopy_lib import export_and_lower, export_program, lower
from devcopy_lib.cli import main
from devcopy_lib.lowering.ops import all_aten_overloads, validate_overloads
from devcopy_lib.lowering.user_model import EXPORT_DOCS, UnsupportedModelError, check_exported, partial_graph_once

MODEL_FILE = """
import torch

class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
    def forward(self, x):
        return self.fc(x).relu()

class Branchy(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1

def bare(): return Linear(), torch.randn(2, 4)
def branchy(): return Branchy(), (torch.randn(2, 4),)
"""


@pytest.fixture(scope="module")
def user_models(tmp_path_factory):
    path = tmp_path_factory.mktemp("byom") / "user_models.py"
    path.write_text(MODEL_FILE)
    sys.path.insert(0, str(path.parent))
    import user_models

    yield str(path), user_models
    sys.path.remove(str(path.parent))


def widgets():
    """The explorer's classes; the tests that use them skip without the lab extra (as on a bare GPU machine)."""
    pytest.importorskip("ipywidgets", reason="the explorer needs the lab extra (ipywidgets)")
    import devcopy_widgets

    return devcopy_widgets


def ops_and_copies(lowered_or_placed) -> list[tuple[str, str]]:
    return [(n.op, str(n.target)) for n in lowered_or_placed.graph_module.graph.nodes]


def test_a_bare_tensor_is_one_input(user_models):
    _, mod = user_models
    model, x = mod.bare()
    assert isinstance(x, torch.Tensor) and x.shape[0] == 2  # iterating it would give two inputs
    assert ops_and_copies(export_and_lower(model, x)) == ops_and_copies(export_and_lower(model, (x,)))
    state = widgets().PlacementState()
    state.add_model("bare", model, x)
    assert state.module_and_inputs()[1] == (x,) and state.placed().report.copies == {"h2d": 1, "d2h": 1}


def test_a_cli_factory_returning_a_bare_tensor_places(capsys, user_models):
    path, _ = user_models
    assert main(["place", f"{path}:bare"]) == 0
    assert "copies: 1 H2D" in capsys.readouterr().out


def test_a_branch_on_a_value_is_one_message_naming_the_line_and_the_fix(capfd, user_models):
    path, mod = user_models
    with pytest.raises(UnsupportedModelError) as info:
        export_and_lower(*mod.branchy())
    message = str(info.value)
    assert info.value.kind == "unsupported_model" and info.value.__cause__ is None
    assert f"at {path}:13: `if x.sum() > 0:`" in message
    assert "torch.cond" in message and "static shape" in message and EXPORT_DOCS in message
    err = capfd.readouterr().err
    assert "def forward" not in err and "Unable to find user code" not in err  # torch's partial graph, its warning


def test_the_cli_prints_the_branch_message_once_and_no_traceback(capsys, user_models):
    path, _ = user_models
    assert main(["place", f"{path}:branchy"]) == 1
    captured = capsys.readouterr()
    assert captured.err.count("depends on a tensor's value") == 1 and "torch.cond" in captured.err
    assert "def forward" not in captured.err and "Traceback" not in captured.err and captured.out == ""
    assert main(["place", f"{path}:branchy", "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "unsupported_model" and error["message"].startswith("Branchy.forward depends on")


def test_the_explorer_shows_the_branch_message(user_models):
    _, mod = user_models
    explorer = widgets().PlacementExplorer()
    explorer.add_model("branchy", *mod.branchy())
    assert isinstance(explorer.error, UnsupportedModelError) and "torch.cond" in explorer.error_html.value


class Failure(RuntimeError):
    partial_fx_graph = "def forward(self, x):\n    return x"


class Guard(GuardOnDataDependentSymNode):
    partial_fx_graph = Failure.partial_fx_graph


@pytest.mark.parametrize("error, kept", [(Failure, 1), (Guard, 0)])
def test_torchs_partial_graph_is_printed_once_or_not_at_all(capfd, error, kept):
    with pytest.raises(error), partial_graph_once():
        print("a warning", file=sys.stderr)
        for _ in range(2):  # torch.export prints it in two nested wrappers
            print(Failure.partial_fx_graph, file=sys.stderr)
        raise error(Failure.partial_fx_graph)
    err = capfd.readouterr().err
    assert err.count("def forward") == kept and "a warning" in err


def test_an_op_without_overload_suggests_the_models_overload_first(user_models):
    _, mod = user_models
    model, x = mod.bare()
    first = "Close matches: addmm.default (used by the model), addmm."
    with pytest.raises(ValueError, match=r"Unknown delegate op 'addmm'") as from_api:
        export_and_lower(model, x, delegate_ops=["addmm"])
    with pytest.raises(ValueError) as from_lower:
        lower(export_program(model, x), ["relu"])
    assert first in str(from_api.value) and "relu.default (used by the model)" in str(from_lower.value)
    with pytest.raises(ValueError, match=r"Close matches: addmm\.default, addmm\."):
        validate_overloads(["addmm"])  # no model known: the overload decompositions leave comes first


def test_a_bad_op_is_named_even_when_the_model_fails_to_export(user_models):
    _, mod = user_models
    with pytest.raises(ValueError, match="Unknown delegate op 'addmm'"):
        export_and_lower(mod.Branchy(), torch.randn(2), delegate_ops=["addmm"])


names = st.one_of(
    st.text("abdmz._T", max_size=14),  # typos near add / addmm / mm, with and without an overload
    st.sampled_from(["add", "addmm", "mm", "addd.Tensor", "add.tensor", "relu.", ".default", "zzz.q"]),
)


@settings(max_examples=60, deadline=None)
@given(name=names, used=st.lists(st.sampled_from(["addmm.default", "mm.default", "add.Tensor", "relu.default"])))
def test_any_unknown_op_is_refused_with_real_overloads_as_suggestions(name, used):
    if name.strip() in all_aten_overloads():
        assert validate_overloads([name], used=used) == (name.strip(),)
        return
    with pytest.raises(ValueError, match=r"^Unknown delegate op ") as info:
        validate_overloads([name], used=used)
    close = re.search(r"Close matches: (.*?)\. Write ops", str(info.value))
    suggested = close.group(1).split(", ") if close else []
    marked = [s.removesuffix(" (used by the model)") for s in suggested if s.endswith("(used by the model)")]
    assert all(s.removesuffix(" (used by the model)") in all_aten_overloads() for s in suggested), suggested
    assert set(marked) <= set(used) and suggested[: len(marked)] == [f"{m} (used by the model)" for m in marked]


def test_the_explorer_refuses_an_op_without_overload_naming_the_models(user_models):
    _, mod = user_models
    state = widgets().PlacementState()
    state.add_model("bare", *mod.bare())
    state.delegate_ops = ("addmm", "relu.default")
    with pytest.raises(ValueError, match=r"Close matches: addmm\.default \(used by the model\)"):
        state.placed()
    state.delegate_ops = ("addmm.default", "mm.default")  # mm: a real overload the model does not call
    assert state.ticked_ops() == ("addmm.default",) and state.placed().report.delegates == 1


def test_check_exported_refuses_a_non_tensor_output_naming_the_model():
    """What placement cannot handle is refused right after the export, by the library's own UnsupportedModelError;
    a program of tensor outputs passes."""

    class Outputs(torch.nn.Module):
        def __init__(self, extra):
            super().__init__()
            self.extra = extra

        def forward(self, x):
            return (x + 1, self.extra) if self.extra is not None else (x + 1,)

    with pytest.raises(UnsupportedModelError, match=r"^returns_int: output 1 is int 3, not a tensor"):
        check_exported("returns_int", torch.export.export(Outputs(3), (torch.ones(2),)))
    check_exported("tensors", torch.export.export(Outputs(None), (torch.ones(2),)))
