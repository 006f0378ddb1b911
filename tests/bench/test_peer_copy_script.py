"""benchmarks/peer_copy.py runs end to end on the simulated backend (labelled simulated) and writes its JSON."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_peer_copy_benchmark_runs_on_the_simulated_backend(tmp_path):
    spec = importlib.util.spec_from_file_location("peer_copy", ROOT / "benchmarks/peer_copy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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
