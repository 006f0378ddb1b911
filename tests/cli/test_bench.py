"""`devcopy bench`: one JSON object with rows, CSV and plot files, sizes parsing and exit codes."""

import json
import os
import re

import pytest

from devcopy_lib.bench import harness
from devcopy_lib.cli import main


def test_bench_json_rows_on_the_simulated_backend(capsys):
    assert (
        main(["bench", "--backend", "simulated", "--sizes", "4K,64K", "--direction", "h2d", "--quick", "--json"]) == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["backend"] == "simulated" and "simulated" in out["device"]
    assert {(r["method"], r["bytes"], r["clock"]) for r in out["rows"]} == {
        (m, n, "wall") for m in ("numpy copyto", "devcopy allocator") for n in (4096, 65536)
    }
    assert set(out["rows"][0]) == {
        "method",
        "direction",
        "memory",
        "bytes",
        "clock",
        "median_s",
        "iqr_s",
        "gbps",
        "samples",
    }


def test_bench_writes_csv_and_plot(tmp_path, capsys):
    csv, png = tmp_path / "b.csv", tmp_path / "b.png"
    assert (
        main(
            [
                "bench",
                "--backend",
                "simulated",
                "--sizes",
                "1K..4K",
                "--direction",
                "d2h",
                "--quick",
                "--csv",
                str(csv),
                "--plot",
                str(png),
            ]
        )
        == 0
    )
    assert len(csv.read_text().splitlines()) == 1 + 2 * 3 and png.stat().st_size > 1000
    text = capsys.readouterr().out
    assert "backend: simulated" in text
    assert f"csv written to {csv}" in text and f"plot written to {png}" in text  # where to look, absolute
    rows = [line.split() for line in text.splitlines() if line.startswith(("numpy", "devcopy"))]
    assert rows and all(row[-5:-3] == ["KiB", "wall"] and row[-2] in ("us", "ms") for row in rows)  # 2 KiB, 8.1 us


def test_bench_json_names_the_files_it_wrote_and_keeps_raw_numbers(tmp_path, capsys):
    png = tmp_path / "b.png"
    argv = ["bench", "--backend", "simulated", "--sizes", "4K", "--quick", "--plot", str(png), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["written"] == {"plot": str(png)} and isinstance(result["rows"][0]["median_s"], float)


def test_bad_size_is_an_argument_error_with_the_accepted_forms(capsys):
    assert main(["bench", "--backend", "simulated", "--sizes", "4X", "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["ok"] is False and "Bad size '4X'" in captured.err and "K, M or G" in captured.err


@pytest.mark.parametrize("option", [["--memory", "pinned"], ["--direction", "both"]])
def test_what_the_simulated_backend_cannot_time_is_refused_with_the_reason(capsys, option):
    assert main(["bench", "--backend", "simulated", "--sizes", "4K", *option, "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "usage" and "it times d2h/pageable, h2d/pageable only" in error["message"]


@pytest.mark.parametrize(
    "sizes, message",
    [
        ("", "names nothing|No sizes"),
        ("99999999999999999999999G", "more (bytes )?than"),
        ("1G..2048G", "more than"),
        ("1" * 400, "400 digits are more bytes than any memory"),  # past a float: once an OverflowError
        ("4K.." + "9" * 400, "400 digits"),
        ("1" * 5000, "5000 digits"),  # past int()'s own 4300-digit limit
    ],
    ids=["empty", "huge", "huge-range", "400-digits", "400-digit-range", "5000-digits"],
)
def test_empty_or_absurd_sizes_are_argument_errors(capsys, sizes, message):
    assert main(["bench", "--backend", "simulated", "--sizes", sizes, "--json"]) == 2
    assert re.search(message, json.loads(capsys.readouterr().out)["error"]["message"])


@pytest.mark.parametrize("where", ["missing/dir/b.csv", ".", "readonly/b.csv"])
def test_a_bad_csv_path_is_refused_before_the_sweep(tmp_path, monkeypatch, capsys, where):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "readonly").mkdir(mode=0o500)
    monkeypatch.setattr(harness, "run_cases", lambda *a, **k: pytest.fail("the sweep ran before the path check"))
    if where.startswith("readonly") and os.access(tmp_path / "readonly", os.W_OK):
        pytest.skip("running as a user who can write a read-only folder (root)")
    assert main(["bench", "--backend", "simulated", "--sizes", "4K", "--csv", where, "--json"]) == 2
    assert "--csv" in json.loads(capsys.readouterr().out)["error"]["message"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["readonly"]


def test_a_plot_path_matplotlib_cannot_write_is_refused_before_the_sweep(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(harness, "run_cases", lambda *a, **k: pytest.fail("the sweep ran before the path check"))
    assert main(["bench", "--backend", "simulated", "--sizes", "4K", "--plot", str(tmp_path / "b.xyz"), "--json"]) == 2
    assert re.search(r"--plot .*b\.xyz' must end in .*\.png", json.loads(capsys.readouterr().out)["error"]["message"])
    assert not (tmp_path / "b.xyz").exists()


def test_ctrl_c_keeps_the_finished_rows_in_the_json_and_the_csv(tmp_path, monkeypatch, capsys):
    real = harness.measure
    calls = []

    def interrupted_on_the_third(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(harness, "measure", interrupted_on_the_third)
    csv = tmp_path / "b.csv"
    code = main(
        [
            "bench",
            "--backend",
            "simulated",
            "--sizes",
            "4K,8K",
            "--direction",
            "h2d",
            "--quick",
            "--csv",
            str(csv),
            "--json",
        ]
    )
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 130 and out["ok"] is False and out["error"]["kind"] == "interrupted"
    assert len(out["rows"]) == 2 and len(csv.read_text().splitlines()) == 1 + 2
    assert "Traceback" not in captured.err


def test_the_sweep_closes_its_allocator_also_when_interrupted(monkeypatch, capsys):
    from devcopy_lib.devices.allocator import DeviceAllocator

    closed, real_close = [], DeviceAllocator.close
    monkeypatch.setattr(DeviceAllocator, "close", lambda self: (closed.append(self), real_close(self)))
    assert main(["bench", "--backend", "simulated", "--sizes", "4K", "--direction", "h2d", "--quick", "--json"]) == 0
    monkeypatch.setattr(harness, "measure", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main(["bench", "--backend", "simulated", "--sizes", "4K", "--direction", "h2d", "--quick", "--json"]) == 130
    capsys.readouterr()
    assert len(closed) == 2 and all(a.closed and a.live_allocations() == 0 for a in closed)
