"""The CLI contract under hostile input: one JSON object with `--json` whatever happens, exit 0/1/2 (130 on Ctrl-C),
the user's model file named when it fails, argument errors found before any work, finite JSON numbers."""

import json
import re
import warnings

import pytest

from devcopy_lib.cli import main
from devcopy_lib.cli.common import KIND_EXITS, to_json

MODEL_FILE = """
import sys
import torch

class Add(torch.nn.Module):
    def forward(self, x):
        return x + 1

class Const(torch.nn.Module):
    def __init__(self, value):
        super().__init__()
        self.value = value
    def forward(self, x):
        return self.value

class NonZero(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x) + 1

class NaNs(torch.nn.Module):
    def forward(self, x):
        return x / 0 * 0 + x.exp() * float("inf")

def good():
    print("chatty factory")  # stdout noise must not break the one JSON object
    return Add(), (torch.randn(2, 3),)
def exits_with_message(): sys.exit("msg")
def exits_3(): sys.exit(3)
def exits_0(): sys.exit(0)
def interrupted(): raise KeyboardInterrupt
def raises(): raise ValueError("my bad")
def five(): return Add(), 5
def float_input(): return Add(), (1.5,)
def str_input(): return Add(), ("abc",)
def returns_int(): return Const(3), (torch.randn(2),)
def returns_none(): return Const(None), (torch.randn(2),)
def data_dependent(): return NonZero(), (torch.tensor([1.0, 0.0, 2.0]),)
def nans(): return NaNs(), (torch.tensor([1.0, -1.0]),)
"""


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "m.py"
    path.write_text(MODEL_FILE)
    return str(path)


def _json(capsys, *argv):
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1, f"expected one JSON line, got {captured.out!r}"
    assert "Traceback" not in captured.err
    return code, json.loads(lines[0]), captured.err


@pytest.mark.parametrize(
    "factory, kind, code, fragment",
    [
        ("exits_with_message", "user_code", 1, r"sys\.exit\('msg'\)"),
        ("exits_3", "user_code", 1, r"sys\.exit\(3\)"),
        ("exits_0", "user_code", 1, r"sys\.exit\(0\)"),
        ("raises", "user_code", 1, "ValueError: my bad"),
        ("interrupted", "interrupted", 130, r"^interrupted \(Ctrl-C"),
        ("five", "usage", 2, "returns \\(module, example_inputs\\)"),
        ("float_input", "usage", 2, "input 0 is float 1.5"),
        ("str_input", "usage", 2, "input 0 is str 'abc'"),
        ("returns_int", "unsupported_model", 1, "output 0 is int 3, not a tensor"),
        ("returns_none", "unsupported_model", 1, "output 0 is NoneType None, not a tensor"),
        ("data_dependent", "unsupported_model", 1, "data-dependent size"),
    ],
)
@pytest.mark.parametrize("command", ["place", "run"])
def test_a_failing_model_file_gives_one_json_object_naming_it(
    capsys, model_file, factory, kind, code, fragment, command
):
    extra = ["--backend", "simulated"] if command == "run" else []
    got, result, _ = _json(capsys, command, f"{model_file}:{factory}", *extra)
    assert (got, result["ok"], result["error"]["kind"]) == (code, False, kind)
    assert re.search(fragment, result["error"]["message"])
    if kind == "user_code":
        assert (result["error"]["file"], result["error"]["factory"]) == (model_file, factory)
        assert f"{model_file}:{factory}" in result["error"]["message"]


META_FILE = """
import torch
torch.set_default_device("meta")

def linear():
    return torch.nn.Linear(4, 4), (torch.randn(2, 4),)
"""

SECOND_TRACE_FILE = """
import sys
import torch

TRACES = [0]

class FailsAgain(torch.nn.Module):
    def __init__(self, how):
        super().__init__()
        self.how = how
    def forward(self, x):
        TRACES[0] += 1
        if TRACES[0] > 1:  # devcopy's export passes; ExecuTorch's, the second, meets this
            if self.how == "raises":
                raise RuntimeError("fails on the second trace")
            sys.exit(0 if self.how == "exit_0" else "second trace")
        return x.sin() + x

def raises(): TRACES[0] = 0; return FailsAgain("raises"), (torch.randn(2, 4),)
def exit_0(): TRACES[0] = 0; return FailsAgain("exit_0"), (torch.randn(2, 4),)
def exit_message(): TRACES[0] = 0; return FailsAgain("exit_message"), (torch.randn(2, 4),)
"""


@pytest.mark.parametrize("command", ["place", "run"])
def test_a_model_file_that_sets_the_meta_device_is_user_code_naming_what_it_did(capsys, tmp_path, command):
    import torch

    path = tmp_path / "meta_model.py"
    path.write_text(META_FILE)
    extra = ["--backend", "simulated"] if command == "run" else []
    try:
        code, result, _ = _json(capsys, command, f"{path}:linear", *extra)
        assert torch.get_default_device().type == "cpu"  # put back: devcopy's own tensors need data
    finally:
        torch.set_default_device(None)
    error = result["error"]
    assert (code, error["kind"], error["file"], error["factory"]) == (1, "user_code", str(path), "linear")
    assert "parameter 'weight'" in error["message"] and "input 0" in error["message"]
    assert "torch.set_default_device('meta')" in error["message"]


