"""Time the graph view's inspector on a real-sized model: building every node's rows, a click on a copy (which places
nothing), the what-if of a copy the first time its cause is asked about on the explorer's "what if?" button (one
re-placement) and again (cached), against computing every copy's what-if up front. docs/explorer.md ("The
inspector") quotes these figures.

Run: `.venv/bin/python benchmarks/inspector.py [--model gpt2_12l]`; prints JSON with machine, date, load average and
command. The model is a factory of `devcopy_lib.models`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from functools import partial

from devcopy_widgets import PlacementExplorer
from devcopy_widgets import graph_view_data as data

from devcopy_lib import models
from devcopy_lib.bench.harness import timed
from devcopy_lib.bench.measurement import median_of


def _select(explorer: PlacementExplorer, node_id: str) -> None:
    explorer.graph.selected = ""
    explorer.graph.selected = node_id


def _ask(explorer: PlacementExplorer, node_id: str) -> None:
    """A click on the copy, then the "what if?" button."""
    _select(explorer, node_id)
    explorer.what_if()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2_12l")
    args = parser.parse_args()
    module, inputs = getattr(models, args.model)()
    explorer = PlacementExplorer.for_model(module, inputs, name=args.model)
    rows_s = [timed(partial(data.graph_elements, explorer.placed))[1] for _ in range(5)]
    nodes, _ = data.graph_elements(explorer.placed)
    copies = [n for n in nodes if n["what_if"]]
    clicks = [timed(partial(_select, explorer, node["id"]))[1] for node in copies]
    first: list[float] = []
    again: list[float] = []
    seen: set[str] = set()
    for node in copies:
        causes = {json.dumps(change, sort_keys=True) for change in node["what_if"]}
        (again if causes <= seen else first).append(timed(partial(_ask, explorer, node["id"]))[1])
        seen |= causes
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average_1min": os.getloadavg()[0],
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
        "model": args.model,
        "nodes": len(nodes),
        "copies_with_a_what_if": len(copies),
        "distinct_causes": len(seen),
        "rows_for_every_node_s_median": median_of(rows_s),
        "click_on_a_copy_s": {"median": median_of(clicks), "slowest": max(clicks)},
        "what_if_first_time_s": {"median": median_of(first), "slowest": max(first)},
        "what_if_cached_s": {"median": median_of(again), "slowest": max(again)} if again else None,
        "every_what_if_up_front_s": sum(first),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
