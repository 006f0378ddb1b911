"""Property-based fuzz of the CLI contract: argument lists drawn from the real option space (every subcommand's
options as the parser declares them, with valid and invalid values), run in-process. Whatever the arguments: exactly
one JSON object on stdout, an exit code in {0, 1, 2} with its documented error kind, no traceback on stderr, and no
file written when the command is refused."""

import contextlib
import io
import json
import os
import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from devcopy_lib.cli import build_parser, main
from devcopy_lib.cli.common import KIND_EXITS

# Free-text options: (valid values, invalid values); {tmp} is a fresh folder per example.
VALUES = {
    "model": (["add", "mlp", "shared_input"], ["nope", "x.py:f", "", "{tmp}/none.pte"]),
    "program": (["{tmp}/none.pte"], ["x.py", ""]),  # registry's optional PATH.pte (tests/cli/test_pte_cli.py runs one)
    "--delegate": (["add.Tensor", "mm.default,add.Tensor"], ["", "bogus", "add.tensor"]),
    "--target": (
        ["cuda:0", "cuda:1", "delegate_0=cuda:1", "add.Tensor=cuda:1"],
        ["delegate_7=cuda:1", "tpu:0", "=cuda:0", "cuda:-1"],
    ),
    "--aten-libs": (["native,device_copy_ops_aten_lib"], ["native", "portable", "", "natve"]),
    "--libs": (["portable", "native,device_copy_ops_aten_lib"], ["native", "", "nope"]),
    "--ops": (["et_copy::_h2d_copy.out", "aten::add*"], ["", "zzz"]),
    "--sizes": (["4K", "1K,4K"], ["", "4X", "99999999999999999999999G", "4K..1K", "0"]),
    "--csv": (["{tmp}/b.csv"], ["{tmp}/missing/b.csv", "{tmp}", ""]),
    "--plot": (["{tmp}/b.png"], ["{tmp}/b.xyz", "{tmp}/missing/b.png"]),
    "--profile": (["2"], ["0", "x"]),  # devcopy run --profile N (the runtime's execution plan)
    "--steps": (["2"], ["0", "x", "-1"]),  # devcopy run --steps N (consecutive calls of one method)
    "--report": (["{tmp}/r.html", "{tmp}/r.json"], ["{tmp}/r.pdf", "{tmp}/missing/r.html", "{tmp}"]),
    "--diff-delegate": (["add.Tensor", "mm.default,add.Tensor"], ["", "bogus"]),
    "--trace": (["{tmp}/t.json"], ["{tmp}/t.html", "{tmp}/missing/t.json"]),
}
JUNK = ["--js", "--bogus", "-x", "extra"]
# --json is placed separately; ExecuTorch takes seconds (--compare-executorch, --save-pte: tests/cli/test_pte_cli.py)
SKIPPED = {"--help", "--json", "--compare-executorch", "--save-pte"}


def _subcommands():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    return {name: [a for a in p._actions if not SKIPPED & set(a.option_strings)] for name, p in sub.choices.items()}


SUBCOMMANDS = _subcommands()


@st.composite
def argument_lists(draw):
    """A subcommand with some of its options; half the lists use valid values only (so commands run too)."""
    command = draw(st.sampled_from(sorted(SUBCOMMANDS)))
    hostile = draw(st.booleans())
    argv = [command]
    for action in SUBCOMMANDS[command]:
        name = action.option_strings[0] if action.option_strings else action.dest
        required = (not action.option_strings and action.nargs != "?") or (command == "bench" and name == "--sizes")
        if not required and draw(st.integers(0, 2)):
            continue
        if action.nargs == 0:
            argv.append(name)
            continue
        valid, invalid = (list(action.choices), ["bogus"]) if action.choices else VALUES[name]
        value = draw(st.sampled_from(valid + invalid if hostile else valid))
        argv += [value] if not action.option_strings else [name, value]
    if not hostile and {"--aten-libs", "--aten-device-rule"} & set(argv):  # the ATen options need --mode aten
        if "--mode" in argv:
            del argv[argv.index("--mode") : argv.index("--mode") + 2]
        argv += ["--mode", "aten"]
    if command == "bench":
        argv.append("--quick")  # a full policy times each size for seconds: the contract is the same
    if hostile:
        argv += draw(st.lists(st.sampled_from(JUNK), max_size=1))
    argv.insert(draw(st.integers(0 if hostile else 1, len(argv))), "--json")
    return argv


@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", 40)), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(argument_lists())
def test_every_argument_list_keeps_the_contract(argv):
    with tempfile.TemporaryDirectory() as tmp:
        argv = [a.replace("{tmp}", tmp) for a in argv]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        lines = out.getvalue().splitlines()
        assert len(lines) == 1, (argv, out.getvalue())
        result = json.loads(lines[0])
        assert code in (0, 1, 2), (argv, code, result)
        event(f"{argv[0] if argv[0] != '--json' else argv[1]} exit {code}")
        assert "Traceback" not in err.getvalue(), (argv, err.getvalue())
        if "error" in result:
            assert KIND_EXITS[result["error"]["kind"]][0] == code, (argv, result)
            assert result["error"]["kind"] != "internal", (argv, result)
        if code == 2:
            assert os.listdir(tmp) == [], (argv, os.listdir(tmp))
