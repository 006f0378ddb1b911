"""workflows.program without the CLI: a `.pte` read, run and resolved, each from plain options to the result
`devcopy place|run|registry PATH.pte` print; a path that is no file is the library's InvalidArgumentError."""

from __future__ import annotations

import pytest

from devcopy_lib.errors import InvalidArgumentError
from devcopy_lib.runtime.libs import lib_by_name
from devcopy_lib.workflows.program import program_registry, read_program, run_program
from devcopy_lib.workflows.trial import RunOptions

pytestmark = pytest.mark.reference


def test_read_program_gives_the_program_and_its_placement_fields(sin_path):
    reading = read_program(sin_path)
    result = reading.to_dict()
    assert reading.program.operators == result["program"]["operators"]
    assert result["delegate_devices"] == {"delegate_0": "cuda:0"} and result["copies"]["h2d"] == 2


def test_run_program_matches_eager_and_executorchs_runtime(sin_path):
    result = run_program(sin_path, RunOptions(), "simulated")
    assert result["ok"] and result["max_abs_err"] == 0.0 and result["strategy"] == "executorch"
    assert result["copies_executed"] == {"h2d": 2, "d2h": 1}
    assert result["executorch"]["available"] is True


def test_program_registry_names_what_a_lib_set_misses(sin_path):
    result = program_registry(sin_path, [("aten", [lib_by_name("native")])])
    [only] = result["sets"]
    assert not only["ok"] and {m["name"] for m in only["missing"]} == {
        "et_copy::_h2d_copy.out",
        "et_copy::_d2h_copy.out",
    }


@pytest.mark.parametrize("problem", ["does not exist", "is a directory"])
def test_a_path_that_is_no_file_is_an_invalid_argument(tmp_path, problem):
    pytest.importorskip("executorch")
    path = str(tmp_path if problem == "is a directory" else tmp_path / "none.pte")
    with pytest.raises(InvalidArgumentError, match=problem):
        read_program(path)
