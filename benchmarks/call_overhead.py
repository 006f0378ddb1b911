"""Per-call cost of a loaded Method against eager PyTorch, per-instruction overhead, 4 KiB copies through the
resolved et_copy kernel, and the cost model's predicted vs measured copy times; writes
docs/data/call_overhead_<backend>.json and prints every target (`bench.targets.call_overhead_targets`) as a ratio.
Timing is `bench.harness.interleaved`; the "eager placed" reference is `devcopy_lib.eager_program` (the same
placement run by torch eager). benchmarks/render_docs.py renders the "Call overhead" section of docs/benchmarks.md.

    python benchmarks/call_overhead.py                       # simulated backend (this machine)
    python benchmarks/call_overhead.py --backend cupy        # on the CUDA machine
    python benchmarks/call_overhead.py --backend cupy --copies-only --copy-sizes 4K..256M --out check.json
                                                             # planned copies only: a run to check the cost model on
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import platform
import sys
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

from devcopy_lib import (
    DeviceAllocator,
    aten_lib,
    eager_program,
    emit,
    export_and_lower,
    load_method,
    make_allocator,
    models,
    place_devices,
    scoped_allocators,
)
from devcopy_lib.bench.clocks import WallClock
from devcopy_lib.bench.cost_model import default_model
from devcopy_lib.bench.harness import interleaved, timed
from devcopy_lib.bench.measurement import mean_of, median_of
from devcopy_lib.bench.sizes import parse_sizes
from devcopy_lib.bench.targets import call_overhead_targets, profiled_copies
from devcopy_lib.ops.schema import ET_COPY_OPS_YAML

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs/data"
MiB = 1 << 20
SECTION = "## Call overhead"


class _Mlp(nn.Module):
    """Linear-ReLU-Linear of `width`: everything delegated (the H200 per-call target's model)."""

    def __init__(self, width: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x: Any) -> Any:
        return self.fc2(torch.relu(self.fc1(x)))


def _mlp(width: int) -> Any:
    torch.manual_seed(0)
    return _Mlp(width), (torch.randn(width, width),)


def model_cases() -> dict[str, Any]:
    """name -> factory: the sample models, the two MLPs, and the real models when devcopy_lib.models has them."""
    cases = dict(models.MODELS)
    cases.update({"mlp16x16": lambda: _mlp(16), "mlp256x256": lambda: _mlp(256)})
    for name in ("gpt2_2l", "resnet18", "llama_tiny"):
        factory = getattr(models, name, None) or getattr(models, "MODELS", {}).get(name)
        if factory is not None:
            cases[name] = factory
    return cases


def module_eager(module: Any, cuda: bool) -> Any:
    """Eager PyTorch on the module itself: on CUDA moving inputs with .cuda() and outputs with .cpu()."""
    if not cuda:
        return lambda *xs: module(*xs)
    moved = copy.deepcopy(
        module
    ).cuda()  # a copy: .cuda() moves parameters in place, and the lowered program shares them
    return lambda *xs: [t.cpu() for t in pytree.tree_leaves(moved(*(x.cuda() for x in xs)))]


class GraphedModule:
    """A call of the module captured in one CUDA graph, and that graph (its replay alone, for
    benchmarks/call_profile.py)."""

    def __init__(self, call: Callable[..., list[torch.Tensor]], graph: torch.cuda.CUDAGraph) -> None:
        self.call, self.graph = call, graph

    def __call__(self, *xs: Any) -> list[torch.Tensor]:
        return self.call(*xs)


def module_graphed(module: Any, inputs: Any) -> GraphedModule:
    """The best hand-written PyTorch for one call from CPU tensors: the module captured in one CUDA graph, inputs
    staged through pinned buffers into its static inputs, outputs back through pinned buffers, one synchronize."""
    moved = copy.deepcopy(module).cuda()
    pinned_in = [torch.empty_like(x).pin_memory() for x in inputs]
    static_in = [x.cuda() for x in inputs]
    stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]  # torch leaves Stream.__new__ unannotated
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up off the default stream, as torch.cuda.graphs advises
        for _ in range(3):
            moved(*static_in)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = pytree.tree_leaves(moved(*static_in))
    pinned_out = [torch.empty(o.shape, dtype=o.dtype).pin_memory() for o in static_out]

    def call(*xs: Any) -> list[torch.Tensor]:
        for pinned, x in zip(pinned_in, xs, strict=True):
            pinned.copy_(x)
        for static, pinned in zip(static_in, pinned_in, strict=True):
            static.copy_(pinned, non_blocking=True)
        graph.replay()
        for pinned, out in zip(pinned_out, static_out, strict=True):
            pinned.copy_(out, non_blocking=True)
        torch.cuda.synchronize()
        return [pinned.clone() for pinned in pinned_out]

    return GraphedModule(call, graph)


