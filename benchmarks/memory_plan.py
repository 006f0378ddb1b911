"""How memory planning scales: `plan_program` on programs of 1k to 10k instructions, three shapes of lifetimes.

A *chain* reads the previous value (two tensors live at a time); a *window* also reads one random value of the last
64 (a residual network's bounded live set); a *wide* DAG reads one random earlier value from anywhere, so the live
set grows with the program and every request overlaps hundreds of placed ones. Each time is the fastest of several
runs, wall clock; *before* is the planner at a commit that scanned everything placed for every request (the
quadratic planner, kept as the baseline), loaded from git and timed once on the same programs. Writes
docs/data/memory_plan.json and renders docs/memory_plan.md from it (tests/runtime/test_memory_plan_page.py checks
the page is that render). Run: `.venv/bin/python benchmarks/memory_plan.py`.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from devcopy_lib.bench.harness import publish, repeat, run_record
from devcopy_lib.runtime.memory_plan import plan_program
from devcopy_lib.runtime.program import Instruction, KernelCall, Program, TensorSpec, TensorValue, Value

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA, PAGE = os.path.join(ROOT, "docs/data/memory_plan.json"), os.path.join(ROOT, "docs/memory_plan.md")
SHAPES = ("chain", "window", "wide")
BEFORE_COMMIT = "1e4dd1b^"  # the last planner that scanned every placed allocation per request
WINDOW = 64


def program(nodes: int, shape: str, seed: int = 0) -> Program:
    """`nodes` kernel calls, each writing a new float tensor of 1-4096 elements from the previous value and (window,
    wide) one random earlier value."""
    rng = random.Random(seed)
    values: list[Value] = [TensorValue(TensorSpec(torch.float32, (rng.randint(1, 4096),))) for _ in range(nodes + 1)]
    instructions: list[Instruction] = []
    for i in range(nodes):
        reads: tuple[int, ...] = (i,)
        if shape == "window":
            reads += (rng.randrange(max(0, i - WINDOW), i + 1),)
        elif shape == "wide":
            reads += (rng.randrange(0, i + 1),)
        instructions.append(KernelCall(0, (*reads, i + 1)))
    return Program(values=values, operators=["aten::add.out"], instructions=instructions, inputs=[0], outputs=[nodes])


def planner_at(commit: str) -> Callable[[Program], object]:
    """`plan_program` as it was at `commit`, read from git into a module of this package (its relative imports
    resolve against today's program.py and devices, which kept their names)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:devcopy_lib/runtime/memory_plan.py"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    module = types.ModuleType("devcopy_lib.runtime._memory_plan_before")
    module.__package__ = "devcopy_lib.runtime"
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(source, f"memory_plan.py@{commit}", "exec"), module.__dict__)
    return module.plan_program  # type: ignore[no-any-return]


def _placed(memory: object) -> tuple[list[int], dict[str, Any]]:
    """A plan's buffer sizes and (buffer, offset) per key, comparable across the two planners' classes."""
    buffers = [b.nbytes for b in memory.buffers]  # type: ignore[attr-defined]
    return buffers, {k: (a.buffer, a.offset) for k, a in memory.allocations.items()}  # type: ignore[attr-defined]


def measure(nodes: int, shape: str, repeats: int, before: Callable[[Program], object] | None) -> dict[str, Any]:
    """One program: its size, the peak number of tensors live together, the planner's time (fastest of `repeats`)
    and before's (one run), and whether both made the same plan."""
    prog = program(nodes, shape)
    memory, timing = repeat(lambda: plan_program(prog), repeats, gc_paused=True)
    live = [0] * (len(prog.instructions) + 2)
    for first, last in (r.lifetime for r in memory.requests):
        live[first] += 1
        live[last + 1] -= 1
    peak, running = 0, 0
    for delta in live:
        running += delta
        peak = max(peak, running)
    row = {"shape": shape, "nodes": nodes, "tensors": len(memory.requests), "peak_live": peak}
    row["plan_s"] = timing["wall"].fastest
    row["before_s"] = row["same_plan"] = None
    if before is not None:
        old, old_timing = repeat(lambda: before(prog), 1, gc_paused=True)
        row["before_s"], row["same_plan"] = old_timing["wall"].fastest, _placed(old) == _placed(memory)
    return row


