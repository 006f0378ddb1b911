"""tools/lint/float_compare.py: the CI rule that floats from a solver are never compared with `==`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools/lint"))
from float_compare import exact_solver_compares  # noqa: E402  (a script folder, not a package)


def _flagged(source: str) -> list[int]:
    return [line for line, _ in exact_solver_compares(source)]


@pytest.mark.parametrize(
    "source",
    [
        "def t():\n    assert np.linalg.lstsq(a, b)[0][0] == 3.0\n",
        "def t():\n    line = fit_line(s, t)\n    assert line.bandwidth_gbps == 55.0\n",
        "def t():\n    model = CostModel.fit(r)\n    assert model.lines != other.lines\n",
        "def t():\n    x, y = np.polyfit(a, b, 1)\n    assert expected == y\n",
    ],
)
def test_an_exact_comparison_of_a_solver_result_is_flagged(source):
    assert _flagged(source) == [source.count("\n")]


@pytest.mark.parametrize(
    "source",
    [
        "def t():\n    assert fit_line(s, t).latency_s == pytest.approx(1e-5, rel=1e-9)\n",
        "def t():\n    line = fit_line(s, t)\n    assert line.close_to(other)\n",
        "def t():\n    model = CostModel.fit(r)\n    assert model.source == None\n",
        "def t():\n    model = fit(r)\n    assert again == model  # exact: a JSON round trip keeps every bit\n",
        "def t():\n    assert measured == 3.0\n",
    ],
)
def test_tolerances_constants_and_stated_exactness_pass(source):
    assert _flagged(source) == []


def test_the_repository_tests_pass_the_rule_and_the_command_fails_on_a_bad_file(tmp_path):
    ok = subprocess.run([sys.executable, str(ROOT / "tools/lint/float_compare.py"), str(ROOT / "tests")])
    assert ok.returncode == 0
    bad = tmp_path / "test_bad.py"
    bad.write_text("def test():\n    assert np.linalg.lstsq(a, b)[0] == 1.0\n")
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools/lint/float_compare.py"), str(tmp_path)], capture_output=True, text=True
    )
    assert run.returncode == 1 and "test_bad.py:2" in run.stderr and "pytest.approx" in run.stderr