# ---- measurements ---------------------------------------------------------------------------------------------
def _fastest_per_call(
    fns: Mapping[str, Callable[[], object]], rounds: int, calls: int, clock: WallClock
) -> dict[str, float]:
    """The fastest round's time per call of each function, rounds interleaved (`bench.harness.interleaved`): on a
    shared machine other processes only ever add time, so the fastest round is the closest to the code's own cost."""
    return {name: t.fastest for name, t in interleaved(fns, rounds, calls, clock).items()}


def measure_models(allocator: DeviceAllocator, rounds: int, names: list[str]) -> list[dict[str, Any]]:
    """Each model's Method call (graph replay where the backend has graphs, and the same program uncaptured)
    against eager PyTorch, in interleaved rounds."""
    cuda, graphs = allocator.capabilities.real_device, allocator.capabilities.graphs
    clock = WallClock(allocator.synchronize)
    rows, cases = [], model_cases()
    for name in names:
        try:
            module, inputs = cases[name]()
        except Exception as exc:  # a real model without its extra (transformers, torchvision) installed
            print(f"{name:20s} skipped: {type(exc).__name__}: {exc}"[:200], flush=True)
            continue
        module.eval()
        lowered = export_and_lower(module, inputs)
        strategies = ["executorch", "dedupe"] if name == "transformer_block" else ["executorch"]
        for strategy in strategies:
            program = emit(place_devices(lowered, strategy))
            reference = {"eager module": module_eager(module, cuda)}
            if graphs:
                try:
                    reference["cuda graph module"] = module_graphed(module, inputs)
                except Exception as exc:  # a module CUDA graphs cannot record: reported, the row goes on
                    print(f"{name}: the hand-written CUDA graph failed: {type(exc).__name__}: {exc}"[:300], flush=True)
            try:
                placed = eager_program(program, "cuda" if cuda else "cpu")
                placed(*inputs)
                reference["eager placed"] = placed
            except Exception as exc:  # reported, not fatal: the module-eager reference still stands
                print(f"{name}: the placed-eager reference failed: {type(exc).__name__}: {exc}"[:300], flush=True)
            for mode in ("portable", "aten"):
                libs = None if mode == "portable" else aten_lib(custom_ops=[ET_COPY_OPS_YAML])
                with (
                    torch.no_grad(),
                    load_method(program, mode, libs) as method,
                    load_method(program, mode, libs, capture=False) as plain,
                ):
                    method(*inputs)  # the first call is the warm-up after which the graphs are recorded
                    once = timed(partial(method, *inputs))[1]
                    calls = max(1, min(100, int(2e-3 / max(once, 1e-7))))
                    fns = {"devcopy": partial(method, *inputs)}
                    if graphs:  # the same program uncaptured, timed in the same rounds
                        fns["devcopy uncaptured"] = partial(plain, *inputs)
                    fns.update({label: partial(fn, *inputs) for label, fn in reference.items()})
                    times = _fastest_per_call(fns, rounds, calls, clock)
                    profile = method.profile(*inputs, repeat=max(3, rounds), cost_model=default_model())
                    capture = _capture_fields(method.capture)
                n = len(program.instructions)
                rows.append(
                    {
                        "model": name,
                        "strategy": strategy,
                        "mode": mode,
                        "instructions": n,
                        "call_s": times["devcopy"],
                        "eager_module_s": times["eager module"],
                        "eager_placed_s": times.get("eager placed"),
                        "call_uncaptured_s": times.get("devcopy uncaptured"),
                        "cuda_graph_module_s": times.get("cuda graph module"),
                        "capture": capture,
                        "per_instruction_s": times["devcopy"] / n,
                        "by_kind_s": _by_kind(profile),
                        "copies": [r for r in profile if r["kind"] == "copy"],
                    }
                )
                print(
                    f"{name:20s} {strategy:10s} {mode:8s} {n:3d} ins  {capture['graphs']} graph(s)  "
                    + (
                        f"uncaptured {times['devcopy uncaptured'] * 1e6:9.1f} us "
                        f"({times['devcopy uncaptured'] / times['eager module']:.2f}x)  "
                        if graphs
                        else ""
                    )
                    + f"call {times['devcopy'] * 1e6:9.1f} us  "
                    f"eager {times['eager module'] * 1e6:9.1f} us ({times['devcopy'] / times['eager module']:.2f}x)"
                    + (
                        f"  CUDA graph {times['cuda graph module'] * 1e6:9.1f} us "
                        f"({times['devcopy'] / times['cuda graph module']:.2f}x)"
                        if "cuda graph module" in times
                        else ""
                    )
                    + (
                        f"  placed eager {times['eager placed'] * 1e6:9.1f} us "
                        f"({times['devcopy'] / times['eager placed']:.2f}x)"
                        if "eager placed" in times
                        else ""
                    ),
                    flush=True,
                )
    return rows


