"""docs/real_models.md is rendered from the committed data (benchmarks/real_models.py), never edited by hand, and
that data covers every real model with every delegate set, equal to eager, with ExecuTorch 1.5.1's verdict."""

import json
import pathlib

import pytest
from generated_page import benchmark_module

from devcopy_lib import models

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data" / "real_models.json"


@pytest.fixture(scope="module")
def rows():
    return json.loads(DATA.read_text())["rows"]


def test_page_matches_a_render_of_the_committed_data():
    assert benchmark_module("real_models").render() == (ROOT / "docs" / "real_models.md").read_text()


def test_every_real_model_ran_with_every_delegate_set_equal_to_eager_in_both_modes(rows):
    assert {(r["model"], r["delegate_set"]) for r in rows} == {
        (m, s) for m in models.REAL_MODELS for s in models.DELEGATE_SETS
    }
    for row in rows:
        for strategy, result in row["strategies"].items():
            assert all(run["ok"] for run in result["runs"].values()), (row["model"], row["delegate_set"], strategy)


def test_executorch_gave_a_verdict_on_every_row(rows):
    """Its own lowering ran: the counts agree, differ, or ExecuTorch refused (with its message); never skipped."""
    for row in rows:
        verdict = row["executorch_1_5_1"]
        assert verdict["status"] in ("agrees", "differs", "refused"), (row["model"], row["delegate_set"], verdict)
        assert verdict["status"] != "refused" or verdict["why"].startswith("ExecuTorch 1.5.1 refused")


def test_the_architecture_families_place_as_executorch_does_with_every_delegate_set(rows):
    """models/families.py at full size: delegates and copies equal to ExecuTorch 1.5.1's own lowering, every set."""
    family_rows = [r for r in rows if r["model"] in models.FAMILY_MODELS]
    assert {r["model"] for r in family_rows} == set(models.FAMILY_MODELS)
    for row in family_rows:
        theirs, ours = row["executorch_1_5_1"], row["strategies"]["executorch"]
        assert theirs["status"] == "agrees", (row["model"], row["delegate_set"], theirs)
        assert theirs["counts"] == {"delegates": ours["delegates"], **ours["copies"]}, (row["model"], theirs)


def test_gpt2_2l_with_matrix_ops_and_hoisting_copies_under_3_mb_h2d_per_call(rows):
    row = next(r for r in rows if (r["model"], r["delegate_set"]) == ("gpt2_2l", "matrix"))
    assert row["strategies"]["hoisting"]["bytes"]["h2d"] < 3e6
    assert row["strategies"]["executorch"]["bytes"]["h2d"] > 100e6  # the tied lm_head's transpose, every call


def test_re_measuring_some_models_keeps_the_other_rows_and_names_the_run(tmp_path, monkeypatch):
    bench, committed = benchmark_module("real_models"), json.loads(DATA.read_text())
    monkeypatch.setitem(bench.DATA, "simulated", tmp_path / "real_models.json")
    bench.DATA["simulated"].write_text(DATA.read_text())
    run = {**committed, "date": "2030-01-01", "rows": [r for r in committed["rows"] if r["model"] == "vit_tiny"]}
    assert bench._kept(run, list(models.REAL_MODELS)) is None  # every model measured: a fresh file
    merged = bench._merge(bench._kept(run, ["vit_tiny"]), run)
    assert [(r["model"], r["delegate_set"]) for r in merged["rows"]] == [
        (r["model"], r["delegate_set"]) for r in committed["rows"]
    ]
    assert merged["date"] == committed["date"] and merged["updates"][-1]["date"] == "2030-01-01"
    assert [u["models"] for u in merged["updates"]].count(["vit_tiny"]) == 1  # no earlier run claims it now
    assert "The rows of vit_tiny were measured later" in "\n".join(bench._section(merged))


def test_the_decode_steps_publish_their_bytes_per_step_by_role(rows):
    """Per direction the roles add up to the copied bytes; with matrix ops the KV cache (4 x 16 KiB) crosses twice,
    expanded to the query heads on the CPU."""
    decode = [r for r in rows if r["model"] in ("llama_decode_step", "llama_decode_step_functional")]
    assert len(decode) == 2 * len(models.DELEGATE_SETS)
    for row in decode:
        for strategy in row["strategies"].values():
            split = strategy["bytes_by_role"]
            assert {d: sum(role[d] for role in split.values()) for d in ("h2d", "d2h")} == strategy["bytes"]
    for row in (r for r in decode if r["delegate_set"] == "matrix"):
        assert row["strategies"]["executorch"]["bytes_by_role"]["cache"] == {"h2d": 2 * 4 * 16384, "d2h": 0}
