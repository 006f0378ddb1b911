"""Time the placement explorer on a real-sized model: the one `torch.export` + decompositions, then building the
explorer on it, an op toggle (a new delegate set: lowered again), toggling back (a cached lowering) and a strategy
switch. Counts `torch.export.export` calls to show the controls never export again.

Run: `.venv/bin/python benchmarks/explorer.py [--model gpt2_12l] [--repeats 5] [--write]`; prints JSON with machine,
date and command; `--write` also stores it in docs/data/explorer.json and renders docs/explorer.md. The model is a
factory of `devcopy_lib.models` (GPT-2 12-layer when present, else transformer_block).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from functools import partial
from typing import Any
from unittest import mock

import torch

from devcopy_lib import models
from devcopy_lib.bench.harness import timed
from devcopy_lib.bench.measurement import median_of
from devcopy_lib.bench.targets import explorer_targets

DEFAULT_MODELS = ("gpt2_12l", "transformer_block")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA, PAGE = os.path.join(ROOT, "docs/data/explorer.json"), os.path.join(ROOT, "docs/explorer.md")
# docs/explorer.md from this line on (the inspector, exports, the graph view and its browser figures) is kept when
# this script rewrites the page
KEEP_FROM = "<!-- kept by benchmarks/explorer.py: the sections below are written by hand -->"


def factory(name: str) -> Any:
    """A model factory of devcopy_lib.models by name: a sample (MODELS) or a module-level factory function."""
    found = models.MODELS.get(name) or getattr(models, name, None)
    if not callable(found):
        raise SystemExit(
            f"Unknown model {name!r}: give a factory of devcopy_lib.models, e.g. {', '.join(models.MODELS)}"
        )
    return found


def measure(name: str, repeats: int) -> dict[str, Any]:
    """Seconds for export, build, op toggles (miss, hit) and strategy switches; the export calls they made."""
    from devcopy_widgets import PlacementExplorer, PlacementState

    module, inputs = factory(name)()
    real_export = torch.export.export
    with mock.patch.object(torch.export, "export", side_effect=real_export) as export:
        state = PlacementState()
        state.add_model(name, module, inputs)
        export_s = timed(state.exported)[1]
        view, build_s = timed(partial(PlacementExplorer, state))
        assert view.error is None, view.error
        boxes = [box for box in view.op_boxes if not box.value][:repeats] or view.op_boxes[:repeats]
        miss, hit = [], []
        for box in boxes:
            before = box.value
            miss.append(timed(partial(setattr, box, "value", not before))[1])
            hit.append(timed(partial(setattr, box, "value", before))[1])
        assert view.error is None, view.error
        strategies = [
            timed(partial(setattr, view.strategy, "value", s))[1]
            for s in (*view.strategy.options, view.strategy.options[0])
        ]
        exports = export.call_count
    nodes = len(state.exported().graph_module.graph.nodes)
    return {
        "model": name,
        "graph_nodes": nodes,
        "export_s": export_s,
        "build_s": build_s,
        "op_toggle_new_delegate_set_s": miss,
        "op_toggle_cached_s": hit,
        "strategy_switch_s": strategies,
        "torch_export_calls": exports,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help=f"a devcopy_lib.models factory (default: first of {DEFAULT_MODELS} found)")
    parser.add_argument("--repeats", type=int, default=5, help="op boxes toggled (each on, then back)")
    parser.add_argument("--write", action="store_true", help="store docs/data/explorer.json, render docs/explorer.md")
    args = parser.parse_args(argv)
    name = args.model or next(n for n in DEFAULT_MODELS if n in models.MODELS or hasattr(models, n))
    result = measure(name, args.repeats)
    result["median_op_toggle_s"] = median_of(result["op_toggle_new_delegate_set_s"])
    result.update(
        machine=f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.processor() or 'cpu'}",
        load_average_1min=os.getloadavg()[0],  # a shared machine: other work slows every number
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        command="python " + " ".join(sys.argv),
        torch=torch.__version__,
    )
    print(json.dumps(result, indent=1))
    if args.write:
        with open(DATA, "w") as handle:
            json.dump(result, handle, indent=1)
        with open(PAGE) as handle:
            old = handle.read()
        with open(PAGE, "w") as handle:
            handle.write(render(result) + ("\n" + old[old.index(KEEP_FROM) :] if KEEP_FROM in old else ""))
    return result


def render(r: dict[str, Any]) -> str:
    """docs/explorer.md from one result."""

    targets = explorer_targets(r)

    def against_goal(key: Any) -> Any:
        t = targets[key]
        return f"{t['value']:.2f} | < {t['goal']:g} | {'yes' if t['met'] else '**no**'}"

    return (
        f"# Placement explorer at real-model scale\n\n"
        f"Measured by `benchmarks/explorer.py` on {r['machine']} (1-minute load average "
        f"{r['load_average_1min']:.1f}{'; other work was running' if r['load_average_1min'] > 1 else ''}), "
        f"{r['date']}, torch {r['torch']}. Command: `{r['command']}`.\n\n"
        f"Model `{r['model']}`: {r['graph_nodes']} nodes after `torch.export` + decompositions, which took "
        f"{r['export_s']:.1f} s and ran {r['torch_export_calls']} time(s) in the whole session below.\n\n"
        f"| step | seconds | goal | met |\n|---|---|---|---|\n"
        f"| build the explorer (lower, place, report, view) | {against_goal('build_s')} |\n"
        f"| op toggle, new delegate set (median of {len(r['op_toggle_new_delegate_set_s'])}) | "
        f"{against_goal('median_op_toggle_s')} |\n"
        f"| op toggle back (cached lowering, median) | "
        f"{median_of(r['op_toggle_cached_s']):.3f} | | |\n"
        f"| strategy switch (slowest) | {max(r['strategy_switch_s']):.3f} | | |\n\n"
        f"Every toggle: {', '.join(f'{s:.2f}' for s in r['op_toggle_new_delegate_set_s'])} s. A toggle lowers "
        f"the exported program again (partitioning, delegate subgraphs) and places it; toggling back reuses the "
        f"cached lowering, and a strategy switch only places.\n"
    )


if __name__ == "__main__":
    main()
