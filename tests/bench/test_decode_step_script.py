"""benchmarks/decode_step.py runs small on the simulated backend: every placement equal to eager, the cache's bytes
gone from each token once it is resident, and the JSON the GPU run publishes."""

import json

from generated_page import benchmark_module


def test_the_decode_step_benchmark_runs_small_on_the_simulated_backend(tmp_path):
    module = benchmark_module("decode_step")
    out = tmp_path / "decode.json"
    assert module.main(["--backend", "simulated", "--small", "--rounds", "1", "--calls", "1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    rows = {row["variant"]: row for row in result["rows"]}
    assert list(rows) == ["executorch", "hoisted", "resident", "every op"]  # no graphs on the simulated backend
    assert all(row["ok"] for row in rows.values()) and result["backend"] == "simulated"
    cache = 4 * 2 * 128 * 16 * 4  # keys and values of 2 layers, 2 heads x 128 positions x 16 wide, fp32
    assert rows["executorch"]["copy_bytes_by_role"]["cache"]["h2d"] == cache
    assert rows["resident"]["copy_bytes_by_role"]["cache"] == {"h2d": 0, "d2h": 0}
    assert rows["executorch"]["bytes_per_token"]["h2d"] - rows["resident"]["bytes_per_token"]["h2d"] >= cache
    assert result["eager"]["bytes_per_token"] == {"h2d": 16, "d2h": 4 * 1024}  # token id and position; logits
    assert rows["every op"]["bytes_per_token"] == result["eager"]["bytes_per_token"]  # nothing but those crosses
    assert rows["resident"]["bytes_per_token"]["h2d"] > 16  # the default set leaves the mask, rotary slices on the CPU
    assert result["meta"]["command"].startswith("python benchmarks/decode_step.py --backend simulated --small")
