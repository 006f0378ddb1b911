"""What place_devices costs on a real model, the report's strategy comparison read or not: export once, then time
`lower() + place_devices()`, `place_devices()` alone, `place_devices()` plus reading the comparison, and the pass
alone on a copy of the lowered graph (best of several repeats, wall seconds). `python benchmarks/place_devices_cost.py
gpt2_2l gpt2_12l [--strategy dedupe]`."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from devcopy_lib import models
from devcopy_lib.passes.lower import export_program, lower
from devcopy_lib.passes.placement import PlaceDevicesPass, copy_graph_module, place_devices


def best(work: Callable[[], object], repeats: int) -> float:
    """The fastest of `repeats` runs of `work`, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def row(name: str, repeats: int, strategy: str) -> str:
    """One model's table row: export once, then each timing."""
    module, example = getattr(models, name)()
    exported = export_program(module, example)
    lowered = lower(exported)
    times = [
        best(lambda: place_devices(lower(exported), strategy), repeats),
        best(lambda: place_devices(lowered, strategy), repeats),
        best(lambda: place_devices(lowered, strategy).report.comparison, repeats),  # type: ignore[union-attr]
        best(lambda: PlaceDevicesPass(strategy)(copy_graph_module(lowered.graph_module)), repeats),
    ]
    cells = " | ".join(f"{t * 1e3:.1f} ms" for t in times)
    return f"| {name} | {len(lowered.graph_module.graph.nodes)} | {cells} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("models", nargs="+", help="devcopy_lib.models factories, e.g. gpt2_2l gpt2_12l")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--strategy", default="executorch", help="the placement strategy: executorch, dedupe, peer")
    args = parser.parse_args()
    print("| model | graph nodes | lower + place | place | place + comparison | pass alone |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.models:
        print(row(name, args.repeats, args.strategy))


if __name__ == "__main__":
    main()
