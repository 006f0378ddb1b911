"""Real models (devcopy_lib.models.REAL_MODELS) through the whole flow, per model and delegate set
(models.DELEGATE_SETS): graph size, the time of every step, delegates, H2D/D2H copies per call for the `executorch`
and `dedupe` strategies and with constant hoisting, both runtime modes checked against eager, and whether
ExecuTorch 1.5.1's own lowering of the same model and ops gives the same counts.

Writes docs/data/real_models.json (simulated backend, with ExecuTorch) or docs/data/real_models_cupy.json
(`--backend cupy`: the CUDA machine, no ExecuTorch there) and renders docs/real_models.md from both.
Run: `python benchmarks/real_models.py [--backend simulated|cupy] [--models gpt2_2l,...] [--no-executorch]`.
`--models` with some of the models re-measures only those: the file keeps the other rows and its header, and names
the run that measured them (its date, command, machine and versions) in its `updates`, which the page shows.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import sys
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from devcopy_lib import compare_outputs, load_method, lower, make_allocator, models, place_devices, scoped_allocators
from devcopy_lib.bench.harness import repeat, timed
from devcopy_lib.emitter.emit import emit
from devcopy_lib.names import COPY_ROLES, MODES, format_bytes
from devcopy_lib.pte import executorch_reference

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs/real_models.md"
DATA = {"simulated": ROOT / "docs/data/real_models.json", "cupy": ROOT / "docs/data/real_models_cupy.json"}
CALLS = 3  # timed calls after one warm-up; the median is reported


def _median_call(fn: Callable[[], Any]) -> tuple[Any, float]:
    """The last result and the median wall seconds of CALLS calls after one warm-up (first-call allocations, lazy
    kernels)."""
    result, timings = repeat(fn, CALLS, warmup=1)
    return result, timings["wall"].median


def _emit_and_load(placed: Any, mode: str) -> Any:
    return load_method(emit(placed), mode)


def _copies(report: Any) -> dict[str, Any]:
    return {
        "copies": dict(report.copies),
        "bytes": dict(report.copy_bytes),
        "bytes_by_role": report.bytes_by_role(),
        "delegates": report.delegates,
    }


def _runs(placed: Any, inputs: Any, expected: Any) -> dict[str, Any]:
    """Load and call in both modes: equal to eager (compare_outputs), max error, load and call seconds."""
    result = {}
    for mode in MODES:
        method, load_s = timed(partial(_emit_and_load, placed, mode))
        with method:
            outputs, call_s = _median_call(partial(method, *inputs))
        ok, err = compare_outputs(outputs, expected)
        result[mode] = {"ok": ok, "max_abs_err": err, "load_s": load_s, "call_s": call_s}
    return result


def _executorch(module: Any, inputs: Any, ops: Any, ours: dict[str, int], enabled: bool) -> dict[str, Any]:
    """ExecuTorch 1.5.1's counts for the same model and ops, whether they equal devcopy's, or why there are none."""
    if not enabled:
        return {"status": "not run", "why": "ExecuTorch is not run on this machine (--no-executorch / CUDA machine)"}
    if not executorch_reference.available():
        return {"status": "not run", "why": "ExecuTorch is not installed (the reference extra)"}
    try:
        counts, seconds = timed(partial(executorch_reference.executorch_counts, module, inputs, ops))
    except executorch_reference.ExecuTorchRefusal as exc:
        return {"status": "refused", "why": str(exc)[:600]}
    theirs = {k: counts[k] for k in ("delegates", "h2d", "d2h")}
    return {"status": "agrees" if theirs == ours else "differs", "counts": theirs, "seconds": seconds}


def _place_and_compare(lowered: Any) -> Any:
    """`place_devices` and the report's strategy comparison (worked out on its first read under dedupe or peer)."""
    placed = place_devices(lowered)
    _ = placed.report.comparison
    return placed


