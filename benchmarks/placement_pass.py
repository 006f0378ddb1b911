"""Time devcopy's placement against ExecuTorch 1.5.1's, and lowering phase by phase on GPT-2-shaped graphs.

1. Graphs of alternating delegated (add) and CPU (cos) ops: the pass alone and export+lower+place end to end,
   against ExecuTorch up to 1,000 nodes (its end to end takes minutes beyond), devcopy alone up to 5,000.
2. GPT-2-shaped graphs of about 1k/2k/4k/8k nodes, each size in a fresh process: export, decompositions, partition
   (devcopy's capability partitioner, and torch.fx's where it finishes in reasonable time), builder, placement.

Writes docs/data/placement_pass.json (machine, date, command, versions, raw samples) and renders
docs/placement_pass.md from it. Run: `.venv/bin/python benchmarks/placement_pass.py [--quick]`.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from typing import Any

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner

from devcopy_lib.bench.clocks import CpuClock, WallClock
from devcopy_lib.bench.harness import repeat
from devcopy_lib.bench.measurement import median_of
from devcopy_lib.lowering.lower import DEFAULT_DELEGATE_OPS, OverloadSupport, export_and_lower, lower
from devcopy_lib.lowering.partition import propose_partitions
from devcopy_lib.placement.place import PlaceDevicesPass, copy_graph_module, place_devices

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA, PAGE = os.path.join(ROOT, "docs/data/placement_pass.json"), os.path.join(ROOT, "docs/placement_pass.md")
OPS = ["add.Tensor"]


class Alternating(torch.nn.Module):
    """`x = cos(x + b)` repeated: every add is its own delegate (a CPU cos between each pair)."""

    def __init__(self, pairs: int):
        super().__init__()
        self.pairs = pairs

    def forward(self, x: Any, b: Any) -> Any:
        for _ in range(self.pairs):
            x = torch.cos(x + b)
        return x


class _Gpt2Block(torch.nn.Module):
    """GPT-2's block as transformers writes it: pre-norm causal attention (fused qkv, split, heads), tanh-GELU MLP."""

    bias: torch.Tensor  # the causal mask, a registered buffer

    def __init__(self, dim: int, heads: int, seq: int):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.c_attn, self.c_proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.c_fc, self.mlp_proj = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq, dtype=torch.bool)))

    def forward(self, x: Any) -> Any:
        batch, seq, dim = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(dim, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, dim // self.heads).permute(0, 2, 1, 3) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / (dim // self.heads) ** 0.5
        scores = torch.where(self.bias[:seq, :seq], scores, torch.finfo(scores.dtype).min)
        attn = torch.matmul(torch.softmax(scores, dim=-1), v)
        x = x + self.c_proj(attn.permute(0, 2, 1, 3).contiguous().view(batch, seq, dim))
        h = self.c_fc(self.ln_2(x))
        h = 0.5 * h * (1.0 + torch.tanh(0.7978845608028654 * (h + 0.044715 * torch.pow(h, 3.0))))
        return x + self.mlp_proj(h)


class Gpt2Shaped(torch.nn.Module):
    """A GPT-2-shaped language model (token + position embeddings, blocks, final norm, tied lm_head), small widths:
    graph size grows with `layers` (about 70 decomposed nodes each), as a real GPT-2's does."""

    def __init__(self, layers: int, dim: int = 16, heads: int = 2, seq: int = 8, vocab: int = 32):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, dim), torch.nn.Embedding(seq, dim)
        self.blocks = torch.nn.ModuleList(_Gpt2Block(dim, heads, seq) for _ in range(layers))
        self.ln_f = torch.nn.LayerNorm(dim)

    def forward(self, ids: Any) -> Any:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def gpt2_shaped(layers: int) -> tuple[torch.nn.Module, tuple[Any, ...]]:
    """(model, example inputs) for a GPT-2-shaped graph of `layers` blocks, seeded."""
    torch.manual_seed(0)
    return Gpt2Shaped(layers).eval(), (torch.randint(0, 32, (1, 8)),)


def _time(fn: Any, repeats: int) -> list[float]:
    """Wall seconds of `repeats` calls (`bench.harness.repeat`), raw: the page takes medians of the JSON's samples."""
    return list(repeat(fn, repeats)[1]["wall"].samples)


