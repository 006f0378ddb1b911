"""Render docs/benchmarks.md and its PNG plots from the committed data (docs/data/copy_*.json); also refits the
default cost model shipped as package data.

    python benchmarks/render_docs.py [--no-plots]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from devcopy_lib.bench.cost_model import DEFAULT_FILE, SMALL_COPY_BYTES, CostModel, copy_pricer, error_bands
from devcopy_lib.bench.harness import SweepResult
from devcopy_lib.bench.measurement import median_of
from devcopy_lib.bench.sizes import format_size
from devcopy_lib.bench.targets import evaluate, profiled_copies
from devcopy_lib.names import format_bytes

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
CUDA_DATA, SIM_DATA = DOCS / "data/copy_bandwidth.json", DOCS / "data/copy_simulated.json"
# CUDA runs never fitted, the out-of-sample check: a second call-overhead run, and planned copies of 4 KiB-256 MiB
CHECK_RUNS = (DOCS / "data/cost_model_check_cupy.json", DOCS / "data/cost_model_check_cupy_sizes.json")
MODEL_PATH = ROOT / "devcopy_lib/bench" / DEFAULT_FILE
TABLE_SIZES = [4 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20, 1 << 30]

# Why a target can miss, by the start of its name (shown only for missed rows).
WHY = {
    "4 KiB": "A 4 KiB copy is latency: the engine's direct path alone takes {engine_us:.1f} µs ({engine_ratio:.2f}x "
    "torch), and `DeviceAllocator`'s Python-side checks (index, bounds, host buffer, statistics) add "
    "{extra_us:.1f} µs; torch's checks run in C++.",
    "public pinned": "The public copy checks its arguments (live pointer, span, device index, host array), marks the "
    "buffer busy and counts the copy in Python: {gap_us:.1f} µs over the bare cudaMemcpyAsync + synchronize here.",
    "reused pageable": "A registered buffer's copy is one DMA like a pinned one (the cache's lookup costs about a "
    "microsecond per call); this run does not isolate the rest of the gap.",
    "simulated": "At 1 MiB the allocator's fixed per-call cost (validation in Python, see below) is still a "
    "visible share of a copy that takes NumPy tens of microseconds; the 2-core CI-class machine is "
    "noisy at this size too.",
}


def load(path: Path) -> SweepResult | None:
    return SweepResult.from_dict(json.loads(path.read_text())) if path.exists() else None


def _why(row: dict[str, Any], result: SweepResult) -> str:
    for prefix, text in WHY.items():
        if row["target"].startswith(prefix):
            engine = result.find("devcopy engine", row["direction"], row["memory"], row["bytes"], "wall")
            torch = result.find("torch copy_", row["direction"], row["memory"], row["bytes"], "wall")
            gap_us = (row["ours_s"] - row["base_s"]) * 1e6 if row["base_s"] else 0.0
            if engine and torch:
                return text.format(
                    engine_us=engine.median * 1e6,
                    engine_ratio=engine.median / torch.median,
                    extra_us=(row["ours_s"] - engine.median) * 1e6,
                    gap_us=gap_us,
                )
            return text.format(gap_us=gap_us) if "{gap_us" in text else text
    return "no explanation recorded"


def target_table(result: SweepResult) -> list[str]:
    lines = ["| target | size | clock | measured | goal | met |", "|---|---|---|---|---|---|"]
    misses = []
    for row in evaluate(result):
        unit = "GB/s" if "GB/s" in row["target"] else "x"
        sign = "<=" if "<=" in row["target"] else ">="
        lines.append(
            f"| {row['target']} | {format_size(row['bytes'])} | {row['clock']} | "
            f"{row['value']:.2f}{unit if unit == 'x' else ' GB/s'} | {sign} {row['goal']:g} | "
            f"{'yes' if row['met'] else '**no**'} |"
        )
        if not row["met"]:
            by = abs(row["value"] - row["goal"]) / row["goal"]
            misses.append(
                f"- **Missed**: {row['target']} at {format_size(row['bytes'])} ({row['clock']}): "
                f"{row['value']:.2f} against {row['goal']:g}, by {by:.0%}. {_why(row, result)}"
            )
    return lines + ([""] + misses if misses else ["", "Every target is met in this run."])


def bandwidth_table(result: SweepResult, clock: str = "wall") -> list[str]:
    keys = list(
        dict.fromkeys(
            (m.method, m.direction, m.memory) for m in result.measurements if m.clock == clock and m.direction != "both"
        )
    )
    lines = [
        "| method | dir | host memory | " + " | ".join(format_size(n) for n in TABLE_SIZES) + " |",
        "|---|---|---|" + "---:|" * len(TABLE_SIZES),
    ]
    for method, direction, memory in sorted(keys, key=lambda k: (k[1], k[2], k[0])):
        cells = [result.find(method, direction, memory, n, clock) for n in TABLE_SIZES]
        lines.append(
            f"| {method} | {direction} | {memory} | " + " | ".join(f"{m.gbps:.2f}" if m else "" for m in cells) + " |"
        )
    return lines


def latency_table(result: SweepResult, nbytes: int = 4096) -> list[str]:
    lines = ["| method | dir | host memory | events µs | wall µs |", "|---|---|---|---:|---:|"]
    keys = dict.fromkeys(
        (m.method, m.direction, m.memory) for m in result.measurements if m.nbytes == nbytes and m.direction != "both"
    )
    for method, direction, memory in sorted(keys, key=lambda k: (k[1], k[2], k[0])):
        cells = [result.find(method, direction, memory, nbytes, c) for c in ("events", "wall")]
        lines.append(
            f"| {method} | {direction} | {memory} | "
            + " | ".join(f"{m.median * 1e6:.1f}" if m else "" for m in cells)
            + " |"
        )
    return lines


def model_table(model: CostModel) -> list[str]:
    lines = [
        "| direction | host memory | sizes | latency µs | bandwidth GB/s | max abs residual | fitted sizes |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    small = format_bytes(SMALL_COPY_BYTES)
    rows = [(key, line, "all" if key not in model.small_lines else f">= {small}") for key, line in model.lines.items()]
    rows += [(key, line, f"< {small}") for key, line in model.small_lines.items()]
    for (direction, memory), line, sizes in sorted(rows, key=lambda row: (row[0], row[2])):
        worst = max((abs(r) for r in line.residuals), default=0.0)
        lines.append(
            f"| {direction} | {memory} | {sizes} | {line.latency_s * 1e6:.1f} | {line.bandwidth_gbps:.1f} | "
            f"{worst:.0%} | {len(line.sizes)} |"
        )
    return lines


def _per_call_cost(simulated: SweepResult) -> str:
    """The fixed cost per call, from the smallest copies, which is why small sizes are not a bandwidth target."""
    smallest = min(m.nbytes for m in simulated.measurements)
    ours = simulated.find("devcopy allocator", "h2d", "pageable", smallest, "wall")
    numpy = simulated.find("numpy copyto", "h2d", "pageable", smallest, "wall")
    assert ours is not None and numpy is not None, "a simulated sweep times both at its smallest size"
    return (
        f"Below 1 MiB the targets do not apply: a {format_size(smallest)} copy takes {ours.median * 1e6:.1f} µs "
        f"through the allocator against {numpy.median * 1e6:.2f} µs for `copyto` ({numpy.median / ours.median:.2f}x): "
        "the allocator validates every call (index, bounds, host buffer, statistics) in Python."
    )


def _call_overhead_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("call_overhead", Path(__file__).with_name("call_overhead.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_runs() -> list[dict[str, Any]]:
    """The committed CUDA runs the model is checked on and never fitted to."""
    return [json.loads(path.read_text()) for path in CHECK_RUNS if path.exists()]


def _same_gpu(run: dict[str, Any], model: CostModel) -> bool:
    """Whether `run` was measured on the GPU the model was (only those runs make its error bands)."""
    return str(model.source.get("device", "")) in run["meta"]["machine"]


def with_method_copies(model: CostModel) -> CostModel:
    """The sweep's model with its pinned lines refitted from the committed CUDA run's profiled method copies (the
    small-copy lines from those under 1 MiB), and the error bands the check runs show for it."""
    module = _call_overhead_module()
    cuda = next((run for run in module.load_runs() if not run["simulated"]), None)
    if cuda is None:
        return model
    refit = model.with_planned_copies(
        profiled_copies(cuda, smallest=0),
        {"file": "docs/data/call_overhead_cupy.json", "clock": "events", **cuda["meta"]},
    )
    runs = [run for run in check_runs() if _same_gpu(run, model)]
    copies = [c for run in runs for c in profiled_copies(run, smallest=0)]
    return refit.with_checks(error_bands(refit, copies, ", ".join(run["meta"]["date"] for run in runs)))


def call_overhead_section(model: CostModel) -> list[str]:
    """The "Call overhead" section, rendered by benchmarks/call_overhead.py from its committed runs, each copy priced
    by `model` (the one this page publishes)."""
    module = _call_overhead_module()
    runs = module.load_runs()
    return ["", *module.render_section(runs, model)] if runs else []


def _band(nbytes: int) -> str:
    """The size band a copy is checked in: below 4 KiB, 4-64 KiB, 64 KiB-1 MiB, or its own size from 1 MiB up."""
    if nbytes < 4 << 10:
        return "< 4 KiB"
    if nbytes < SMALL_COPY_BYTES:
        return "4 KiB - 64 KiB" if nbytes < 64 << 10 else "64 KiB - 1 MiB"
    return format_bytes(nbytes)


def out_of_sample_section(model: CostModel) -> list[str]:
    """The pinned lines' predictions against CUDA runs they were not fitted to (CHECK_RUNS), by size band:
    predicted / measured on CUDA events, and how many are within the 15% goal; then the error band each price
    quotes."""
    runs = check_runs()
    if not runs:
        return []
    out = [
        "### Out of sample",
        "",
        "The pinned lines checked against runs they were not fitted to; every profiled copy of a loaded method, "
        "predicted / measured on CUDA events. From 1 MiB up the goal is within 15%. Below 1 MiB a copy is mostly "
        "the driver's fixed cost, priced by the small-copy line (fitted to the fitted run's copies under 1 MiB).",
    ]
    for run in runs:
        bands: dict[str, list[float]] = {}
        pinned = [c for c in profiled_copies(run, smallest=0) if c["memory"] == "pinned"]
        for c in sorted(pinned, key=lambda c: c["bytes"]):
            direction = "h2d" if "_h2d_copy" in c["op"] else "d2h"
            ratio = model.predict(direction, c["bytes"], "pinned") / c["measured_s"]
            bands.setdefault(_band(c["bytes"]), []).append(ratio)
        meta = run["meta"]
        other = "" if _same_gpu(run, model) else " (not the model's GPU: left out of its error bands)"
        out += [
            "",
            f"`{meta['command']}` on {meta['machine']}, {meta['date']}{other}:",
            "",
            "| size band | copies | median predicted / measured | range | within 15% |",
            "|---|---:|---:|---:|---:|",
            *[
                f"| {band} | {len(ratios)} | {median_of(ratios):.2f} | {min(ratios):.2f}-{max(ratios):.2f} | "
                f"{sum(abs(r - 1) <= 0.15 for r in ratios)}/{len(ratios)} |"
                for band, ratios in bands.items()
            ],
        ]
    out += [
        "",
        "Every price of a pinned copy quotes the error of its size band over these runs (`CopyPrice.error`, the "
        "profile's predicted column, the basis line of `devcopy place` and `devcopy run --profile`):",
        "",
        *[f"- {band.text}" for band in model.checks],
        "",
    ]
    return out


def prices_section(model: CostModel) -> list[str]:
    """How every surface prices a copy (one function, one basis), with one 64 B H2D priced for each backend."""
    rows = [copy_pricer(backend, model=model).price("h2d", 64) for backend in ("simulated", "cupy")]
    return [
        "### Prices",
        "",
        "One function prices a copy everywhere: `copy_pricer(backend).price(direction, nbytes)` (or "
        "`price_copy(direction, nbytes, backend)`) in `devcopy_lib.bench.cost_model`. The placement report (and so "
        "the explorer's graph, table and totals, and `devcopy place`; [placement_pass.md](placement_pass.md)), "
        "`Method.profile` / `devcopy run "
        "--profile` and this page use it, and each says its basis: the backend the copy runs on, the host memory "
        "kind that backend gives a method's planned buffers (pinned where its allocator pins host memory: CuPy; "
        "pageable on the simulated backend), the clock of the model's line, and the machine it was measured on. "
        "A profile keeps its measured time and shows the price beside it, for the copy's own host memory. The basis "
        "is one record (`CopyPricer.basis()`: backend, memory, clock, measured_on) that the placement report, its "
        "HTML and JSON files (`provenance.pricing`), the explorer's export and the profile carry unchanged. The "
        "simulated backend has no device to time, so its prices are what each copy would cost on the machine the "
        "model was measured on (the record's `times_of`), and every surface says so rather than calling them the "
        "simulated backend's time. So one 64 B H2D costs:",
        "",
        "| backend | host memory | clock | predicted |",
        "|---|---|---|---:|",
        *[f"| {p.backend} | {p.memory} | {p.clock} | {p.text} |" for p in rows],
        "",
        "What one placement saves against another is worded once too (`PlacementReport.savings`, the CLI's "
        "comparison lines and the explorer): `devcopy place gpt2_2l` says `dedupe saves 1 H2D, 4 KiB against "
        "executorch`, and the device memory a strategy holds for it when it holds more. "
        "`tests/widgets/test_one_price.py` renders one placement through every surface and compares the prices, "
        "the basis and the words.",
    ]


GPU_CHECK = DOCS / "data/gpu_check.json"
# Why a target of the GPU check is missed, by a pattern its name matches (re.match): what the profile or data shows.
GPU_MISSES = {
    r"this card's model": "1 MiB and 2 MiB, the large-copy line's smallest sizes: the same copy's time differs by up "
    "to a fifth between two processes of this check (repeatability table below), a spread no model fitted on one "
    "process can be closer than",
    r"predicted/measured \(events\) _(h2d|d2h)_copy\.out 1 MiB": "the card's run-to-run spread at 1 MiB "
    "(repeatability below)",
    r"public pinned": "the public call's own checks (pointer span, device index, the host buffer's owner), busy mark "
    "and statistics cost a constant 2.3-3.0 µs of Python per call over the raw copy (torch's C++ `copy_` costs "
    "0.8-1.2 µs): 1.3x at 4 KiB, 1.1x at 1 MiB. A loaded method's copies take the planned path instead, checked once "
    "at load: 4 KiB there is 0.71x torch `copy_` (Call overhead)",
    r"transformer_block \(.*\) with graph replay <= 1\.3x": "see Where one call's time goes: the replayed graph "
    "itself holds the gap (the placement's delegate boundaries), not host work",
    r"resnet18 \(.*\) with graph replay <= 1\.3x": "as transformer_block: every delegate writes its outputs into "
    "planned memory, extra copies inside the graph that the one-graph module does not make",
}
CALL_PROFILE = DOCS / "data/call_profile.json"


def _measured(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def call_profile_section() -> list[str]:
    """The Where-one-call's-time-goes part: call_profile.py's split of a replayed call and its GPU work per call."""
    if not CALL_PROFILE.exists():
        return []
    data = json.loads(CALL_PROFILE.read_text())
    meta, times, host = data["meta"], data["median_us"], data["host_us"]
    kernels = {k: v for k, v in data["kernels"].items() if "error" not in v}
    return [
        "",
        "### Where one call's time goes",
        "",
        f"`{meta['command']}` on {meta['device']}, {meta['date']}: {data['model']}, a loaded method with graph replay "
        f"({data['graphs']} graph) against the module captured in one hand-written CUDA graph (pinned staging, one "
        "synchronize). Medians in µs; *replay only* launches the recorded graph(s) and waits, without the inputs "
        "and outputs around them.",
        "",
        "| | call | replay only | host work around it |",
        "|---|---:|---:|---:|",
        f"| devcopy | {times['devcopy call']:.1f} | {times['devcopy replays only']:.1f} | {host['devcopy']:.1f} |",
        f"| hand-written | {times['hand-written call']:.1f} | {times['hand-written replay only']:.1f} | "
        f"{host['hand-written']:.1f} |",
        "",
        "| GPU work per call | launches | GPU µs |",
        "|---|---:|---:|",
        *[f"| {name} | {v['launches_per_call']:.0f} | {v['device_us_per_call']:.1f} |" for name, v in kernels.items()],
        "",
        "devcopy's host work around the replay is lighter than the hand-written call's; the gap is inside the replay. "
        "ExecuTorch's placement splits the block into four delegates, and each delegate writes its outputs into "
        "their planned buffers (device-to-device copies, and strided copies for the q/k/v views of one split), "
        "while the input crosses once per delegate that reads it: the placed program launches more GPU operations "
        "than the module does, and a graph of more nodes replays slower. These copies are the price of the "
        "placement's boundaries, which devcopy reproduces; `dedupe` drops the second H2D (1.21x).",
    ]


def gpu_check_section() -> list[str]:
    """The "GPU check" section from docs/data/gpu_check.json (benchmarks/gpu_check.py, `make gpu-check`)."""
    if not GPU_CHECK.exists():
        return []
    data = json.loads(GPU_CHECK.read_text())
    meta, tests = data["meta"], data["tests"]
    out = [
        "",
        "## GPU check",
        "",
        f"`{meta['command']}` on **{meta['device']}**, {meta['date']}, torch {meta['torch']}, CuPy {meta['cupy']}: "
        f"{meta.get('wall_s', '?')} s in all. Data: [data/gpu_check.json](data/gpu_check.json).",
        "",
        *[
            f"Rerun: stage(s) {', '.join(r['stages'])} by `{r['command']}` on **{r['device']}**, {r['date']} "
            f"({r['wall_s']} s); their rows below are the rerun's."
            for r in meta.get("reruns", [])
        ],
        "",
        f"GPU-marked tests: {tests['passed']} passed, {tests['failed']} failed, {tests['skipped']} skipped.",
        *[f"- failed: `{name}`" for name in tests.get("failures", [])],
        *[f"- skipped ({count}): {reason}" for reason, count in tests.get("skip_reasons", {}).items()],
        "",
        "| stage | seconds | limit | ok |",
        "|---|---:|---:|---|",
        *[
            f"| {name} | {r['seconds']} | {r['limit_s']} | {'yes' if r['ok'] else 'no'}"
            f"{' (timed out)' if r['timed_out'] else ''} |"
            for name, r in data["stages"].items()
        ],
        "",
        "| target | measured | goal | met |",
        "|---|---:|---:|---|",
    ]
    for t in data["targets"]:
        why = next((text for pattern, text in GPU_MISSES.items() if re.match(pattern, t["name"])), "")
        met = "yes" if t["met"] else f"no: {why}" if why else "**no**"
        out.append(f"| {t['name']} | {_measured(t['measured'])} | {t['goal']} | {met} |")
    repeat = data.get("repeatability") or []
    if repeat:
        out += [
            "",
            "Repeatability: the same planned copy (the `add` model's inputs and output) profiled by two processes of "
            "this check, second / first:",
            "",
            "| copy | bytes | first µs | second µs | ratio |",
            "|---|---:|---:|---:|---:|",
            *[
                f"| {r['op']} | {format_bytes(r['bytes'])} | {r['first_us']:.1f} | {r['second_us']:.1f} | "
                f"{r['ratio']:.2f} |"
                for r in repeat
            ],
        ]
    out += call_profile_section()
    other = data.get("shipped_model_on_another_card")
    if other:
        ratios = [r["measured"] for r in other["rows"]]
        out += [
            "",
            f"The shipped cost model was fitted on {other['fitted_on']}; on this card its predicted / measured runs "
            f"{min(ratios):.2f}-{max(ratios):.2f} ({len(ratios)} copies from 1 MiB up), kept out of the targets.",
        ]
    return out


def render_markdown(result: SweepResult, simulated: SweepResult | None, model: CostModel) -> str:
    """The whole page, deterministic in its inputs."""
    meta, versions = result.meta, result.meta.get("versions", {})
    out = [
        "# Copy benchmarks",
        "",
        "<!-- generated by benchmarks/render_docs.py from docs/data/copy_*.json; edit those scripts, not this -->",
        "",
        f"Measured on **{result.device}** ({meta.get('gpu', '')}), {meta.get('date', '')}, machine "
        f"{meta.get('machine', '')}; " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".",
        f"Command: `{meta.get('command', '')}` ({meta.get('sweep_seconds', '?')} s). Raw samples: "
        "[data/copy_bandwidth.json](data/copy_bandwidth.json); pipeline tuning: "
        "[data/copy_engine_tuning.json](data/copy_engine_tuning.json).",
        "",
        "Two clocks: **events** (CUDA events on the stream: device time) and **wall** (host clock around the call "
        "with a device synchronize before and after: what a caller sees). Each number is a median of 5 to 30 "
        "samples after 2 warm-ups; GB/s = bytes moved / median (10^9 bytes per second; `both` counts both "
        "directions). `devcopy engine` is `CopyEngine` on raw addresses; `devcopy allocator` is the full "
        "`CupyCudaAllocator.copy_host_to_device` / `copy_device_to_host` path that the et_copy kernels call. "
        "Host memory `reused pageable` is the same pageable NumPy buffers copied again and again through the "
        "allocator, which registers them in place (cudaHostRegister) on their second copy "
        "(`EngineConfig.register_reused`, devices/host_registration.py); `pageable` rows are the unregistered path. "
        "`cudaMemcpyAsync + sync` is the bare call the allocator's synchronous pinned copy makes. "
        "Ratios compare devcopy with a baseline from the same run on the same clock.",
        "",
        "## Targets",
        "",
        *target_table(result),
        "",
        "## Bandwidth (GB/s, wall clock)",
        "",
        *bandwidth_table(result),
        "",
        "![bandwidth, wall clock](copy_bandwidth_wall.png)",
        "",
        "![bandwidth, events](copy_bandwidth_events.png)",
        "",
        "## Small copies (4 KiB)",
        "",
        *latency_table(result),
        "",
        "![small-copy latency](copy_latency.png)",
        "",
        "## Cost model",
        "",
        f"`devcopy_lib.bench.cost_model.predict(direction, nbytes, memory)` = latency + bytes / bandwidth, fitted "
        f"(least squares on relative error) to the medians of `{model.source.get('method')}` on the "
        f"{model.source.get('clock')} clock above, the pinned lines refitted from a loaded method's own planned "
        "copies on CUDA events (see Call overhead: their checks ran once, at load), one line from 1 MiB up and a "
        "small-copy line below it, whose latency is the driver's fixed cost per copy. Pageable lines fit worst: up "
        "to 16 MiB copies take the driver's own staging (about 10-14 GB/s), above it the staging pipeline (about "
        "30-45 GB/s).",
        "",
        *model_table(model),
        "",
        *out_of_sample_section(model),
        *prices_section(model),
    ]
    if simulated is not None:
        out += [
            "",
            "## Simulated backend (CPU, wall clock only)",
            "",
            f"Measured on {simulated.meta.get('machine', 'the CI-class CPU')}, {simulated.meta.get('date', '')}: "
            "devcopy's simulated allocator against NumPy's `copyto` of the same bytes.",
            "",
            *target_table(simulated),
            "",
            _per_call_cost(simulated),
        ]
    out += call_overhead_section(model)
    out += gpu_check_section()
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-plots", action="store_true")
    args = parser.parse_args(argv)
    result, simulated = load(CUDA_DATA), load(SIM_DATA)
    if result is None:
        print(f"{CUDA_DATA} is missing: run benchmarks/copy_bandwidth.py on the CUDA machine first", file=sys.stderr)
        return 1
    model = with_method_copies(CostModel.fit(result))
    model.save(str(MODEL_PATH))
    (DOCS / "benchmarks.md").write_text(render_markdown(result, simulated, model))
    if not args.no_plots:
        from devcopy_lib.bench.plots import plot_bandwidth, plot_latency

        plot_bandwidth(result, str(DOCS / "copy_bandwidth_wall.png"), "wall")
        plot_bandwidth(result, str(DOCS / "copy_bandwidth_events.png"), "events")
        plot_latency(result, str(DOCS / "copy_latency.png"))
    print(f"wrote {DOCS / 'benchmarks.md'}, plots and {MODEL_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
