"""Time the placement explorer on a real-sized model: the one `torch.export` + decompositions, then building the
explorer on it, an op toggle (a new delegate set: lowered again), toggling back (a cached lowering) and a strategy
switch. Counts `torch.export.export` calls to show the controls never export again.

Run: `.venv/bin/python benchmarks/explorer.py [--model gpt2_12l] [--repeats 5]`; prints JSON with machine, date and
command. The model is a factory of `devcopy_lib.models` (GPT-2 12-layer when present, else transformer_block).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from unittest import mock

import torch

from devcopy_lib import models

DEFAULT_MODELS = ("gpt2_12l", "transformer_block")


def factory(name: str):
    """A model factory of devcopy_lib.models by name: a sample (MODELS) or a module-level factory function."""
    found = models.MODELS.get(name) or getattr(models, name, None)
    if not callable(found):
        raise SystemExit(f"Unknown model {name!r}: give a factory of devcopy_lib.models, e.g. "
                         f"{', '.join(models.MODELS)}")
    return found


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(name: str, repeats: int) -> dict:
    """Seconds for export, build, op toggles (miss, hit) and strategy switches; the export calls they made."""
    from devcopy_widgets import PlacementExplorer, PlacementState

    module, inputs = factory(name)()
    real_export = torch.export.export
    with mock.patch.object(torch.export, "export", side_effect=real_export) as export:
        state = PlacementState()
        state.add_model(name, module, inputs)
        export_s = _timed(state.exported)
        view = None

        def build():
            nonlocal view
            view = PlacementExplorer(state)
        build_s = _timed(build)
        assert view.error is None, view.error
        boxes = [box for box in view.op_boxes if not box.value][:repeats] or view.op_boxes[:repeats]
        miss, hit = [], []
        for box in boxes:
            miss.append(_timed(lambda: setattr(box, "value", not box.value)))
            hit.append(_timed(lambda: setattr(box, "value", not box.value)))
        assert view.error is None, view.error
        strategies = [_timed(lambda s=s: setattr(view.strategy, "value", s))
                      for s in (*view.strategy.options, view.strategy.options[0])]
        exports = export.call_count
    nodes = len(state.exported().graph_module.graph.nodes)
    return {"model": name, "graph_nodes": nodes, "export_s": export_s, "build_s": build_s,
            "op_toggle_new_delegate_set_s": miss, "op_toggle_cached_s": hit, "strategy_switch_s": strategies,
            "torch_export_calls": exports}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help=f"a devcopy_lib.models factory (default: first of {DEFAULT_MODELS} found)")
    parser.add_argument("--repeats", type=int, default=5, help="op boxes toggled (each on, then back)")
    args = parser.parse_args(argv)
    name = args.model or next(n for n in DEFAULT_MODELS if n in models.MODELS or hasattr(models, n))
    result = measure(name, args.repeats)
    result["median_op_toggle_s"] = statistics.median(result["op_toggle_new_delegate_set_s"])
    result.update(machine=f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.processor() or 'cpu'}",
                  load_average_1min=os.getloadavg()[0],  # a shared machine: other work slows every number
                  date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  command="python " + " ".join(sys.argv), torch=torch.__version__)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
