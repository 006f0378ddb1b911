"""Time the placement explorer on a real-sized model: the one `torch.export` + decompositions, then building the
explorer on it, an op toggle (a new delegate set: lowered again), toggling back (a cached lowering) and a strategy
switch. Counts `torch.export.export` calls to show the controls never export again. Then what a user of a big model
waits for ("the seat"): a click on a copy, its what-if (first time and again), a delegate set chosen from the menu,
whether each marked the graph busy, and the bytes the widgets sent for it (through a fake comm).

Run: `.venv/bin/python benchmarks/explorer.py [--model gpt2_12l] [--repeats 5] [--write]`; prints JSON with machine,
date and command; `--write` also stores it in docs/data/explorer.json and renders docs/explorer.md. The model is a
factory of `devcopy_lib.models` (GPT-2 12-layer when present, else transformer_block), or `gpt2_<N>l_tiny`: GPT-2
with N layers and tiny widths (64 wide, 4 heads, vocabulary 1,024), the graph of a 48- or 96-layer GPT-2 (thousands
of placed nodes) without its weights.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import sys
from collections.abc import Callable
from functools import partial
from typing import Any
from unittest import mock

import comm
import torch

from devcopy_lib import models
from devcopy_lib.bench.harness import timed
from devcopy_lib.bench.measurement import FullCollections, median_of
from devcopy_lib.bench.targets import explorer_targets

DEFAULT_MODELS = ("gpt2_12l", "transformer_block")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA, PAGE = os.path.join(ROOT, "docs/data/explorer.json"), os.path.join(ROOT, "docs/explorer.md")
# docs/explorer.md from this line on (the inspector, exports, the graph view and its browser figures) is kept when
# this script rewrites the page
KEEP_FROM = "<!-- kept by benchmarks/explorer.py: the sections below are written by hand -->"


def gpt2_tiny(layers: int) -> Callable[[], Any]:
    """GPT-2 with `layers` layers and tiny widths: the shape of a big GPT-2's graph, built and exported in seconds."""
    from devcopy_lib.models.real import causal_lm
    from devcopy_lib.models.samples import seeded

    config = {"n_embd": 64, "n_head": 4, "vocab_size": 1024, "n_positions": 128, "bos_token_id": 0, "eos_token_id": 0}
    return seeded(lambda: causal_lm("GPT2Config", f"gpt2_{layers}l_tiny", 32, n_layer=layers, **config))


def factory(name: str) -> Any:
    """A model factory of devcopy_lib.models by name: a sample (MODELS), a module-level factory function, or
    `gpt2_<N>l_tiny` (`gpt2_tiny(N)`)."""
    if tiny := re.fullmatch(r"gpt2_(\d+)l_tiny", name):
        return gpt2_tiny(int(tiny[1]))
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
        with FullCollections() as build_gcs:
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
        "placed_nodes": len(view.graph.nodes),
        "graph_nodes_json_bytes": len(json.dumps(view.graph.nodes)),
        "memory_svg_bytes": len(view.memory.svg),
        "table_html_bytes": len(view.table.value),
        "export_s": export_s,
        "build_s": build_s,
        "build_full_gc_s": sum(build_gcs.seconds),
        "op_toggle_new_delegate_set_s": miss,
        "op_toggle_cached_s": hit,
        "strategy_switch_s": strategies,
        "torch_export_calls": exports,
        **seat(view, repeats),
    }


class Sent:
    """What the widgets send to the browser, through a fake comm: messages and their bytes (JSON and buffers)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.keys: set[str] = set()

    def send(self, data: Any = None, metadata: Any = None, buffers: Any = None) -> None:
        self.bytes += len(json.dumps(data, default=str)) + sum(len(b) for b in buffers or ())
        self.keys |= set((data or {}).get("state", {}))


def _step(view: Any, action: Callable[[], Any]) -> dict[str, Any]:
    """Seconds of `action` on the kernel, whether it marked the graph busy, and what it sent."""
    busy: list[bool] = []

    def seen(change: Any) -> None:
        busy.append(change["new"])

    view.graph.observe(seen, names="busy")
    sent = Sent()
    with mock.patch.object(comm.DummyComm, "send", sent.send):
        seconds = timed(action)[1]
    view.graph.unobserve(seen, names="busy")
    return {"s": seconds, "busy": bool(busy), "sent_bytes": sent.bytes, "sent_nodes": "nodes" in sent.keys}


def clicks(view: Any, repeats: int) -> dict[str, Any]:
    """Clicks on the placement shown: on its `repeats` biggest copies with a what-if, then each copy's what-if asked
    for the first time and again. Explorers without a "what if?" button (before it) compute the what-if on the
    click: their click is that cost."""
    copies = sorted((n for n in view.graph.nodes if n.get("what_if")), key=lambda n: -n["bytes"])[:repeats]
    click, first, again = [], [], []
    for node in copies:
        view.graph.selected = ""
        click.append(_step(view, partial(setattr, view.graph, "selected", node["id"])))
        if hasattr(view, "what_if"):
            first.append(_step(view, view.what_if))
            view.graph.selected = ""
            view.graph.selected = node["id"]
            again.append(_step(view, view.what_if))
    steps = {"copy_click": click, "what_if_first": first, "what_if_again": again}
    summary: dict[str, Any] = {"placed_nodes": len(view.graph.nodes), **steps}
    for key, taken in steps.items():
        if taken:
            summary[f"median_{key}_s"] = median_of([step["s"] for step in taken])
            summary[f"max_{key}_sent_bytes"] = max(step["sent_bytes"] for step in taken)
    return summary


def seat(view: Any, repeats: int) -> dict[str, Any]:
    """What a user waits for on a big model: clicks on copies and their what-ifs with the default delegate set,
    each delegate set chosen from the menu, and clicks again with the `matrix` set (the most placed nodes)."""
    shown = clicks(view, repeats)
    presets = {}
    for preset in (*models.DELEGATE_SETS, "default"):
        view.preset.value = "custom"
        presets[preset] = _step(view, partial(setattr, view.preset, "value", preset))
    view.preset.value = "matrix"
    return {"seat_default_set": shown, "delegate_set_menu": presets, "seat_matrix_set": clicks(view, repeats)}


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


def _gc_part(r: dict[str, Any]) -> str:
    """The build's full garbage collection, where one ran: the export's objects are collected once the explorer,
    which pauses the collector while it computes a view (docs/explorer.md), resumes it."""
    seconds = r.get("build_full_gc_s")
    return f"; of it {seconds:.2f} s a full garbage collection of the export's objects" if seconds else ""


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
        f"| build the explorer (lower, place, report, view{_gc_part(r)}) | {against_goal('build_s')} |\n"
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
