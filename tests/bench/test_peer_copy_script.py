"""benchmarks/peer_copy.py runs end to end on the simulated backend (labelled simulated) and writes its JSON."""

import json

from generated_page import benchmark_module


def test_peer_copy_benchmark_runs_on_the_simulated_backend(tmp_path):
    module = benchmark_module("peer_copy")
    out = tmp_path / "peer.json"
    module.main(
        [
            "--backend",
            "simulated",
            "--sizes",
            "4096",
            "65536",
            "--repeats",
            "2",
            "--program-size",
            "8",
            "--out",
            str(out),
        ]
    )
    result = json.loads(out.read_text())
    assert result["simulated"] and result["peer_access_0_1"]
    assert {(r["method"], r["bytes"]) for r in result["copies"]} == {
        (m, n) for m in ("peer", "host_hop") for n in (4096, 65536)
    }
    per_run = {r["strategy"]: r["per_run"] for r in result["program"]}
    assert per_run["executorch"] == {"h2d": 4, "d2h": 2, "d2d": 0}
    assert per_run["peer"] == {"h2d": 3, "d2h": 1, "d2d": 1}
