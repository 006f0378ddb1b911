"""One price and one wording per copy: the same placement rendered through every surface - the explorer's graph
data, decision table, totals and exported report, the report dict, `devcopy place` as text and JSON and its
`--report` in both formats, and `devcopy run --profile` - gives each copy the price of `bench.cost_model.price_copy`
for the same backend, host memory kind and clock, carries one provenance record of that basis unchanged, says it in
the same words (on the simulated backend: the measured machine's time, never the simulated backend's), and words
what dedupe saves in one way (docs/benchmarks.md, "Prices")."""

import json

import pytest
from devcopy_widgets import PlacementExplorer

from devcopy_lib.bench.cost_model import basis_text, copy_pricer, price_copy
from devcopy_lib.cli import main
from devcopy_lib.names import format_seconds

MODEL, PARTITION = "shared_input", "per_node"  # dedupe saves copies here, so the savings have words to compare


def _cli(capsys, *argv):
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def explorer():
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEVCOPY_BACKEND", "simulated")
        return PlacementExplorer(model=MODEL, partition=PARTITION)


def _copies(nodes, key="name"):
    """The copy nodes (or rows) of a surface by name (the graph view calls it `id`)."""
    return {n[key]: n for n in nodes if n["kind"] in ("h2d", "d2h")}


def test_every_surface_gives_a_copy_the_one_price_and_says_its_basis(explorer, capsys):
    from devcopy_widgets import graph_view_data, placement_summary

    pricing = copy_pricer().basis()
    assert pricing == {
        "backend": "simulated",
        "memory": "pageable",
        "clock": "wall",
        "measured_on": "NVIDIA H200 (cupy)",
        "times_of": "NVIDIA H200 (cupy)",  # no device to time here: the figures are the H200's, and say so
    }
    report = explorer.placed.report.to_dict()
    explorer_nodes = _copies(graph_view_data.graph_elements(explorer.placed)[0], key="id")
    table = _copies(placement_summary.table_rows(explorer.placed.report))
    cli = json.loads(_cli(capsys, "place", MODEL, "--partition", PARTITION, "--json"))
    text = _cli(capsys, "place", MODEL, "--partition", PARTITION)
    assert report["pricing"] == cli["pricing"] == pricing
    assert basis_text(pricing) in text and basis_text(pricing) in explorer.counts.value
    expected = {
        n["name"]: price_copy(n["kind"], n["bytes"], backend="simulated").seconds
        for n in _copies(report["nodes"]).values()
    }
    assert len(expected) == 5 and all(seconds > 0 for seconds in expected.values())
    assert {name: n["predicted_s"] for name, n in _copies(cli["nodes"]).items()} == expected
    assert {name: n["predicted_s"] for name, n in explorer_nodes.items()} == expected
    for name, seconds in expected.items():
        shown = format_seconds(seconds)
        assert table[name]["predicted"] == shown
        assert explorer_nodes[name]["predicted_text"].endswith(
            f"as on NVIDIA H200 (cupy), not a time of the simulated backend, pageable host memory, wall clock: {shown}"
        )
        assert any(line.split()[0] == name and f" {shown} " in line for line in text.splitlines())


def test_a_profiled_copy_is_measured_and_priced_beside_it_by_the_same_function(capsys):
    result = json.loads(_cli(capsys, "run", "add", "--profile", "2", "--json"))
    assert result["pricing"] == copy_pricer().basis()
    copies = [row for row in result["profile"] if row["kind"] == "copy"]
    assert len(copies) == 3 and all(row["measured_s"] > 0 and row["memory"] == "pageable" for row in copies)
    directions = ["h2d", "h2d", "d2h"]
    assert [row["predicted_s"] for row in copies] == [
        price_copy(d, row["bytes"], backend="simulated").seconds for d, row in zip(directions, copies, strict=True)
    ]
    text = _cli(capsys, "run", "add", "--profile", "2")
    assert basis_text(result["pricing"]) in text and f"| {format_seconds(copies[0]['predicted_s'])} |" in text


def test_what_dedupe_saves_is_worded_once(explorer, capsys):
    cli = json.loads(_cli(capsys, "place", MODEL, "--partition", PARTITION, "--json"))
    text = _cli(capsys, "place", MODEL, "--partition", PARTITION)
    (dedupe,) = [c for c in cli["comparison"] if c["strategy"] == "dedupe"]
    words = explorer.placed.report.savings("dedupe", "executorch")
    assert words.startswith("dedupe saves 2 H2D, 128 B against executorch")
    assert dedupe["savings"] == words and words in text.splitlines()
    assert words in explorer.savings.value and "-2" not in text and "saved" not in text


def test_every_report_carries_the_one_provenance_record_in_the_same_words(explorer, capsys, tmp_path):
    """`devcopy place --report` (HTML and JSON), the explorer's export, `devcopy place` and `devcopy run --profile`:
    the same copy at the same price, the same record of what the price assumes, and the same words for it."""
    pricing = copy_pricer().basis()
    words = basis_text(pricing)
    assert "NVIDIA H200" in words and "not a time of the simulated backend" in words
    assert "copy times predicted for the simulated backend" not in words
    argv = ["place", MODEL, "--partition", PARTITION]
    text = _cli(capsys, *argv, "--report", str(tmp_path / "r.html"))
    _cli(capsys, *argv, "--report", str(tmp_path / "r.json"))
    explorer.export_report(str(tmp_path / "e.json"))
    explorer.export_report(str(tmp_path / "e.html"))
    run = _cli(capsys, "run", MODEL, "--partition", PARTITION, "--profile", "2")
    for name in ("r.json", "e.json"):
        document = json.loads((tmp_path / name).read_text())
        provenance = document["provenance"]
        assert document["pricing"] == provenance["pricing"] == pricing, name
        assert provenance["backend"] == "simulated" and provenance["priced_memory"] == "pageable", name
        assert provenance["cost_model"]["device"] == "NVIDIA H200", name
    h2d = next(n for n in json.loads((tmp_path / "r.json").read_text())["nodes"] if n["kind"] == "h2d")
    price = format_seconds(price_copy("h2d", h2d["bytes"], backend="simulated").seconds)
    for name in ("r.html", "e.html"):
        page = (tmp_path / name).read_text()
        assert words in page and f"{price}<" in page, name
        assert "backend</dt><dd>simulated<" in page and "not priced" not in page, name
    assert words in text and words in run and words in explorer.counts.value
    assert any(line.split()[0] == h2d["name"] and f" {price} " in line for line in text.splitlines())
    assert f"| {price} |" in run