def _capture_fields(summary: dict[str, Any]) -> dict[str, Any]:
    """What a row keeps of `Method.capture`: the graphs, the steps they cover, and why the others run uncaptured."""
    return {
        "graphs": summary["graphs"],
        "captured_steps": summary["captured_steps"],
        "steps": summary["steps"],
        "uncaptured": sorted({f["reason"] for f in summary["fallbacks"]}),
    }


def _by_kind(profile: list[dict[str, Any]]) -> dict[str, Any]:
    kinds: dict[str, list[float]] = {}
    for row in profile:
        kinds.setdefault(row["kind"], []).append(row["wall_s"])
    return {kind: {"count": len(v), "mean_s": mean_of(v)} for kind, v in kinds.items()}


def _torch_copy(dst: torch.Tensor, src: torch.Tensor, synchronize: Callable[[], None]) -> None:
    dst.copy_(src)
    synchronize()


def measure_small_copies(allocator: DeviceAllocator, rounds: int) -> list[dict[str, Any]]:
    """4 KiB H2D and D2H: the resolved et_copy kernel as a loaded method runs it (its prepared plan step) against
    torch `copy_` between pinned host and device memory plus a synchronize, both timed in the same rounds."""
    cuda = allocator.capabilities.real_device
    module, _ = models.add()
    inputs = (torch.randn(32, 32), torch.randn(32, 32))  # 4 KiB each
    program = emit(place_devices(export_and_lower(module, inputs)))
    rows = []
    with load_method(program) as method:
        method(*inputs)
        steps = {s.direction: s for s in method.steps if s.kind == "copy" and s.moved == 4096}
        host = torch.empty(1024, pin_memory=cuda)
        device = torch.empty(1024, device="cuda" if cuda else "cpu")
        baselines = {
            "h2d": partial(_torch_copy, device, host, allocator.synchronize),
            "d2h": partial(_torch_copy, host, device, allocator.synchronize),
        }
        for direction, baseline in baselines.items():
            times = _fastest_per_call({"et_copy": steps[direction].run, "torch": baseline}, rounds, 50, WallClock())
            rows.append(
                {
                    "direction": direction,
                    "bytes": 4096,
                    "et_copy_s": times["et_copy"],
                    "torch_copy_s": times["torch"],
                    "ratio": times["et_copy"] / times["torch"],
                }
            )
            print(
                f"4 KiB {direction}: et_copy {times['et_copy'] * 1e6:.2f} us, torch copy_ "
                f"{times['torch'] * 1e6:.2f} us ({rows[-1]['ratio']:.2f}x)",
                flush=True,
            )
    return rows


