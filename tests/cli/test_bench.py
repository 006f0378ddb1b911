"""`devcopy bench`: one JSON object with rows, CSV and plot files, sizes parsing and exit codes."""
import json

from devcopy_lib.cli import main


def test_bench_json_rows_on_the_simulated_backend(capsys):
    assert main(["bench", "--backend", "simulated", "--sizes", "4K,64K", "--direction", "h2d", "--quick",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["backend"] == "simulated" and "simulated" in out["device"]
    assert {(r["method"], r["bytes"], r["clock"]) for r in out["rows"]} == {
        (m, n, "wall") for m in ("numpy copyto", "devcopy allocator") for n in (4096, 65536)}
    assert set(out["rows"][0]) == {"method", "direction", "memory", "bytes", "clock", "median_s", "iqr_s", "gbps",
                                   "samples"}


def test_bench_writes_csv_and_plot(tmp_path, capsys):
    csv, png = tmp_path / "b.csv", tmp_path / "b.png"
    assert main(["bench", "--backend", "simulated", "--sizes", "1K..4K", "--direction", "d2h", "--quick",
                 "--csv", str(csv), "--plot", str(png)]) == 0
    assert len(csv.read_text().splitlines()) == 1 + 2 * 3 and png.stat().st_size > 1000
    assert "backend: simulated" in capsys.readouterr().out


def test_bad_size_is_an_argument_error_with_the_accepted_forms(capsys):
    assert main(["bench", "--backend", "simulated", "--sizes", "4X", "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ok"] is False and "Bad size '4X'" in captured.err and "K, M or G" in captured.err


def test_pinned_only_on_the_simulated_backend_gives_no_rows(capsys):
    assert main(["bench", "--backend", "simulated", "--sizes", "4K", "--memory", "pinned", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == []
