"""Time the graph view on a big placed graph: building its elements in Python, the dagre layout of what it shows
when it opens (module groups collapsed) against laying out every node, and opening one group (laid out whole, and
as the view does it: only the opened group, the rest kept).

Run: `.venv/bin/python benchmarks/graph_view.py [--model gpt2_12l] [--delegate-set matrix]`; prints JSON with
machine, date and command. The layout runs headless in node (widgets/js/layout_bench.mjs, after `make widget-js`
installed widgets/js/node_modules), with the view's own style and layout options.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

from devcopy_widgets import PlacementState
from devcopy_widgets import graph_view_data as data
from devcopy_widgets.graph_view import GraphView

from devcopy_lib import models
from devcopy_lib.bench.harness import timed

JS = Path(__file__).resolve().parents[1] / "widgets" / "js"


def layout_ms(element_lists: dict[str, list[Any]]) -> dict[str, int]:
    """Milliseconds of the dagre layout of each element list (headless cytoscape in node), and of reaching each
    later list from the first one by the view's incremental update (`patch:<name>`)."""
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, elements in element_lists.items():
            files[name] = Path(tmp) / f"{name}.json"
            files[name].write_text(json.dumps(elements))
        out = subprocess.run(
            ["node", "layout_bench.mjs", *map(str, files.values())], cwd=JS, check=True, capture_output=True, text=True
        ).stdout
    times = json.loads(out)
    first = next(iter(files))
    return {
        **{name: times[str(path)] for name, path in files.items()},
        **{f"patch:{name}": times[f"patch:{path}"] for name, path in files.items() if name != first},
    }


def _build(placed: Any) -> Any:
    """The graph's elements and the view over them: what opening the graph view costs."""
    nodes, edges = data.graph_elements(placed)
    return nodes, edges, GraphView(nodes, edges)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2_12l")
    parser.add_argument("--delegate-set", default="matrix", choices=list(models.DELEGATE_SETS))
    args = parser.parse_args()
    state = PlacementState()
    state.add_model(args.model, *getattr(models, args.model)())
    state.delegate_ops = tuple(models.DELEGATE_SETS[args.delegate_set])
    placed = state.placed()
    (nodes, edges, view), built_s = timed(partial(_build, placed))
    opened = view.elements
    box = data.representative(nodes[len(nodes) // 2]["module"], set(view.collapsed))
    open_s = timed(partial(view.open_group, box or ""))[1]
    everything = data.visible_elements(nodes, edges, data.module_groups(nodes), ())
    times = layout_ms({"opened": opened, "one_group_open": view.elements, "everything": everything})
    print(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()}-core CPU",
                "date": datetime.date.today().isoformat(),
                "command": " ".join(["benchmarks/graph_view.py", *sys.argv[1:]]),
                "model": args.model,
                "delegate_set": args.delegate_set,
                "nodes": len(nodes),
                "edges": len(edges),
                "python_build_s": round(built_s, 3),
                "python_open_group_s": round(open_s, 3),
                "shown_when_opened": sum("source" not in e["data"] for e in opened),
                "shown_after_one_open": sum("source" not in e["data"] for e in view.elements),
                "layout_ms": times,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