def measure_copy_sizes(repeat: int, sizes: Any = (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)) -> list[dict[str, Any]]:
    """Planned copies of `sizes` bytes (the `add` model at those input sizes: two H2D and a D2H each), profiled
    against the default model."""
    rows = []
    for nbytes in sizes:
        module, _ = models.add()
        inputs = (torch.randn(nbytes // 4), torch.randn(nbytes // 4))
        with load_method(place_devices(export_and_lower(module, inputs))) as method:
            for row in method.profile(*inputs, repeat=repeat, cost_model=default_model()):
                if row["kind"] == "copy":
                    rows.append(
                        {
                            key: row[key]
                            for key in (
                                "index",
                                "op",
                                "bytes",
                                "measured_s",
                                "predicted_s",
                                "clock",
                                "memory",
                                "wall_s",
                                "device_s",
                            )
                        }
                    )
    return rows


# ---- targets (bench.targets.call_overhead_targets) ----------------------------------------------------------------
def repriced(data: dict[str, Any], model: Any) -> dict[str, Any]:
    """`data` with every profiled copy priced by `model` and the targets evaluated again: the page shows the
    model it publishes, not the one the run happened to have."""
    direction = {"et_copy::_h2d_copy.out": "h2d", "et_copy::_d2h_copy.out": "d2h"}
    for c in profiled_copies(data):
        if c["op"] in direction:
            c["predicted_s"] = model.predict(direction[c["op"]], c["bytes"], c["memory"])
    return {**data, "targets": call_overhead_targets(data)}


def render_section(runs: list[dict[str, Any]], model: Any) -> list[str]:
    """The "Call overhead" section of docs/benchmarks.md from the committed call_overhead_*.json runs, copies priced
    by `model`."""
    lines = [SECTION, ""]
    for data in (repriced(run, model) for run in runs):
        meta = data["meta"]
        lines += [
            f"### {data['backend']} backend",
            "",
            f"Measured on {meta['machine']}, {meta['date']} (load average {meta.get('load_average')}, "
            f"{meta.get('threads')} torch thread(s)); command `{meta['command']}`. Times are the fastest of "
            "interleaved rounds (devcopy and its eager references alternate, so a loaded machine slows all "
            "alike). *call*: a `Method` call as loaded by default (graph replay of the device work where the "
            "backend has CUDA graphs, runtime/capture.py); *uncaptured*: the same program loaded with "
            "`capture=False`, timed in the same rounds. *eager module*: the PyTorch module itself"
            + (" on CUDA (inputs `.cuda()`, outputs `.cpu()`)" if not data["simulated"] else " on CPU")
            + "; *eager placed*: the same placement run by torch eager (CPU ops on CPU tensors, delegates on "
            "device tensors, copies as `copy_`).",
            "",
            "| model | strategy | mode | instructions | graphs (steps) | call µs | µs / instruction | "
            "eager module µs | x | uncaptured µs | x | eager placed µs | x |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in data["models"]:
            capture = r.get("capture")
            uncaptured = r.get("call_uncaptured_s")
            lines.append(
                f"| {r['model']} | {r['strategy']} | {r['mode']} | {r['instructions']} | "
                + (f"{capture['graphs']} ({capture['captured_steps']}/{capture['steps']}) | " if capture else " | ")
                + f"{r['call_s'] * 1e6:.1f} | {r['per_instruction_s'] * 1e6:.1f} | "
                f"{r['eager_module_s'] * 1e6:.1f} | {r['call_s'] / r['eager_module_s']:.2f} | "
                + (f"{uncaptured * 1e6:.1f} | {uncaptured / r['eager_module_s']:.2f} | " if uncaptured else " |  | ")
                + (
                    f"{r['eager_placed_s'] * 1e6:.1f} | {r['call_s'] / r['eager_placed_s']:.2f} |"
                    if r["eager_placed_s"]
                    else "failed |  |"
                )
            )
        reasons = sorted({why for r in data["models"] for why in (r.get("capture") or {}).get("uncaptured", [])})
        if reasons:
            lines += ["", "Steps run uncaptured, and why: " + "; ".join(reasons) + "."]
        kinds: dict[str, list[float]] = {}
        for r in data["models"]:
            for kind, v in r["by_kind_s"].items():
                kinds.setdefault(kind, []).append(v["mean_s"])
        lines += [
            "",
            "Mean time of one instruction, by kind, over every model above (`Method.profile`): "
            + ", ".join(f"{k} {median_of(v) * 1e6:.1f} µs" for k, v in sorted(kinds.items()))
            + ".",
            "",
        ]
        if data.get("small_copies"):
            lines += ["| 4 KiB copy | through et_copy µs | torch copy_ + sync µs | x |", "|---|---:|---:|---:|"]
            lines += [
                f"| {r['direction']} | {r['et_copy_s'] * 1e6:.2f} | {r['torch_copy_s'] * 1e6:.2f} | {r['ratio']:.2f} |"
                for r in data["small_copies"]
            ]
            lines.append("")
        if data.get("copy_sizes"):
            lines += [
                "Planned copies (a loaded method's steps, `Method.profile`) against the published cost model, "
                "whose pinned lines are fitted on these copies' CUDA-event times (in sample until the next "
                "H200 run measures them again):",
                "",
                "| copy | bytes | host memory | wall µs | events µs | predicted µs | predicted / measured |",
                "|---|---:|---|---:|---:|---:|---:|",
            ]
            lines += [
                f"| {c['op'].split('::')[-1]} | {c['bytes'] >> 20} MiB | {c['memory']} | "
                f"{c['wall_s'] * 1e6:.1f} | "
                + (f"{c['device_s'] * 1e6:.1f}" if c["device_s"] else "")
                + f" | {c['predicted_s'] * 1e6:.1f} | {c['predicted_s'] / c['measured_s']:.2f} |"
                for c in data["copy_sizes"]
            ]
            lines.append("")
        lines += ["| target | value | goal | met |", "|---|---:|---|---|"]
        lines += [
            f"| {t['target']} | {t['value']:.2f} | {'±' if 'within' in t['target'] else '<= '}{t['goal']:g} | "
            f"{'yes' if t['met'] else '**no**'} |"
            for t in data["targets"]
        ]
        if data["simulated"]:
            lines += [
                "",
                "On the simulated backend the H200 cost model's predictions are not expected to match "
                "(host memcpy stands in for DMA), so no prediction target is evaluated there.",
            ]
        lines.append("")
    return lines


def load_runs() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(DATA.glob("call_overhead_*.json"))]


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="simulated", choices=["simulated", "cupy"])
    parser.add_argument("--rounds", type=int, default=30, help="interleaved timing rounds (default 30)")
    parser.add_argument("--models", default=None, help="comma list (default: every sample, MLP and real model)")
    parser.add_argument("--out", default=None, help="default docs/data/call_overhead_<backend>.json")
    parser.add_argument(
        "--copy-sizes",
        type=parse_sizes,
        default=None,
        help="the planned-copy sizes to profile on a real device, e.g. 4K..256M (default 1M,4M,16M,64M)",
    )
    parser.add_argument(
        "--copies-only",
        action="store_true",
        help="profile only the planned copies (no models, no small-copy race): a run to check the cost model on",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads for devcopy and eager alike (default 1: these models are tiny, "
        "and spinning worker threads on a shared machine time the machine, not the runtime)",
    )
    args = parser.parse_args(argv)
    torch.set_grad_enabled(False)
    torch.set_num_threads(args.threads)
    names = [] if args.copies_only else args.models.split(",") if args.models else list(model_cases())
    allocator = make_allocator(args.backend)
    real = allocator.capabilities.real_device
    with scoped_allocators(allocator):
        data = {"backend": args.backend, "simulated": not real, "models": measure_models(allocator, args.rounds, names)}
        if real:  # pinned 4 KiB copies and the cost model's H200 prices mean something on a real device only
            if not args.copies_only:
                data["small_copies"] = measure_small_copies(allocator, args.rounds)
            sizes = args.copy_sizes or (1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB)
            data["copy_sizes"] = measure_copy_sizes(max(5, args.rounds), sizes)
    data["meta"] = {
        "machine": f"{platform.node()} ({platform.machine()}, {_cpus()} CPUs)"
        + (f", {torch.cuda.get_device_name()}" if real else ""),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python " + " ".join(["benchmarks/call_overhead.py", *(argv or sys.argv[1:])]),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    data["targets"] = call_overhead_targets(data)
    print("\nTargets (value against goal):")
    for t in data["targets"]:
        print(f"  {'met ' if t['met'] else 'MISS'} {t['target']}: {t['value']:.3f} (goal {t['goal']:g})")
    out = Path(args.out or DATA / f"call_overhead_{args.backend}.json")
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out}; render docs/benchmarks.md with python benchmarks/render_docs.py")
    return 0


def _cpus() -> int:
    return os.cpu_count() or 0


if __name__ == "__main__":
    sys.exit(main())