@pytest.mark.parametrize(
    "factory, fragment",
    [
        ("raises", "RuntimeError: fails on the second trace"),
        ("exit_0", r"sys\.exit\(0\)"),
        ("exit_message", r"sys\.exit\('second trace'\)"),
    ],
)
@pytest.mark.parametrize("flag", ["--compare-executorch", "--save-pte"])
def test_a_forward_failing_in_executorchs_own_trace_is_user_code(capsys, tmp_path, factory, fragment, flag):
    pytest.importorskip("executorch")
    path = tmp_path / "second_trace.py"
    path.write_text(SECOND_TRACE_FILE)
    extra = [str(tmp_path / "out.pte")] if flag == "--save-pte" else []
    code, result, _ = _json(capsys, "place", f"{path}:{factory}", flag, *extra)
    error = result["error"]
    assert (code, error["kind"], error["file"], error["factory"]) == (1, "user_code", str(path), factory)
    assert re.search(fragment, error["message"]) and "ExecuTorch's torch.export" in error["message"]
    assert not (tmp_path / "out.pte").exists()


def test_every_kind_has_a_documented_exit_code():
    assert {code for code, _ in KIND_EXITS.values()} == {1, 2, 130}
    assert KIND_EXITS["usage"][0] == 2 and KIND_EXITS["interrupted"][0] == 130


def test_a_model_file_printing_on_stdout_keeps_the_single_object(capsys, model_file):
    code, result, err = _json(capsys, "place", f"{model_file}:good")
    assert code == 0 and result["ok"] is True and "chatty factory" in err


def test_nan_and_inf_where_eager_has_them_match(capsys, model_file):
    code, result, _ = _json(capsys, "run", f"{model_file}:nans", "--backend", "simulated")
    assert code == 0 and result["ok"] is True and result["max_abs_err"] == 0.0


def test_non_finite_numbers_become_null_with_a_note(capsys, monkeypatch):
    from devcopy_lib.workflows import model

    monkeypatch.setattr(model, "compare_outputs", lambda outputs, expected: (False, float("inf")))
    code, result, _ = _json(capsys, "run", "add", "--backend", "simulated")
    assert code == 1 and result["max_abs_err"] is None
    assert "step_errors" not in result  # one call: max_abs_err says it
    assert result["notes"] == ["max_abs_err is inf (not representable in JSON: written as null)"]


def test_to_json_is_strict_json():
    text = to_json({"a": [float("nan"), 1.0], "b": {"c": -float("inf")}})
    assert json.loads(text) == {
        "a": [None, 1.0],
        "b": {"c": None},
        "notes": [
            "a[0] is nan (not representable in JSON: written as null)",
            "b.c is -inf (not representable in JSON: written as null)",
        ],
    }


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (
            ["place", "add", "--target", "delegate_7=cuda:1"],
            "delegate_7: no such delegate. This lowering made: delegate_0",
        ),
        (
            ["place", "mlp", "--delegate", "mm.default", "--target", "add.Tensor=cuda:1"],
            "add.Tensor: not a delegated op",
        ),
        (["place", "add", "--target", "cuda:0", "--target", "cuda:1"], "two default devices"),
        (["place", "add", "--target", "add.Tensor=cuda:0", "--target", "add.Tensor=cuda:1"], "given twice"),
        (["place", "add", "--delegate", ""], "--delegate '' names nothing"),
        (["place", "add", "--delegate", " , "], "names nothing"),
        (["run", "add", "--mode", "aten", "--aten-libs", "portable"], "--libs portable: not aten-mode lib"),
        (["run", "add", "--mode", "aten", "--aten-libs", ""], "--libs '' names nothing"),
        (["run", "add", "--mode", "aten", "--aten-libs", "native,native"], "--libs: native given twice"),
        (["run", "add", "--target", "cuda:128"], "Device index must be an int in 0..127"),
        (["registry", "--ops", ""], "--ops '' names nothing"),
        (["registry", "--libs", ""], "--libs '' names nothing"),
        (["place", "add", "--js"], "unrecognized arguments: --js"),
        (["place", "--json-x", "add"], "unrecognized arguments: --json-x"),
        (["bogus-command"], "invalid choice: 'bogus-command'"),
        (["place", "nope.py:factory"], "not found"),
    ],
)
def test_argument_errors_are_exit_2_with_one_json_object(capsys, argv, fragment):
    code, result, _ = _json(capsys, *argv)
    assert (code, result["error"]["kind"]) == (2, "usage")
    assert fragment in result["error"]["message"]


