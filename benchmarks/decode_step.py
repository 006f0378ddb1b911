"""Per-token time and bytes of a Llama-shaped decode step (KV cache in buffers updated in place) under six
placements, against eager PyTorch; writes docs/data/decode_step_<backend>.json.

- `executorch`: ExecuTorch 1.5.1's placement: the cache lives on the host, is updated on the CPU and crosses to the
  attention delegates every token;
- `hoisted`: plus constant hoisting (values computed from weights alone, copied once at load);
- `resident`: plus resident buffers (placement/resident.py): the cache lives on the device, updated there in place;
- `resident + graphs`: the same program with graph replay of its device work (runtime/capture.py; CUDA only);
- `every op`, `every op + graphs`: resident, with every op of the step delegated instead of the default set, which
  leaves the attention mask and the rotary slices on the CPU (their activations cross per token); here only the token
  id, the position and the logits cross.

Every placement runs in ATen mode, captured only where its name says graphs. The reference is eager PyTorch on the
device: weights and cache on the GPU, the token id and position moved from the CPU, the logits back to the CPU. Bytes
per token are what the allocator moved between host and device in one call (the caller's inputs and outputs included),
and for eager the token id, the position and the logits. The goal (docs/real_models.md): resident + graphs <= 1.0x
eager per token, bytes per token = the token ids plus the logits (with every op delegated).

    python benchmarks/decode_step.py --backend simulated --small   # this machine: the tiny decode step, < 1 min
    python benchmarks/decode_step.py --backend cupy                # on the GPU: 8 layers, dim 2048, 2048 positions
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import platform
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

from devcopy_lib import (
    compare_outputs,
    export_program,
    load_method,
    lower,
    make_allocator,
    models,
    place_devices,
    scoped_allocators,
)
from devcopy_lib.bench.clocks import WallClock
from devcopy_lib.bench.harness import interleaved
from devcopy_lib.lowering.lower import model_ops
from devcopy_lib.models.extras import require

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs/data"
# A Llama-shaped step: 8 layers of Llama-2's 2048-wide shape (16 heads of 128, SwiGLU 5632), a 32000-token
# vocabulary, a static cache of 2048 positions: 2 x 8 x 2048 x 2048 x 4 B = 256 MiB of fp32 cache.
FULL = {
    "vocab_size": 32000,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "max_position_embeddings": 4096,
}
FULL_CACHE, FULL_PROMPT = 2048, 0
SMALL_CACHE, SMALL_PROMPT = 128, 16
# name -> (hoist_constants, resident_buffers, capture, every op delegated): the placements, each adding to the one
# before but the last two, which delegate every op of the step instead of the default set
VARIANTS = {
    "executorch": (False, False, False, False),
    "hoisted": (True, False, False, False),
    "resident": (True, True, False, False),
    "resident + graphs": (True, True, "auto", False),
    "every op": (True, True, False, True),
    "every op + graphs": (True, True, "auto", True),
}


def decode_step(small: bool) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], dict[str, Any]]:
    """(step, (token, position), config): the tiny decode step (`models.llama_decode_step`), or the Llama-shaped one
    with random weights and an empty cache (a decode step reads all positions of its static cache either way)."""
    if small:
        step, inputs = models.llama_decode_step(max_cache_len=SMALL_CACHE, prompt_len=SMALL_PROMPT)
        return step, inputs, {"model": "llama_decode_step", "max_cache_len": SMALL_CACHE}
    transformers = require("transformers", "the decode-step benchmark")  # offline, with the extra's install hint
    torch.manual_seed(0)
    config = transformers.LlamaConfig(use_cache=True, attn_implementation="eager", **FULL)
    model = transformers.LlamaForCausalLM(config).eval()
    step = models.LlamaDecodeStep(model, FULL_CACHE, cache="buffers").eval().requires_grad_(False)
    inputs = (torch.randint(0, FULL["vocab_size"], (1, 1)), torch.tensor([FULL_PROMPT]))
    return step, inputs, {"model": "llama-shaped decode step", "max_cache_len": FULL_CACHE, **FULL}


def eager_on_device(module: torch.nn.Module, cuda: bool) -> Any:
    """Eager PyTorch: on CUDA the module (weights and cache) on the GPU, inputs `.cuda()`, logits `.cpu()`."""
    if not cuda:
        return lambda *xs: [module(*xs)]
    moved = copy.deepcopy(module).cuda()
    return lambda *xs: [moved(*(x.cuda() for x in xs)).cpu()]


def _moved(allocator: Any) -> tuple[int, int]:
    stats = allocator.stats
    return stats.h2d_bytes, stats.d2h_bytes


def measure(backend: str, small: bool, rounds: int, calls: int) -> dict[str, Any]:
    started = time.perf_counter()
    module, inputs, config = decode_step(small)
    built = time.perf_counter()
    with torch.no_grad():
        exported = export_program(module, inputs)
        lowered = {False: lower(exported), True: lower(exported, model_ops(exported))}
    lowering_s = time.perf_counter() - built
    rows = []
    with make_allocator(backend) as allocator, scoped_allocators(allocator), torch.no_grad():
        cuda = allocator.capabilities.real_device
        eager = eager_on_device(copy.deepcopy(module), cuda)
        expected = eager(*inputs)
        methods, fns = {}, {"eager": partial(eager, *inputs)}
        try:
            for name, (hoist, resident, capture, every_op) in VARIANTS.items():
                if capture and not allocator.capabilities.graphs:
                    print(f"{name:18s} skipped: the {allocator.backend} backend has no CUDA graphs", flush=True)
                    continue
                placed = place_devices(lowered[every_op], hoist_constants=hoist, resident_buffers=resident)
                method = methods[name] = load_method(placed, "aten", capture=capture)
                before = _moved(allocator)
                ours = method(*inputs)  # the warm-up: after it graph replay records its graphs
                after = _moved(allocator)
                method(*inputs)
                again = _moved(allocator)
                ok, err = compare_outputs(ours, expected)
                report = placed.report
                rows.append(
                    {
                        "variant": name,
                        "ok": ok,
                        "max_abs_err": err,
                        "bytes_per_token": {"h2d": again[0] - after[0], "d2h": again[1] - after[1]},
                        "first_call_bytes": {"h2d": after[0] - before[0], "d2h": after[1] - before[1]},
                        "copies_per_token": report.copies,
                        "copy_bytes_by_role": report.copy_bytes_by_role,
                        "capture": {
                            k: method.capture[k] for k in ("option", "on", "graphs", "captured_steps", "steps")
                        },
                    }
                )
                fns[name] = partial(method, *inputs)
            clock = WallClock(allocator.synchronize)
            times = {name: t.fastest for name, t in interleaved(fns, rounds, calls, clock).items()}
        finally:
            for method in methods.values():
                method.close()
    token_bytes = sum(t.numel() * t.element_size() for t in inputs)
    logits_bytes = expected[0].numel() * expected[0].element_size()
    for row in rows:
        row["token_s"] = times[row["variant"]]
        row["x_eager"] = times[row["variant"]] / times["eager"]
        print(
            f"{row['variant']:18s} {row['token_s'] * 1e3:9.3f} ms/token ({row['x_eager']:.2f}x eager)  "
            f"H2D {row['bytes_per_token']['h2d']:>11,d} B  D2H {row['bytes_per_token']['d2h']:>9,d} B  "
            f"max |err| {row['max_abs_err']:.2g}",
            flush=True,
        )
    print(
        f"{'eager':18s} {times['eager'] * 1e3:9.3f} ms/token  H2D {token_bytes:>11,d} B  D2H {logits_bytes:>9,d} B",
        flush=True,
    )
    return {
        "backend": allocator.backend,
        "config": config,
        "dtype": "float32",
        "mode": "aten",
        "eager": {
            "token_s": times["eager"],
            "where": "cuda" if cuda else "cpu",
            "bytes_per_token": {"h2d": token_bytes, "d2h": logits_bytes},
        },
        "rows": rows,
        "goal": {
            "resident + graphs <= eager": "met"
            if any(r["variant"] == "resident + graphs" and r["x_eager"] <= 1.0 for r in rows)
            else "not met or not measured",
            "token ids + logits only": token_bytes + logits_bytes,
        },
        "build_s": built - started,
        "lowering_s": lowering_s,
        "total_s": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="auto", choices=("auto", "cupy", "simulated"))
    parser.add_argument("--small", action="store_true", help="the tiny decode step (this machine: < 1 min)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (the fastest is kept)")
    parser.add_argument("--calls", type=int, default=5, help="calls per function and round")
    parser.add_argument("--out", type=Path, default=None, help="default docs/data/decode_step_<backend>.json")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        parser.error(f"--rounds and --calls take a whole number >= 1, got {args.rounds} and {args.calls}")
    data = measure(args.backend, args.small, args.rounds, args.calls)
    data["meta"] = {
        "machine": platform.node(),
        "platform": platform.platform(),
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/decode_step.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
    }
    if data["eager"]["where"] == "cuda":  # a real device (the allocator's capabilities said so in measure)
        data["meta"]["card"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    out = args.out or DATA / f"decode_step_{data['backend']}.json"
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out} ({data['total_s']:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
