"""`devcopy --help` and each subcommand's `--help` build the parser without torch: every module under cli/ imports
the library's heavy floors inside the function that needs them, so asking for help never pays for torch, the kernels
or the passes."""

import subprocess
import sys

import pytest

from devcopy_lib.cli import COMMANDS

# torch, and the floors' entry points that import it (a light helper such as runtime.files may load)
HEAVY = (
    "torch",
    "devcopy_lib.runtime.method",
    "devcopy_lib.lowering.lower",
    "devcopy_lib.placement.place",
    "devcopy_lib.pte.reader",
)


@pytest.mark.parametrize("argv", [["--help"], *([name, "--help"] for name in COMMANDS)], ids=" ".join)
def test_help_imports_nothing_heavy(argv):
    code = (
        "import sys\n"
        "from devcopy_lib.cli import execute\n"
        f"code, text, _ = execute({argv!r})\n"
        "assert code == 0 and text.startswith('usage: devcopy'), (code, text[:200])\n"
        f"print(sorted(m for m in sys.modules if m in {HEAVY!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