def devcopy_case(pairs: int, repeats: int) -> dict[str, Any]:
    model, inputs = Alternating(pairs), (torch.randn(4, 4), torch.randn(4, 4))
    lowered = export_and_lower(model, inputs, OPS)
    graphs = [copy_graph_module(lowered.graph_module) for _ in range(repeats)]  # copied untimed, as for ExecuTorch
    placed = graphs[0]
    pass_alone = _time(lambda: PlaceDevicesPass()(graphs.pop()), repeats)
    end_to_end = _time(lambda: place_devices(export_and_lower(model, inputs, OPS)), max(1, repeats // 3))
    return {
        "pass_s": pass_alone,
        "end_to_end_s": end_to_end,
        "graph_nodes": len(lowered.graph_module.graph.nodes),
        "copies": _copies(placed),
        "partition": "capability",
    }


def _copies(gm: torch.fx.GraphModule) -> int:
    """The et_copy nodes in a placed graph: both passes must insert the same number, or the timing compares unequal
    work."""
    return sum(node.op == "call_function" and "et_copy" in str(node.target) for node in gm.graph.nodes)


def executorch_case(pairs: int, repeats: int) -> dict[str, Any]:
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
    from executorch.exir.passes.propagate_device_pass import PropagateDevicePass
    from executorch.exir.passes.spec_prop_pass import SpecPropPass

    from devcopy_lib import reference

    model, inputs = Alternating(pairs), (torch.randn(4, 4), torch.randn(4, 4))

    def lower() -> Any:
        edge = to_edge(torch.export.export(model, inputs), compile_config=EdgeCompileConfig(_check_ir_validity=False))
        return edge.to_backend(reference.partitioner(OPS, "cuda:0", "capability"))

    def end_to_end() -> None:
        lower().to_executorch(ExecutorchBackendConfig(emit_stacktrace=False, enable_non_cpu_memory_planning=True))

    # SpecPropPass returns a new module with the tensor specs the device pass reads; the old one has none, and the
    # device pass inserts no copy into it.
    gm = SpecPropPass()(lower().exported_program().graph_module).graph_module
    # plain GraphModules, as ExecuTorch's own flow has them (devcopy's copies are lazily recompiled: its choice)
    graphs = [torch.fx.GraphModule(gm, copy.deepcopy(gm.graph)) for _ in range(repeats)]
    placed = graphs[0]
    pass_alone = _time(lambda: PropagateDevicePass(enable_non_cpu_memory_planning=True)(graphs.pop()), repeats)
    return {"pass_s": pass_alone, "end_to_end_s": _time(end_to_end, 1), "copies": _copies(placed)}


def gpt2_case(layers: int, with_fx: bool, repeats: int = 5) -> dict[str, Any]:
    """Per-phase seconds for one GPT-2-shaped size, delegating DEFAULT_DELEGATE_OPS (run in a fresh process)."""
    model, inputs = gpt2_shaped(layers)
    row: dict[str, Any] = {"layers": layers}
    exported = _measured(row, "export", lambda: torch.export.export(model, inputs))
    program = _measured(row, "decompositions", exported.run_decompositions)
    support = OverloadSupport(DEFAULT_DELEGATE_OPS)
    groups = _measured(row, "partition", lambda: propose_partitions(program.graph_module, support), repeats)
    lowered = _measured(row, "lower", lambda: lower(program), repeats)
    _measured(row, "placement", lambda: place_devices(lowered), repeats)
    row["lower_and_placement_collector_on_s"] = _collector_on(lambda: place_devices(lower(program)), repeats)
    row.update(graph_nodes=len(program.graph_module.graph.nodes), partitions=len(groups))
    if with_fx:
        proposed = _measured(
            row,
            "partition_fx",
            lambda: CapabilityBasedPartitioner(
                program.graph_module, support, allows_single_node_partition=True
            ).propose_partitions(),
        )
        row["fx_agrees"] = {frozenset(n.name for n in g) for g in groups} == {
            frozenset(n.name for n in p.nodes) for p in proposed
        }
    return row


def _measured(row: dict[str, Any], phase: str, fn: Any, repeats: int = 1) -> Any:
    """Run fn `repeats` times; record CPU seconds of this process (`<phase>_s`) and wall seconds (`<phase>_wall_s`),
    each run after a full garbage collection and with the collector paused, as Python's timeit runs: a collection
    scans the whole heap (the exported program included), so whether one lands in a run is luck. CPU time is what
    the page shows: on a shared machine other jobs stretch wall time unevenly."""
    result, timings = repeat(fn, repeats, (CpuClock(), WallClock()), gc_paused=True)
    row[f"{phase}_s"], row[f"{phase}_wall_s"] = list(timings["cpu"].samples), list(timings["wall"].samples)
    return result


def _collector_on(fn: Any, repeats: int) -> list[float]:
    """CPU seconds of `fn` with the garbage collector left as it is (collections land in some runs)."""
    return list(repeat(fn, repeats, (CpuClock(),))[1]["cpu"].samples)


def _gpt2_in_fresh_process(layers: int, with_fx: bool) -> dict[str, Any]:
    """One size per process: earlier sizes' objects would make every garbage collection of this one slower."""
    command = [sys.executable, os.path.abspath(__file__), "--gpt2-case", str(layers)] + (["--fx"] if with_fx else [])
    done = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT)
    case: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return case


def _median(xs: list[float]) -> float | None:
    return median_of(xs) if xs else None


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


def _ratio(theirs: float | None, ours: float | None) -> str:
    return "-" if theirs is None or not ours else f"{theirs / ours:.1f}x"


def render(data: dict[str, Any]) -> str:
    """docs/placement_pass.md from the JSON data (medians, ratios, time per graph node; raw samples stay in JSON)."""
    lines = [
        "# Placement pass: devcopy vs ExecuTorch 1.5.1",
        "",
        f"Generated by `{data['command']}` on {data['date']} ({data['machine']}); versions: "
        + ", ".join(f"{k} {v}" for k, v in data["versions"].items())
        + ".",
        "",
        "Graphs alternate a delegated `add` (its own delegate, on cuda:0) and a CPU `cos`. *Pass* times the placement "
        "pass alone on the lowered graph (ExecuTorch: `PropagateDevicePass` after `SpecPropPass`); *end to end* is "
        "export + lower + place (ExecuTorch: export, `to_edge`, `to_backend`, `to_executorch`). Both passes "
        "insert the same copies (the run stops otherwise: a pass timed on a graph without specs inserts none). "
        "Medians; *faster* is "
        "ExecuTorch's median over devcopy's; *µs/node* is devcopy's pass time per node of the lowered graph (flat "
        "means linear). devcopy lowers with its capability partitioner (the partitions torch.fx's would propose); "
        "ExecuTorch is timed up to 1,000 nodes, where its end to end already takes minutes. Wall-clock seconds; "
        "where the machine is shared with other jobs the ratios say more than the absolute times"
        + (
            f" (1-minute load average at the end of the run: {data['load_average']:.1f})"
            if "load_average" in data
            else ""
        )
        + ". Raw samples in `docs/data/placement_pass.json`.",
        "",
        "| model ops | graph nodes | copies inserted (devcopy / ExecuTorch) | devcopy pass | ExecuTorch pass | "
        "faster | devcopy end to end | ExecuTorch end to end | faster | devcopy pass µs/node |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in data["rows"]:
        ours, theirs = row["devcopy"], row.get("executorch") or {}
        pass_ours, pass_theirs = _median(ours["pass_s"]), _median(theirs.get("pass_s", []))
        e2e_ours, e2e_theirs = _median(ours["end_to_end_s"]), _median(theirs.get("end_to_end_s", []))
        nodes = ours.get("graph_nodes")
        per_node = f"{pass_ours / nodes * 1e6:.0f}" if nodes else "-"
        lines.append(
            f"| {row['ops']} | {nodes or '-'} | {ours.get('copies', '-')} / {theirs.get('copies', '-')} | "
            f"{_ms(pass_ours)} | {_ms(pass_theirs)} | "
            f"{_ratio(pass_theirs, pass_ours)} | {_ms(e2e_ours)} | {_ms(e2e_theirs)} | "
            f"{_ratio(e2e_theirs, e2e_ours)} | {per_node} |"
        )
    if data.get("gpt2_rows"):
        lines += _render_gpt2(data["gpt2_rows"])
    return "\n".join(lines) + "\n"


def _seconds(xs: list[float] | float | None) -> str:
    """A median (or a value) as `12.3 ms` below a second, `2.27 s` from one; `-` when there is none."""
    if xs is None or xs == []:
        return "-"
    value = median_of(xs) if isinstance(xs, list) else xs
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.2f} s"


def _render_gpt2(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "",
        "## Lowering phase by phase: GPT-2-shaped graphs",
        "",
        "`Gpt2Shaped(layers)` (token and position embeddings, pre-norm causal attention with a fused qkv projection, "
        "tanh-GELU MLP, tied lm_head; small widths) delegating `DEFAULT_DELEGATE_OPS`, each size in a fresh process. "
        '*Partition* is devcopy\'s capability partitioner (`partition="capability"`), *torch.fx* is '
        '`CapabilityBasedPartitioner.propose_partitions()` (`partition="fx"`, one run, only where it finishes in '
        "reasonable time; *same* says whether both proposed the same node sets). *Builder* is `lower()` minus the "
        "partition; *lowering + placement* is `lower()` + `place_devices()`, to compare with *export* "
        "(`torch.export.export`). CPU seconds of the benchmark process, medians of 5 runs (export, decompositions "
        "and torch.fx: one run), each after a full garbage collection and with the collector paused, as Python's "
        "`timeit` runs; wall seconds are in the JSON. *Collector on* is `lower()` + `place_devices()` with the "
        "collector left running: a full collection scans the whole heap, exported program included, and lands in "
        "some runs and not others.",
        "",
        "| layers | graph nodes | partitions | export | decompositions | partition | torch.fx | same | builder | "
        "placement | lowering + placement | vs export | collector on |",
        "|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|---:|",
    ]
    totals: dict[int, float] = {}
    for row in rows:
        lowering, placement = median_of(row["lower_s"]), median_of(row["placement_s"])
        totals[row["graph_nodes"]] = total = lowering + placement
        export = median_of(row["export_s"])
        agrees = row.get("fx_agrees")
        same = "-" if agrees is None else "yes" if agrees else "no"
        lines.append(
            f"| {row['layers']} | {row['graph_nodes']} | {row['partitions']} | {_seconds(export)} | "
            f"{_seconds(row['decompositions_s'])} | {_seconds(row['partition_s'])} | "
            f"{_seconds(row.get('partition_fx_s'))} | {same} | "
            f"{_seconds(lowering - median_of(row['partition_s']))} | {_seconds(placement)} | "
            f"{_seconds(total)} | {total / export:.2f}x | "
            f"{_seconds(row['lower_and_placement_collector_on_s'])} |"
        )
    if len(totals) > 1:
        (small, t_small), (large, t_large) = sorted(totals.items())[-2:]
        lines += [
            "",
            f"Lowering + placement grows {t_large / t_small:.2f}x from {small} to {large} nodes "
            f"({large / small:.2f}x the nodes).",
        ]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    parser.add_argument("--render", action="store_true", help="only re-render the page from the committed data")
    parser.add_argument("--gpt2-case", type=int, metavar="LAYERS", help=argparse.SUPPRESS)  # one size, as JSON
    parser.add_argument("--fx", action="store_true", help=argparse.SUPPRESS)  # with --gpt2-case: time torch.fx's too
    args = parser.parse_args()
    if args.gpt2_case:
        print(json.dumps(gpt2_case(args.gpt2_case, args.fx)))
        return 0
    if args.render:
        with open(DATA) as f:
            data = json.load(f)
        with open(PAGE, "w") as f:
            f.write(render(data))
        return 0
    # sizes in lowered-graph nodes (about 1.5 per model op: a delegate call, its getitem, a CPU cos per pair)
    both, alone = ([200], [1000]) if args.quick else ([200, 500, 1000], [2000, 5000])
    # GPT-2-shaped: about 74 decomposed nodes per layer; torch.fx's partitioner timed up to about 2,000 nodes
    gpt2_layers, fx_up_to = ([2, 4], 4) if args.quick else ([13, 27, 54, 108], 27)
    versions = {p: importlib.metadata.version(p) for p in ("torch", "executorch", "devcopy")}
    data = {
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip(),
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/placement_pass.py" + (" --quick" if args.quick else ""),
        "python": sys.version.split()[0],
        "versions": versions,
        "rows": [],
        "gpt2_rows": [],
    }
    os.makedirs(os.path.dirname(DATA), exist_ok=True)

    def save() -> None:  # after every size, so a long last size never loses the finished ones
        data["load_average"] = os.getloadavg()[0]
        with open(DATA, "w") as f:
            json.dump(data, f, indent=1)
        with open(PAGE, "w") as f:
            f.write(render(data))

    for layers in gpt2_layers:
        data["gpt2_rows"].append(_gpt2_in_fresh_process(layers, layers <= fx_up_to))
        save()
        print(json.dumps({k: v for k, v in data["gpt2_rows"][-1].items() if not k.endswith("_s")}), flush=True)
    for nodes in both + alone:
        pairs = max(1, nodes // 3)
        row: dict[str, Any] = {"ops": 2 * pairs, "devcopy": devcopy_case(pairs, 5)}
        if nodes in both:
            row["executorch"] = executorch_case(pairs, 3)
            if row["executorch"]["copies"] != row["devcopy"]["copies"]:
                raise SystemExit(
                    f"unequal work at {pairs} pairs: {row['devcopy']['copies']} copies by devcopy, "
                    f"{row['executorch']['copies']} by ExecuTorch's pass; fix the benchmark's setup"
                )
        data["rows"].append(row)
        save()
        print(
            json.dumps({"nodes": row["devcopy"]["graph_nodes"], "devcopy_pass_s": median_of(row["devcopy"]["pass_s"])}),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