@pytest.mark.parametrize("command", [["info"], ["run", "add"], ["bench", "--sizes", "4K"]])
def test_an_unknown_backend_in_the_environment_is_an_argument_error(capsys, monkeypatch, command):
    monkeypatch.setenv("DEVCOPY_BACKEND", "bogus")
    code, result, _ = _json(capsys, *command)
    assert (code, result["error"]["kind"]) == (2, "usage") and "Unknown backend 'bogus'" in result["error"]["message"]


def test_help_says_a_model_file_is_executed(capsys):
    assert main(["place", "--help"]) == 0
    assert re.search(r"this\s+executes\s+the\s+file", capsys.readouterr().out)


def test_torchs_known_future_warning_is_filtered(capsys):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["place", "add", "--json"]) == 0
    capsys.readouterr()
    assert not [w for w in seen if issubclass(w.category, FutureWarning)]


def test_a_refused_run_leaves_the_allocator_registry_as_it_was(capsys):
    from devcopy_lib.devices import registered_allocators

    before = registered_allocators()
    _json(capsys, "run", "add", "--backend", "simulated", "--mode", "aten", "--aten-libs", "native")
    assert registered_allocators() == before


def test_an_unexpected_failure_says_it_is_a_bug_not_a_bare_internal_message(capsys, monkeypatch):
    from devcopy_lib.workflows import environment

    def broken(name):
        raise TypeError("unsupported operand type(s) for *=: 'int' and 'NoneType'")

    monkeypatch.setattr(environment, "describe_environment", broken)
    code, result, _ = _json(capsys, "info", "--backend", "simulated")
    assert (code, result["error"]["kind"], result["error"]["exception"]) == (1, "internal", "TypeError")
    assert result["error"]["message"].startswith("devcopy failed unexpectedly (TypeError: unsupported operand")
    assert "This is a devcopy bug" in result["error"]["message"]


@pytest.mark.parametrize("backend", ["simulated", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_run_and_info_close_the_allocator_they_make(capsys, monkeypatch, backend):
    """On CuPy, closing the allocator stops its copy engine's threads."""
    from devcopy_lib.devices.allocator import DeviceAllocator
    from devcopy_lib.devices.copy_engine import CopyEngine

    closed, engines = [], []
    real_close, real_engine_close = DeviceAllocator.close, CopyEngine.close
    monkeypatch.setattr(DeviceAllocator, "close", lambda self: (closed.append(self.backend), real_close(self)))
    monkeypatch.setattr(CopyEngine, "close", lambda self: (engines.append(self), real_engine_close(self)))
    assert _json(capsys, "run", "add", "--backend", backend)[0] == 0
    assert _json(capsys, "info", "--backend", backend)[0] == 0
    assert closed == [backend, backend] and len(engines) == (2 if backend == "cupy" else 0)


def test_a_target_device_the_backend_does_not_have_is_an_argument_error(capsys, monkeypatch):
    from devcopy_lib.devices import SimulatedCudaAllocator, backend

    class OneDevice(SimulatedCudaAllocator):
        def device_count(self):
            return 1

    monkeypatch.setattr(backend, "make_allocator", lambda name: OneDevice())
    code, result, _ = _json(capsys, "run", "add", "--target", "cuda:1", "--backend", "simulated")
    assert (code, result["error"]["kind"]) == (2, "usage")
    assert "--target cuda:1: the simulated backend sees 1 device(s) (cuda:0..cuda:0)" in result["error"]["message"]


def _library_failures():
    from devcopy_lib.devices import DeviceCopyError, DeviceMemoryAccessError
    from devcopy_lib.devices.cuda_status import CudaError
    from devcopy_lib.placement.place import PlacementError
    from devcopy_lib.runtime.failures import ExecutionError, LoadError
    from devcopy_lib.runtime.operator_registry import RegistrationError
    from devcopy_lib.runtime.resolve import MissingOperatorError
    from devcopy_lib.tensors.error import Error

    return [
        (PlacementError("p"), "placement", None),
        (MissingOperatorError("m", [(0, "x")]), "missing_operator", "OperatorMissing"),
        (RegistrationError("r"), "registration", "RegistrationAlreadyRegistered"),
        (LoadError(Error.NotFound, "l"), "load", "NotFound"),
        (ExecutionError(Error.Internal, "e"), "execution", "Internal"),
        (DeviceCopyError("d"), "device", None),
        (CudaError("c", "cudaErrorInvalidValue", 1), "device", None),
        (DeviceMemoryAccessError("a"), "device", None),
        (MemoryError("o"), "device", None),
        (KeyboardInterrupt(), "interrupted", None),
        (TypeError("t"), "internal", None),
    ]


def test_the_librarys_failures_map_onto_the_error_kinds():
    from devcopy_lib.cli.common import classify

    for exc, kind, code in _library_failures():
        got, extra = classify(exc)
        assert (got, extra.get("error_code")) == (kind, code), type(exc).__name__
