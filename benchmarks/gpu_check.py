"""Everything that needs CUDA, in one command: every GPU-marked test, `.pte` files with weights on CuPy, the call
overhead with and without graph replay beside eager and a hand-written CUDA graph, the copy sweep (small public
copies, reused pageable buffers), the cost model's out-of-sample check and a Llama-shaped decode step per token. Each
stage runs as its own process under its own time limit; the summary goes to docs/data/gpu_check.json and
benchmarks/render_docs.py publishes it.

    make gpu-wheels      # on a networked machine: the wheels the CUDA machine lacks, into .whl/
    make gpu-check       # on the CUDA machine (no network): installs them from .whl/, then runs this script
    python benchmarks/gpu_check.py [--out docs/data/gpu_check.json] [--work build/gpu-check] [--only tests,pte]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcopy_lib.names import MODES  # torch-free: the supervisor stays light

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data"
PTE_MODELS = ("mlp", "transformer_block")
CALL_MODELS = "mlp16x16,transformer_block,gpt2_2l,resnet18,llama_tiny"
SWEEP_SIZES = "4K,64K,1M,16M,64M,256M,1G"
CHECK_SIZES = "4K..256M"
DECODE_STEP_DATA = DATA / "decode_step_cupy.json"  # the decode step's own file, published beside the check


Command = tuple[list[str], Path | None]  # argv, and the file its standard output goes to (None: the stage's log)


@dataclass
class Stage:
    """One part of the check: a command run under `limit_s` seconds, then read by `collect`."""

    name: str
    limit_s: int
    run: Callable[[Path], list[Command]]  # the commands, given the work folder
    collect: Callable[[Path, list[dict[str, Any]]], dict[str, Any]] = field(default=lambda work, runs: {})


def _python(*args: str) -> list[str]:
    return [sys.executable, *args]


def _run(command: Command, limit_s: float, log: Path) -> dict[str, Any]:
    """`command` with its output appended to `log` (its standard output to its own file when it names one); its
    exit code, or `timed_out` once `limit_s` passed."""
    argv, stdout = command
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        try:
            with stdout.open("w") if stdout is not None else contextlib.nullcontext(out) as target:
                rc = subprocess.run(argv, stdout=target, stderr=out, timeout=limit_s, cwd=ROOT).returncode
            timed_out = False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
    return {"command": " ".join(argv), "rc": rc, "timed_out": timed_out, "seconds": time.perf_counter() - start}


# ---- the stages -----------------------------------------------------------------------------------------------
def _tests(work: Path) -> list[Command]:
    return [
        (_python(
            "-m", "pytest", "-p", "no:nbval", "-p", "no:cacheprovider", "-m", "gpu", "tests", "-q", "-rfE",
            "--durations=20", "--timeout", "120", "--junitxml", str(work / "tests.xml"),
        ), None)
    ]  # fmt: skip


def _test_counts(work: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """passed / failed / skipped from pytest's JUnit XML, the failed tests by name and the skip reasons."""
    path = work / "tests.xml"
    if not path.exists():
        return {"passed": 0, "failed": 1, "skipped": 0, "failures": ["pytest wrote no report (see the log)"]}
    failures: list[str] = []
    skips: dict[str, int] = {}
    total = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        total += 1
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            failures.append(name)
        skipped = case.find("skipped")
        if skipped is not None:
            reason = skipped.get("message", "")
            skips[reason] = skips.get(reason, 0) + 1
    skipped_n = sum(skips.values())
    return {
        "passed": total - len(failures) - skipped_n,
        "failed": len(failures),
        "skipped": skipped_n,
        "failures": failures,
        "skip_reasons": skips,
    }


def _pte(work: Path) -> list[Command]:
    commands: list[Command] = []
    for model in PTE_MODELS:
        path = work / f"{model}.pte"
        commands.append((_python("-m", "devcopy_lib", "place", model, "--save-pte", str(path)), None))
        for mode in MODES:
            run = _python("-m", "devcopy_lib", "run", str(path), "--backend", "cupy", "--mode", mode, "--json")
            commands.append((run, work / f"{model}.{mode}.json"))
    return commands


def _pte_results(work: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for model in PTE_MODELS:
        for mode in MODES:
            path = work / f"{model}.{mode}.json"
            try:
                result = json.loads(path.read_text())
            except (OSError, ValueError):  # not run, cut off by the stage's limit, or failed before its JSON
                result = {"ok": False, "error": "no result: see the stage's log"}
            rows.append(
                {
                    "model": model,
                    "mode": mode,
                    "ok": bool(result.get("ok")),
                    "max_abs_err": result.get("max_abs_err"),
                    "backend": result.get("backend"),
                    "error": result.get("error"),
                }
            )
    return {"runs": rows}


def _call_overhead(work: Path) -> list[Command]:
    out = str(work / "call_overhead_cupy.json")
    argv = _python("benchmarks/call_overhead.py", "--backend", "cupy", "--rounds", "7", "--models", CALL_MODELS)
    return [([*argv, "--out", out], None)]


def _copies(work: Path) -> list[Command]:
    out = str(work / "copy_bandwidth.json")
    return [(_python("benchmarks/copy_bandwidth.py", "--sizes", SWEEP_SIZES, "--out", out), None)]


def _cost_check(work: Path) -> list[Command]:
    out = str(work / "cost_check.json")
    argv = _python("benchmarks/call_overhead.py", "--backend", "cupy", "--copies-only", "--copy-sizes", CHECK_SIZES)
    return [([*argv, "--rounds", "9", "--out", out], None)]


def _cost_model_check(work: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The cost model built on this card the way the shipped one was built on its own (the copy sweep's lines, the
    pinned ones refitted from the call-overhead run's method copies), checked against the planned copies of the
    cost-model stage, which it never saw: predicted / measured within 15% from 1 MiB up. The shipped model's
    predictions count only on the card it was fitted on; elsewhere they are kept as information."""
    from devcopy_lib.bench.cost_model import CostModel, default_model
    from devcopy_lib.bench.harness import SweepResult
    from devcopy_lib.bench.targets import profiled_copies

    paths = {name: work / f"{name}.json" for name in ("copy_bandwidth", "call_overhead_cupy", "cost_check")}
    if not all(path.exists() for path in paths.values()):
        return {"targets": [], "note": f"missing {[str(p) for p in paths.values() if not p.exists()]}"}
    sweep, fitted_on, check = (json.loads(path.read_text()) for path in paths.values())
    card = CostModel.fit(SweepResult.from_dict(sweep)).with_planned_copies(
        profiled_copies(fitted_on, smallest=0), {"file": paths["call_overhead_cupy"].name, "clock": "events"}
    )
    shipped = default_model()
    same_card = str(shipped.source.get("device", "?")) in str(check["meta"].get("machine", ""))
    targets: list[dict[str, Any]] = []
    other_card: list[dict[str, Any]] = []
    for copy in profiled_copies(check):
        direction = "h2d" if "_h2d_copy" in copy["op"] else "d2h"
        label = f"{direction} {copy['bytes'] >> 20} MiB ({copy['memory']}, {copy['clock']})"
        for model, name, rows in ((card, "this card's model", targets), (shipped, "shipped model", other_card)):
            ratio = model.predict(direction, copy["bytes"], copy["memory"]) / copy["measured_s"]
            rows.append(
                {
                    "name": f"{name}: predicted/measured {label} within 15%",
                    "measured": ratio,
                    "goal": 0.15,
                    "met": abs(ratio - 1) <= 0.15,
                }
            )
    result: dict[str, Any] = {"targets": targets + other_card if same_card else targets}
    if not same_card:
        result["shipped_model_on_another_card"] = {"fitted_on": shipped.source.get("device"), "rows": other_card}
    result["repeatability"] = _repeatability(fitted_on, check)
    return result


def _repeatability(first: dict[str, Any], second: dict[str, Any]) -> list[dict[str, Any]]:
    """The same planned copy measured by two processes of one check (the call-overhead stage's size sweep and the
    cost-model stage's): how far apart the card itself is from run to run, the floor under any model's error."""

    from devcopy_lib.bench.measurement import median_of

    def medians(data: dict[str, Any]) -> dict[tuple[str, int], float]:
        times: dict[tuple[str, int], list[float]] = {}
        for copy in data.get("copy_sizes", []):
            times.setdefault((copy["op"].split("::")[-1], copy["bytes"]), []).append(copy["measured_s"])
        return {key: median_of(v) for key, v in times.items()}

    a, b = medians(first), medians(second)
    return [
        {
            "op": op,
            "bytes": n,
            "first_us": a[(op, n)] * 1e6,
            "second_us": b[(op, n)] * 1e6,
            "ratio": b[(op, n)] / a[(op, n)],
        }
        for op, n in sorted(a.keys() & b.keys(), key=lambda k: (k[0], k[1]))
    ]


def _call_profile(work: Path) -> list[Command]:
    return [(_python("benchmarks/call_profile.py", "--out", str(work / "call_profile.json")), None)]


def _targets_of(name: str) -> Callable[[Path, list[dict[str, Any]]], dict[str, Any]]:
    """The targets a benchmark wrote into its own JSON (`targets`), each as name / measured / goal / met."""

    def collect(work: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
        path = work / name
        if not path.exists():
            return {"targets": []}
        data = json.loads(path.read_text())
        rows = data.get("targets")
        if rows is None:  # the copy sweep: its targets are evaluated from the samples
            from devcopy_lib.bench.harness import SweepResult
            from devcopy_lib.bench.targets import evaluate

            rows = evaluate(SweepResult.from_dict(data))
        return {"targets": [_target(row) for row in rows], "data": name}

    return collect


def _target(row: dict[str, Any]) -> dict[str, Any]:
    name = row.get("target", "")
    if row.get("bytes"):
        name = f"{name} @ {row['bytes']} B ({row.get('clock', 'wall')})"
    return {"name": name, "measured": row.get("value"), "goal": row.get("goal"), "met": bool(row.get("met"))}


def _decode_step(work: Path) -> list[Command]:
    """The Llama-shaped decode step (8 layers, dim 2048, 2048 cached positions), published beside the check."""
    argv = _python(
        "benchmarks/decode_step.py",
        "--backend",
        "cupy",
        "--rounds",
        "3",
        "--out",
        str(DECODE_STEP_DATA.relative_to(ROOT)),
    )
    return [(argv, None)]


def _decode_step_targets(work: Path, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The decode step's goals: resident buffers with graph replay at or under eager CUDA per token (the default
    delegate set, and every op delegated), and with every op delegated only the token ids and the logits crossing
    PCIe per token."""
    path = DECODE_STEP_DATA
    if not runs or runs[-1]["rc"] != 0 or not path.exists():  # not run, or failed: an older file is not this run's
        return {"targets": []}
    data = json.loads(path.read_text())
    rows = {row["variant"]: row for row in data["rows"]}
    targets = []
    for variant in ("resident + graphs", "every op + graphs"):
        if variant in rows:
            ratio = rows[variant]["token_s"] / data["eager"]["token_s"]
            targets.append(
                {
                    "target": f"decode step {variant} per token / eager CUDA",
                    "value": ratio,
                    "goal": 1.0,
                    "met": ratio <= 1.0,
                }
            )
    if "every op" in rows:
        moved = sum(rows["every op"]["bytes_per_token"].values())
        floor = data["goal"]["token ids + logits only"]
        targets.append(
            {
                "target": "decode step bytes per token, resident with every op delegated (token ids + logits)",
                "value": moved,
                "goal": floor,
                "met": moved <= floor,
            }
        )
    return {"targets": [_target(t) for t in targets], "data": path.name}


# The limits add up to under 10 minutes: the whole check fits one ten-minute session on a lent machine (measured on
# an H200 and an H100: pte 77 s, tests 147-153 s, call_overhead 28 s, copies 60 s, cost_model 21 s, call_profile 13 s).
STAGES = (
    Stage("pte", 100, _pte, _pte_results),
    Stage("tests", 210, _tests, _test_counts),
    Stage("call_overhead", 50, _call_overhead, _targets_of("call_overhead_cupy.json")),
    Stage("copies", 75, _copies, _targets_of("copy_bandwidth.json")),
    Stage("cost_model", 35, _cost_check, _cost_model_check),
    Stage("call_profile", 25, _call_profile),
    Stage("decode_step", 100, _decode_step, _decode_step_targets),
)


# ---- the summary ----------------------------------------------------------------------------------------------
def device_meta() -> dict[str, Any]:
    import importlib.util

    import torch

    cupy = importlib.util.find_spec("cupy")
    return {
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device",
        "torch": torch.__version__,
        "cupy": __import__("cupy").__version__ if cupy is not None else None,
    }


def summarize(results: dict[str, dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """gpu_check.json: meta, the tests' counts, every target (name, measured, goal, met) and each stage's record."""
    targets: list[dict[str, Any]] = []
    for name, stage in results.items():
        targets += [{**t, "stage": name} for t in stage.get("targets", [])]
    for run in results.get("pte", {}).get("runs", []):
        targets.append(
            {
                "name": f"{run['model']}.pte ({run['mode']}) on CuPy equal to eager",
                "measured": run["max_abs_err"],
                "goal": "ok",
                "met": run["ok"],
                "stage": "pte",
            }
        )
    tests = results.get("tests", {})
    return {
        "meta": meta,
        "tests": {key: tests.get(key, 0) for key in ("passed", "failed", "skipped")}
        | {"failures": tests.get("failures", []), "skip_reasons": tests.get("skip_reasons", {})},
        "targets": targets,
        "stages": {name: stage["record"] for name, stage in results.items()},
        "repeatability": results.get("cost_model", {}).get("repeatability", []),
        "shipped_model_on_another_card": results.get("cost_model", {}).get("shipped_model_on_another_card"),
    }


def _updated(earlier: dict[str, Any], rerun: dict[str, Any], stages: set[str]) -> dict[str, Any]:
    """`earlier` with the rerun stages' records, targets (and test counts) replaced by `rerun`'s; the rerun's date,
    device and command are listed under meta.reruns, so the file says which numbers came from which run."""
    merged = dict(earlier)
    merged["stages"] = {**earlier["stages"], **rerun["stages"]}
    merged["targets"] = [t for t in earlier["targets"] if t.get("stage") not in stages] + rerun["targets"]
    if "tests" in stages:
        merged["tests"] = rerun["tests"]
    for key in ("repeatability", "shipped_model_on_another_card"):
        if "cost_model" in stages:
            merged[key] = rerun[key]
    meta = rerun["meta"]
    merged["meta"] = {
        **earlier["meta"],
        "reruns": [*earlier["meta"].get("reruns", []), {"stages": sorted(stages), **meta}],
    }
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", default=str(DATA / "gpu_check.json"))
    parser.add_argument("--work", default=str(ROOT / "build" / "gpu-check"), help="logs and each stage's data")
    parser.add_argument("--only", default=None, help=f"comma list of stages (default all: {[s.name for s in STAGES]})")
    parser.add_argument(
        "--update",
        action="store_true",
        help="with --only: replace those stages' results in an existing --out file (its meta lists the rerun)",
    )
    args = parser.parse_args(argv)
    wanted = set(args.only.split(",")) if args.only else {s.name for s in STAGES}
    unknown = wanted - {s.name for s in STAGES}
    if unknown:
        parser.error(f"unknown stage(s) {sorted(unknown)}: choose from {[s.name for s in STAGES]}")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        **device_meta(),
        "command": os.environ.get("DEVCOPY_GPU_CHECK_MAKE", "").strip() or " ".join(["python", *sys.argv]),
    }
    results: dict[str, dict[str, Any]] = {}
    for stage in STAGES:
        if stage.name not in wanted:
            continue
        log, deadline = work / f"{stage.name}.log", time.perf_counter() + stage.limit_s
        log.write_text("")
        runs: list[dict[str, Any]] = []
        for command in stage.run(work):
            left = deadline - time.perf_counter()
            if left <= 0:
                runs.append({"command": " ".join(command[0]), "rc": None, "timed_out": True, "seconds": 0.0})
                continue
            runs.append(_run(command, left, log))
        record: dict[str, Any] = {
            "seconds": round(sum(r["seconds"] for r in runs), 1),
            "limit_s": stage.limit_s,
            "ok": all(r["rc"] == 0 for r in runs),
            "timed_out": any(r["timed_out"] for r in runs),
            "log": str(log.relative_to(ROOT)) if log.is_relative_to(ROOT) else str(log),
        }
        results[stage.name] = {**stage.collect(work, runs), "record": record}
        print(f"{stage.name:14s} {record['seconds']:7.1f} s  ok={record['ok']}  timed_out={record['timed_out']}")
    meta["wall_s"] = round(time.perf_counter() - start, 1)
    summary = summarize(results, meta)
    if args.update and Path(args.out).exists():
        summary = _updated(json.loads(Path(args.out).read_text()), summary, set(results))
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    tests = summary["tests"]
    print(f"\ntests: {tests['passed']} passed, {tests['failed']} failed, {tests['skipped']} skipped")
    for name in tests["failures"]:
        print(f"  FAILED {name}")
    for t in summary["targets"]:
        measured = t["measured"] if not isinstance(t["measured"], float) else f"{t['measured']:.3f}"
        print(f"  {'met ' if t['met'] else 'MISS'} {t['name']}: {measured} (goal {t['goal']})")
    print(f"wrote {args.out} in {meta['wall_s']} s; publish it with python benchmarks/render_docs.py")
    return 0 if tests["failed"] == 0 and all(r["record"]["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
