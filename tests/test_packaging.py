"""Packaging stays consistent: environment.yml mirrors pyproject.toml, torch is pinned exactly."""

import pathlib
import re

import tomllib
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower()


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _conda_pip_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {_name(r): r for r in pip if not r.startswith("-e")}


def test_environment_yml_lists_every_pyproject_requirement_but_gpu():
    project = _pyproject()
    wanted = {_name(r) for r in project["dependencies"]}
    for extra, requirements in project["optional-dependencies"].items():
        if extra != "gpu":  # CuPy's wheel depends on the CUDA version: the README says which to pick
            wanted |= {_name(r) for r in requirements}
    assert wanted == set(_conda_pip_requirements())


def test_versions_match_where_both_pin():
    project = _pyproject()
    declared = {_name(r): r for r in project["dependencies"]}
    for extra, requirements in project["optional-dependencies"].items():
        if extra != "gpu":
            declared.update({_name(r): r for r in requirements})
    conda = _conda_pip_requirements()
    for name, requirement in declared.items():
        if name == "torch":
            continue
        assert conda[name].replace(" ", "") == requirement.replace(" ", ""), name


def test_torch_is_pinned_exactly_for_installs():
    constraints = (ROOT / "constraints.txt").read_text().split()
    assert "torch==2.13.0" in constraints
    assert _conda_pip_requirements()["torch"] == "torch==2.13.0"
    assert "-c constraints.txt" in (ROOT / "Makefile").read_text()


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def _setuptools():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_the_package_list_is_every_package_folder_on_disk():
    """pyproject's `packages` names exactly the folders with an __init__.py under devcopy_lib and widgets (the
    latter installed as devcopy_widgets through package-dir): a new subpackage left out would be missing from the
    installed wheel while every test, run from the checkout, still passes."""
    folders = {"devcopy_lib": ROOT / "devcopy_lib", "devcopy_widgets": ROOT / "widgets"}
    assert {name: ROOT / path for name, path in _setuptools().get("package-dir", {}).items()} == {
        "devcopy_widgets": folders["devcopy_widgets"]
    }
    on_disk = {
        ".".join([top, *init.parent.relative_to(folder).parts])
        for top, folder in folders.items()
        for init in folder.rglob("__init__.py")
        if "node_modules" not in init.parts
    }
    assert sorted(_setuptools()["packages"]) == sorted(on_disk)


def test_license_is_an_spdx_string_with_a_setuptools_that_reads_it():
    """The table form (`license = {text = ...}`) is deprecated by setuptools and warned about at every install;
    the SPDX string needs setuptools >= 77 as the build requirement."""
    whole = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert whole["project"]["license"] == "BSD-3-Clause"
    (setuptools,) = [r for r in whole["build-system"]["requires"] if _name(r) == "setuptools"]
    assert int(re.search(r">=\s*(\d+)", setuptools).group(1)) >= 77