def exponent(rows: list[dict[str, Any]], shape: str, key: str) -> float | None:
    """The slope of log time against log nodes between the smallest and largest program of `shape`."""
    own = sorted((r for r in rows if r["shape"] == shape and r[key]), key=lambda r: r["nodes"])
    if len(own) < 2:
        return None
    low, high = own[0], own[-1]
    return math.log(high[key] / low[key]) / math.log(high["nodes"] / low["nodes"])


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def render(data: dict[str, Any]) -> str:
    """The page, deterministic in the data."""
    rows = data["rows"]
    lines = [
        "# How memory planning scales",
        "",
        "<!-- generated by benchmarks/memory_plan.py from docs/data/memory_plan.json; do not edit -->",
        "",
        "`runtime/memory_plan.py` places each device's tensors greedily, largest first, at the lowest offset clear of "
        "every placed tensor whose lifetime overlaps (first fit). It finds those in O(log n + k) (a segment tree "
        "over instructions: the ones live at the request's first instruction, and the ones that start inside its "
        "lifetime), so a plan costs O(n log n + K), K the number of overlapping pairs met; before, every request "
        "scanned every placed one, O(n^2). The plan is the same: `tests/runtime/test_memory_plan.py` compares it "
        "with a scan of everything placed on random requests.",
        "",
        "Programs: a *chain* reads the previous value; a *window* also reads one random value of the last "
        f"{data['window']}; a *wide* DAG reads one random earlier value from anywhere, so the tensors live together "
        "grow with the program (*peak live*), and K with them.",
        "",
        f"Fastest of {data['repeats']} runs (before: one run), wall clock, the garbage collector paused in each (as "
        "timeit does: a collection scans the whole heap, so whether one lands in a run is luck), on "
        f"{data['machine']} (1-minute load average {data['load_average']:.1f}), {data['date']}, "
        f"`{data['command']}`; *before* is `plan_program` at "
        f"commit `{data['before_commit']}`, "
        + (
            "which made the same plan for every program here."
            if all(r["same_plan"] for r in rows if r["before_s"] is not None)
            else "**which made a different plan** for: "
            + ", ".join(f"{r['shape']} {r['nodes']}" for r in rows if r["same_plan"] is False)
            + "."
        ),
        "",
        "| shape | nodes | tensors | peak live | plan | before | before / plan |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = f"{r['before_s'] / r['plan_s']:.0f}x" if r["before_s"] else "-"
        lines.append(
            f"| {r['shape']} | {r['nodes']} | {r['tensors']} | {r['peak_live']} | {_s(r['plan_s'])} | "
            f"{_s(r['before_s'])} | {ratio} |"
        )
    lines += ["", "Growth exponent (slope of log time over log nodes, smallest to largest program):", ""]
    for shape in dict.fromkeys(r["shape"] for r in rows):
        now, was = exponent(rows, shape, "plan_s"), exponent(rows, shape, "before_s")
        was_text = f", before {was:.2f}" if was is not None else ""
        lines.append(f"- {shape}: {now:.2f}{was_text}" if now is not None else f"- {shape}: -")
    lines += [
        "",
        "The chain and the window, whose live set stays bounded, grow as n log n. A wide DAG's cost is its K "
        "overlapping pairs, which grow as n^2 when the live set grows with n: the search gathers and sorts every "
        "tensor live beside a request, since the lowest free offset depends on each of them. Finding that offset "
        "without gathering them (per time span, a structure of free address gaps) is the next step.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 2000, 5000, 10000])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-before", action="store_true", help="skip timing the quadratic planner")
    args = parser.parse_args(argv)
    before = None if args.no_before else planner_at(BEFORE_COMMIT)
    rows = []
    for shape in args.shapes:
        for nodes in args.nodes:
            rows.append(measure(nodes, shape, args.repeats, before))
            print(rows[-1], flush=True)
    data = {
        **run_record("benchmarks/memory_plan.py", argv),
        "repeats": args.repeats,
        "window": WINDOW,
        "before_commit": BEFORE_COMMIT,
        "rows": rows,
    }
    publish(data, DATA, PAGE, render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