def model_rows(name: str, backend: str, with_executorch: bool) -> list[dict[str, Any]]:
    module, inputs = models.REAL_MODELS[name]()
    with torch.no_grad():
        expected, eager_s = _median_call(lambda: pytree.tree_leaves(module(*inputs)))
    exported, export_s = timed(partial(torch.export.export, module, inputs))
    decomposed, decompose_s = timed(exported.run_decompositions)
    rows = []
    for set_name, ops in models.DELEGATE_SETS.items():
        lowered, lower_s = timed(partial(lower, decomposed, ops))
        placed, place_s = timed(partial(_place_and_compare, lowered))
        _, emit_s = timed(partial(emit, placed))
        strategies = {
            "executorch": placed,
            "dedupe": place_devices(lowered, strategy="dedupe"),
            "hoisting": place_devices(lowered, hoist_constants=True),
        }
        with scoped_allocators(make_allocator(backend)):
            runs = {strategy: _runs(p, inputs, expected) for strategy, p in strategies.items()}
        ours = {"delegates": placed.report.delegates, **placed.report.copies}
        row = {
            "model": name,
            "delegate_set": set_name,
            "ops": list(ops),
            "nodes": {"exported": len(decomposed.graph.nodes), "lowered": len(lowered.graph_module.graph.nodes)},
            "seconds": {
                "export": export_s,
                "decompositions": decompose_s,
                "partitioning": lower_s,
                "placement": place_s,
                "emit": emit_s,
                "load": runs["executorch"]["portable"]["load_s"],
                "call": runs["executorch"]["portable"]["call_s"],
                "eager": eager_s,
            },
            "strategies": {s: {**_copies(p.report), "runs": runs[s]} for s, p in strategies.items()},
            "per_call_bytes": placed.report.per_call_bytes,
            "executorch_1_5_1": _executorch(module, inputs, ops, ours, with_executorch),
        }
        rows.append(row)
        print(
            json.dumps(
                {
                    "model": name,
                    "set": set_name,
                    "delegates": ours["delegates"],
                    "copies": placed.report.copies,
                    "ok": all(r["ok"] for rs in runs.values() for r in rs.values()),
                    "executorch": row["executorch_1_5_1"]["status"],
                }
            ),
            flush=True,
        )
    return rows


# ---- the page ------------------------------------------------------------------------------------------------
def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.2f}"


def _s(seconds: float) -> str:
    return f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"


def _ok(runs: dict[str, Any]) -> str:
    worst = max(r["max_abs_err"] for r in runs.values())
    return ("yes" if all(r["ok"] for r in runs.values()) else "**NO**") + f" ({worst:.1e})"


def _et(cell: dict[str, Any]) -> str:
    if cell["status"] == "agrees":
        return "agrees"
    if cell["status"] == "differs":
        c = cell["counts"]
        return f"**differs**: {c['delegates']} delegates, {c['h2d']}/{c['d2h']}"
    return f"{cell['status']}: {cell['why']}"


def _section(data: dict[str, Any]) -> list[str]:
    lines = [
        f"Generated by `{data['command']}` on {data['date']} ({data['machine']}, {data['backend']} backend); "
        "versions: " + ", ".join(f"{k} {v}" for k, v in data["versions"].items()) + ".",
        *(
            f"The rows of {', '.join(u['models'])} were measured later, by `{u['command']}` on {u['date']} "
            f"({u['machine']}); versions: " + ", ".join(f"{k} {v}" for k, v in u["versions"].items()) + "."
            for u in data.get("updates", [])
        ),
        "",
        "### Time per step (seconds)",
        "",
        "*nodes*: decomposed graph / lowered graph (delegate calls and their getitems replace partitions). *export* is "
        "`torch.export`, *decomp* `run_decompositions()`, *partition* `lower` (to_edge's rewrites, partitioning, "
        "delegate building), *place* `place_devices` and reading its report's comparison with the other strategies, "
        "*emit* the Program, *load* `load_method` in portable mode, *call* one "
        f"portable-mode call (median of {CALLS}), *eager* one call of the PyTorch module on the CPU.",
        "",
        "| model | delegate set | nodes | delegates | export | decomp | partition | place | emit | load | call "
        "| eager |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in data["rows"]:
        t, n = row["seconds"], row["nodes"]
        lines.append(
            f"| {row['model']} | {row['delegate_set']} | {n['exported']} / {n['lowered']} | "
            f"{row['strategies']['executorch']['delegates']} | "
            + " | ".join(
                _s(t[k])
                for k in ("export", "decompositions", "partitioning", "placement", "emit", "load", "call", "eager")
            )
            + " |"
        )
    lines += [
        "",
        "### Copies per call",
        "",
        "H2D/D2H copies and MB moved per call (constants excluded: delegate-owned ones are copied once at load). "
        "*hoisting* is the `executorch` strategy with `hoist_constants=True`: constant-derived values are computed "
        "and copied once at load. *equal to eager*: every output within `compare_outputs`' tolerance in both runtime "
        "modes for the three placements (largest |devcopy - eager| in brackets). *ExecuTorch 1.5.1*: its own "
        "`to_edge` + `to_backend` + `to_executorch` of the same model and ops (devcopy's accept-all reference "
        "backend) against the `executorch` strategy's delegates and copies.",
        "",
        "| model | delegate set | executorch H2D/D2H | MB H2D/D2H | dedupe H2D/D2H | MB H2D/D2H | hoisting H2D/D2H | "
        "MB H2D/D2H | equal to eager | ExecuTorch 1.5.1 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in data["rows"]:
        cells = []
        for strategy in ("executorch", "dedupe", "hoisting"):
            s = row["strategies"][strategy]
            cells += [
                f"{s['copies']['h2d']}/{s['copies']['d2h']}",
                f"{_mb(s['bytes']['h2d'])}/{_mb(s['bytes']['d2h'])}",
            ]
        runs = {f"{s} {m}": r for s, v in row["strategies"].items() for m, r in v["runs"].items()}
        lines.append(
            f"| {row['model']} | {row['delegate_set']} | "
            + " | ".join(cells)
            + f" | {_ok(runs)} | {_et(row['executorch_1_5_1'])} |"
        )
    return lines + _roles_section(data)


def _role_cells(split: dict[str, dict[str, int]]) -> list[str]:
    return [f"{format_bytes(split[role]['h2d'])} / {format_bytes(split[role]['d2h'])}" for role in COPY_ROLES]


def _roles_section(data: dict[str, Any]) -> list[str]:
    """Bytes per call by role for the rows measured with the split (every row measured since it exists)."""
    rows = [row for row in data["rows"] if "bytes_by_role" in row["strategies"]["executorch"]]
    if not rows:
        return []
    header = " | ".join(
        f"{strategy} {role} H2D / D2H" for strategy in ("executorch", "hoisting") for role in COPY_ROLES
    )
    lines = [
        "",
        "### Bytes per call by role",
        "",
        "What the copies of one call move (`PlacementReport.bytes_by_role()`), for the `executorch` strategy and with "
        "hoisting: *cache* is program state carried from call to call (the KV cache: a buffer written in place, or "
        "an input returned updated) and every view or copy of it, *weights* what is computed from parameters and "
        "constants alone, *activations* the rest. Per direction they add up to the MB columns above.",
        "",
        f"| model | delegate set | {header} |",
        "|---|---|" + "---:|" * (2 * len(COPY_ROLES)),
    ]
    for row in rows:
        cells = [c for s in ("executorch", "hoisting") for c in _role_cells(row["strategies"][s]["bytes_by_role"])]
        lines.append(f"| {row['model']} | {row['delegate_set']} | " + " | ".join(cells) + " |")
    return lines


INTRO = """# Real models

`devcopy_lib.models.REAL_MODELS` holds torchvision and transformers models built from code and config with random
weights (seeded), in eval mode, with no download: `resnet18` and `mobilenet_v3_small` (224 x 224 images),
`gpt2_2l` and `gpt2_12l` (GPT-2's 768-wide layers and tied 50,257-token head, 32 tokens, no KV cache), `bert_small`
(4 layers, 512 wide, an attention mask), `llama_tiny`, and `llama_tiny` decoding one token with a KV cache
(`llama_decode_step`, `llama_decode_step_functional`: "LLM decode" below). The transformers models use the "eager"
attention implementation and return tensors (logits; BERT's hidden states and pooled output). They need the
`models` extra (`pip install -c constraints.txt -e '.[models]'`; `make test` and `make lab` install it). Use them like
the samples: `devcopy place resnet18`, `devcopy run gpt2_2l --mode aten`, or `module, inputs = models.gpt2_2l()` in
Python.

`models.DELEGATE_SETS` are the op sets a user would give a device backend: `matrix` (mm, addmm, bmm: what
`nn.Linear` and attention decompose to), `matrix_views` (plus view, permute, expand, clone, unsqueeze), `cnn`
(convolution, batch norm, relu, max pool, mean, add) and `default` (`DEFAULT_DELEGATE_OPS`). Every model places and
runs equal to eager with each, in both runtime modes (`tests/test_real_models.py` on small inputs; the tables below
at full size). Multi-output ops (layer norm, batch norm, max pool with indices) are delegated with their `getitem`s:
a delegate returns tensors and its op list names real ops only.

## Architecture families

`models.FAMILY_MODELS` (in `models/families.py`, part of `REAL_MODELS`) adds tiny members (2 layers or stages,
64 wide, random weights, no download) of eleven more families. Decoders: `mistral_tiny` (grouped-query attention over
a sliding window of half the sequence), `qwen2_tiny` (biases on query, key and value), `phi_tiny` (rotary on half of
each head, attention and MLP in parallel), `gpt_neox_tiny` (one fused query-key-value projection, parallel residual)
and `mixtral_tiny` (each MLP a mixture of 4 experts, 2 per token), 32 tokens each. Encoders: `t5_encoder_tiny`
(relative position bias, a padded mask), `distilbert_tiny` (a padded mask), `vit_tiny` (a strided-convolution patch
embedding, 32 x 32 images) and `whisper_encoder_tiny` (two 1-D convolutions over 80 mel bins, 64 frames). And
`lstm_tagger` (a 2-layer LSTM, torch.nn only: `torch.export` unrolls it into one step per token) and
`convnext_micro` (torchvision's ConvNeXt class, two stages of one block; layer scale 0.5 so that the blocks show in
the output). With every delegate set their delegates and copies equal ExecuTorch 1.5.1's own lowering (the tables
below; `tests/test_real_models_page.py` checks it), and they run equal to eager in both modes. `make test` places
and runs each with every set on small inputs and lowers five of them through ExecuTorch again (the default ops);
`make test-deep` compares all of them with three op sets and each skip option.

Mixtral's experts run as transformers' `batched_mm` implementation (`experts_implementation="batched_mm"`: gather
each token's expert weights, then `bmm`). Its default, `grouped_mm`, exports as the custom op
`transformers::grouped_mm_fallback`, which has no out variant. devcopy places that program, but its runtime calls
only out variants, so emitting it stops with `NotImplementedError: transformers.grouped_mm_fallback.default has no
out variant ... decompose the op or delegate it`; ExecuTorch 1.5.1 refuses it alike, in `to_executorch`:
`RuntimeError: Missing out variants: {'transformers::grouped_mm_fallback'}`.
"""

DECODE = """## LLM decode with a KV cache

`llama_decode_step` and `llama_decode_step_functional` (`devcopy_lib/models/decode.py`) run one token through
`llama_tiny` (the same config, random weights, frozen) over transformers' `StaticCache` of 128 positions, 16 of them
filled by a prompt run eagerly when the model is built; the inputs are the next token and its position. The first
keeps the cache in registered buffers that transformers' `StaticLayer` writes in place (`index_copy_`), as
transformers' ExecuTorch export recipe does: torch.export makes each write a `BUFFER_MUTATION`, and lowering writes it
back with `copy_` at the end of the graph, as ExecuTorch's `insert_write_back_for_buffers_pass` does, so the cache is
state of the loaded method, carried from call to call. The second takes the cache as four inputs (keys and values of
2 layers, 16 KiB each) and returns it updated after the logits; the caller threads it to the next step. Both run equal
to eager step after step in both runtime modes (`tests/test_decode_models.py`), and ExecuTorch 1.5.1 places the same
delegates and copies with every delegate set.

A mutated buffer is program state read on the CPU, never a delegate's constant, so wherever a delegate reads the
cache it crosses to the device on every step: the *cache* columns of "Bytes per call by role". With `matrix` ops
attention's `bmm` reads the cache expanded on the CPU to the 4 query heads (grouped-query attention shares 2
key/value heads), so twice the cache crosses; with the views delegated (`matrix_views`, `default`) the expansion runs
on the device and the cache crosses once. In the functional form the step's `clone` of its cache inputs is a view op:
delegated, it sends the cache over and back before the CPU writes the new token. Hoisting takes the weights'
transposes out of every step (616 KiB with `matrix` ops) but never the cache, which changes from call to call.

ExecuTorch serializes a mutated buffer's shape and dtype only (its initial value is meaningless unless a pass such as
`InitializedMutableBufferPass` marks it); devcopy starts each loaded method from the buffer's value at lowering, here
the prompt's keys and values (docs/differences.md).
"""

RESIDENT = """### Keeping the cache on the device

**Resident buffers** (`place_devices(..., resident_buffers=True)`, `devcopy place/run --resident-buffers`, the
explorer's *resident buffers* switch; beyond ExecuTorch, docs/differences.md) keep a mutable buffer whose readers and
writers can run on the device there for the method's life: planned in the device's arena, filled once at load from
its initial value, updated on the device (`index_put`/`index_copy` become one-op delegates that write the buffer's
own memory in place, so the functionalised write-back has nothing left to copy; another write-back is an on-device
copy), and never copied per call. `devcopy place llama_decode_step --resident-buffers` puts the three placements
side by side (bytes per call, default delegate set):

| placement | cache H2D | cache D2H | weights H2D | activations H2D | activations D2H |
|---|---:|---:|---:|---:|---:|
| plain (ExecuTorch's) | 64 KiB | 0 B | 1.0 KiB | 2.2 KiB | 6.7 KiB |
| hoisted | 64 KiB | 0 B | 0 B | 2.2 KiB | 6.7 KiB |
| resident (and hoisted) | 0 B | 0 B | 0 B | 2.2 KiB | 6.1 KiB |

What stays per call is the step's own activations: the attention mask and rotary positions computed on the CPU
(`arange`, `le`, `where`: not delegated) going over, the logits (4 KiB) and a few positions coming back.
`devcopy run llama_decode_step --resident-buffers --mode aten --steps 5` runs five consecutive tokens of one method
beside the eager module (each fed the previous step's most likely token) and is equal to eager in both modes, as is
every delegate set (`tests/test_decode_models.py`). `Method.buffers()` reads the cache (one D2H per buffer, counted
in `caller_copies`); `Method.reset_buffers()` puts it back to its value at load. Only a buffer's updates and views
move: a buffer that a CPU op computes from (attention's `bmm` under the `cnn` set) stays on the host, and the report
says so (`PlacementReport.buffers`).

**The functional form, ExecuTorch's way.** `llama_decode_step_functional` takes the cache as inputs and returns it.
ExecuTorch's switches keep a value on the device across calls only when the caller holds it there: the update must
run in a delegate (add `index_put.default` to the delegate set), the outputs stay on the device
(`skip_d2h_for_method_outputs=True`) and the cache inputs are taken there. ExecuTorch's
`skip_h2d_for_method_inputs=True` re-tags every graph input and refuses this program (`position` is read by two CPU
ops and a delegate: "requires graph input 'position' to have exactly one user"), so devcopy's switch also takes the
names of the inputs to skip:

```python
lowered = export_and_lower(step, inputs, (*DEFAULT_DELEGATE_OPS, "index_put.default"))
placed = place_devices(lowered, skip_h2d_for_method_inputs=lowered.input_names[2:], skip_d2h_for_method_outputs=True)
with load_method(placed, "aten") as method:
    token, position, *cache = inputs                       # the first call takes the cache from the CPU
    for _ in range(steps):
        logits, *cache = method(token, position, *cache, keep_on_device=True)   # DeviceValues: no copy
        token, position = logits.cpu()[:, -1].argmax(-1, keepdim=True), position + 1  # the logits: one D2H
```

`keep_on_device=True` returns each output the program leaves on the device as a `DeviceValue` (the method's output
memory, valid until its next call) and takes it back as the input the program reads on the device (copied on the
device). Per call, after the first: no byte of cache either way; the program's copies of the positions, masks and
rotary tables (3.2 KiB H2D, 2.1 KiB D2H with the default set) and the caller's read of the logits (4 KiB) remain
(`tests/test_decode_models.py`, `test_the_functional_cache_fed_back_on_the_device_never_crosses`).

### A Llama-shaped decode step on the GPU

`benchmarks/decode_step.py` times a decode step of 8 Llama-2-shaped layers (dim 2048, 16 heads, SwiGLU 5632, a
32000-token vocabulary, fp32) over a static cache of 2048 positions (256 MiB), per token, under ExecuTorch's placement,
hoisting, resident buffers and resident buffers with graph replay, against eager PyTorch on the GPU (weights and cache
there, the token id and position from the CPU, the logits back), with the bytes each moves per token. The default
delegate set leaves the attention mask and the rotary slices on the CPU, so some activations still cross each token;
the *every op* rows delegate every op of the step, and then only the token id, the position and the logits cross.
`--backend simulated --small` runs the tiny step on a CPU in about 30 s (`tests/bench/test_decode_step_script.py`).
"""


TORCHVISION = """## torchvision on a CPU torch

The torchvision wheels published for torch 2.13 (PyPI's `torchvision==0.28.0`) are CUDA builds: their compiled ops
(`torchvision/_C.so`) link `libtorch_cuda.so`, which the CPU build of torch does not ship, so they do not load and
`import torchvision` stops with `RuntimeError: operator torchvision::nms does not exist`. There is no sdist; the
matching CPU wheel lives on `https://download.pytorch.org/whl/cpu` (`pip install torchvision==0.28.0 --index-url
https://download.pytorch.org/whl/cpu`), which this project's machines cannot reach.

The models need none of the compiled ops (they are pure Python; the ops are detection ones: `nms`, `roi_align`, ...).
So when, and only when, torchvision's compiled ops failed to load, `devcopy_lib.models` (in `models/extras.py`)
defines the two op schemas torchvision's import registers fake kernels for (`torchvision::nms`, `torchvision::qnms`),
without kernels, imports torchvision and warns once (a `RuntimeWarning` naming why). Detection ops such as
`torchvision.ops.nms` still raise. With a torchvision whose ops load (the CPU wheel above, or a CUDA torch), nothing
is defined and nothing is said. transformers imports torchvision when it is installed, so the same holds for the
transformers models.
"""


def render() -> str:
    lines = [INTRO]
    for backend, title in (
        ("simulated", "CPU machine, simulated device, ExecuTorch 1.5.1 beside"),
        ("cupy", "CUDA machine, CuPy"),
    ):
        lines.append(f"## Results: {title}\n")
        if DATA[backend].exists():
            lines += _section(json.loads(DATA[backend].read_text()))
        else:
            lines.append(f"Not measured yet: `python benchmarks/real_models.py --backend {backend}`.")
        lines.append("")
    lines += [DECODE, RESIDENT]
    lines += _decode_step_section()
    lines += ["", TORCHVISION]
    return "\n".join(lines)


def _decode_step_section() -> list[str]:
    """The GPU run of benchmarks/decode_step.py (docs/data/decode_step_cupy.json), or why there is none."""
    path = ROOT / "docs/data/decode_step_cupy.json"
    if not path.exists():
        return [
            "Not measured yet: no GPU run is published. `make gpu-check` runs it (its decode_step stage), as does "
            "`python benchmarks/decode_step.py --backend cupy`; either writes docs/data/decode_step_cupy.json, which "
            "this page then shows."
        ]
    data = json.loads(path.read_text())
    meta, eager = data["meta"], data["eager"]
    lines = [
        f"Measured on {meta.get('card') or meta['machine']}, {meta['date']}; command `{meta['command']}`. Per token: "
        "the fastest of interleaved rounds; bytes: what the allocator moved in one call.",
        "",
        "| placement | ms / token | x eager | H2D bytes / token | D2H bytes / token | equal to eager |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in data["rows"]:
        lines.append(
            f"| {row['variant']} | {row['token_s'] * 1e3:.3f} | {row['x_eager']:.2f} | "
            f"{row['bytes_per_token']['h2d']:,} | {row['bytes_per_token']['d2h']:,} | "
            f"{'yes' if row['ok'] else 'no'} ({row['max_abs_err']:.1e}) |"
        )
    lines.append(
        f"| eager PyTorch | {eager['token_s'] * 1e3:.3f} | 1.00 | {eager['bytes_per_token']['h2d']:,} | "
        f"{eager['bytes_per_token']['d2h']:,} | |"
    )
    return lines


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:  # cupy is installed as cupy-cuda13x / cupy-cuda12x
        names = [
            d.metadata["Name"]
            for d in importlib.metadata.distributions()
            if (d.metadata["Name"] or "").startswith(f"{package}-")
        ]
        return importlib.metadata.version(names[0]) if names else None


def _kept(data: dict[str, Any], names: list[str]) -> dict[str, Any] | None:
    """The committed file less the rows of `names`, when `names` re-measures only some models (None for all): its
    header stays, and a run of some models is recorded in its `updates` beside it."""
    if set(names) >= set(models.REAL_MODELS):
        return None
    kept: dict[str, Any] = json.loads(DATA[data["backend"]].read_text())
    kept["rows"] = [row for row in kept["rows"] if row["model"] not in names]
    updates = [{**u, "models": [m for m in u["models"] if m not in names]} for u in kept.get("updates", [])]
    kept["updates"] = [u for u in updates if u["models"]]
    return kept


def _merge(kept: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """The kept rows with the new ones, in `REAL_MODELS` order, and an update naming the new ones' run."""
    rows = sorted(kept["rows"] + data["rows"], key=lambda row: list(models.REAL_MODELS).index(row["model"]))
    measured = list(dict.fromkeys(row["model"] for row in data["rows"]))
    update = {k: data[k] for k in ("date", "command", "machine", "versions")} | {"models": measured}
    return {**kept, "rows": rows, "updates": [*kept["updates"], update]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="simulated", choices=sorted(DATA))
    parser.add_argument("--models", default=",".join(models.REAL_MODELS), help="comma list (default: all)")
    parser.add_argument("--no-executorch", action="store_true", help="skip ExecuTorch 1.5.1's own lowering")
    parser.add_argument("--render", action="store_true", help="only re-render the page from the committed data")
    args = parser.parse_args()
    if not args.render:
        names = [n.strip() for n in args.models.split(",") if n.strip()]
        unknown = sorted(set(names) - set(models.REAL_MODELS))
        if unknown:
            parser.error(f"unknown models {unknown}; choose from {', '.join(models.REAL_MODELS)}")
        with make_allocator(args.backend) as probe:  # what the backend is, asked of it, never of its name
            real_device = probe.capabilities.real_device
        if real_device:  # the device computes float32 as eager does on the CPU
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        warnings.filterwarnings("ignore", message="torchvision's compiled ops did not load")  # said in the page
        versions = {p: _version(p) for p in ("torch", "torchvision", "transformers", "cupy", "executorch", "devcopy")}
        versions = {p: v for p, v in versions.items() if v is not None}
        data = {
            "machine": f"{platform.machine()} {os.cpu_count()} cores, "
            f"{torch.cuda.get_device_name() if real_device else 'no GPU'}",
            "date": datetime.date.today().isoformat(),
            "backend": args.backend,
            "command": "python " + " ".join(["benchmarks/real_models.py", *sys.argv[1:]]),
            "python": sys.version.split()[0],
            "versions": versions,
            "rows": [],
        }
        kept = _kept(data, names) if DATA[args.backend].exists() else None
        for name in names:
            data["rows"] += model_rows(name, args.backend, not real_device and not args.no_executorch)
            DATA[args.backend].parent.mkdir(parents=True, exist_ok=True)
            DATA[args.backend].write_text(json.dumps(data if kept is None else _merge(kept, data), indent=1))
            PAGE.write_text(render())  # after every model: a crash keeps the rest
    PAGE.write_text(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
