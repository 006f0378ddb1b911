"""Peer copy (cuda:0 -> cuda:1 directly, cudaMemcpyPeer through `copy_device_to_device`) against the host hop (D2H
into pinned staging memory, then H2D) across sizes; then `(a + b) + c` on cuda:0 and cuda:1 end to end under each
placement strategy. Writes docs/data/peer_copy.json (machine, date, backend, raw samples).

Needs two GPUs with CuPy: `.venv/bin/python benchmarks/peer_copy.py --backend cupy` on nvidia-h200-x2 (not yet run:
that machine was not lent when this was written). `--backend simulated` runs the same logic on host memory, labelled
simulated (what the tests exercise); its times say nothing about hardware.
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

from devcopy_lib.bench.clocks import WallClock
from devcopy_lib.bench.harness import repeat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs/data/peer_copy.json")
SIZES = [1 << p for p in range(12, 29, 2)]  # 4 KiB .. 256 MiB


def _host_hop(allocator: Any, dst: Any, staging: Any, src: Any, nbytes: int) -> None:
    """cuda:0 -> cuda:1 through the host: D2H into pinned staging, then H2D."""
    allocator.copy_device_to_host(staging, src, nbytes, 0)
    allocator.copy_host_to_device(dst, staging, nbytes, 1)


def _timed_calls(allocator: Any, fn: Any, repeats: int) -> Any:
    """`bench.harness.repeat` on the wall clock with a device synchronize either side, after one warm-up call."""
    return repeat(fn, repeats, (WallClock(allocator.synchronize),), warmup=1)


def copy_rows(allocator: Any, sizes: Any, repeats: int) -> list[dict[str, Any]]:
    """One row per size and method: `peer` (direct) and `host_hop` (D2H + H2D through pinned staging)."""
    rows = []
    for nbytes in sizes:
        src, dst = allocator.allocate(nbytes, 0), allocator.allocate(nbytes, 1)
        staging = allocator.allocate_host(nbytes)
        methods = {"host_hop": partial(_host_hop, allocator, dst, staging, src, nbytes)}
        if allocator.can_access_peer(0, 1):
            methods["peer"] = partial(allocator.copy_device_to_device, dst, src, nbytes)
        for method, fn in methods.items():
            wall = _timed_calls(allocator, fn, repeats)[1]["wall"]
            rows.append(
                {
                    "method": method,
                    "bytes": nbytes,
                    "median_s": wall.median,
                    "gbps": nbytes / wall.median / 1e9,
                    "samples": list(wall.samples),
                }
            )
        allocator.deallocate(src)
        allocator.deallocate(dst)
    return rows


def program_rows(allocator: Any, repeats: int, size: int) -> list[dict[str, Any]]:
    """`(a + b) + c`, delegates on cuda:0 and cuda:1, per strategy: run time and the copies the allocator saw."""
    import torch

    from devcopy_lib import export_and_lower, load_method, place_devices, scoped_allocators

    class AddAdd(torch.nn.Module):
        def forward(self, a: Any, b: Any, c: Any) -> Any:
            return (a + b) + c

    inputs = tuple(torch.randn(size, size) for _ in range(3))
    lowered = export_and_lower(
        AddAdd(), inputs, partition="per_node", target_device={"delegate_0": "cuda:0", "delegate_1": "cuda:1"}
    )
    rows = []
    with scoped_allocators(allocator):
        for strategy in ("executorch", "dedupe", "peer"):
            with load_method(place_devices(lowered, strategy=strategy)) as method:
                before = (allocator.stats.h2d_count, allocator.stats.d2h_count, allocator.stats.d2d_count)
                wall = _timed_calls(allocator, partial(method, *inputs), repeats)[1]["wall"]
                after = (allocator.stats.h2d_count, allocator.stats.d2h_count, allocator.stats.d2d_count)
                torch.testing.assert_close(method(*inputs)[0], AddAdd()(*inputs))
            runs = repeats + 1
            rows.append(
                {
                    "strategy": strategy,
                    "elements": size * size,
                    "median_s": wall.median,
                    "samples": list(wall.samples),
                    "per_run": dict(
                        zip(
                            ("h2d", "d2h", "d2d"),
                            ((a - b) // runs for a, b in zip(after, before, strict=True)),
                            strict=True,
                        )
                    ),
                }
            )
    return rows


def main(argv: Any = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cupy", choices=("cupy", "simulated"))
    parser.add_argument("--sizes", type=int, nargs="*", default=SIZES, help="bytes per copy")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--program-size", type=int, default=1024, help="side of the square inputs of (a + b) + c")
    parser.add_argument("--out", default=DATA)
    args = parser.parse_args(argv)
    from devcopy_lib import make_allocator

    allocator = make_allocator(args.backend)
    count = allocator.device_count()
    if count is not None and count < 2:
        sys.exit(f"peer_copy needs 2 GPUs; {allocator.backend} sees {count}. Run it on nvidia-h200-x2.")
    result = {
        "backend": allocator.backend,
        "simulated": not allocator.capabilities.real_device,
        "devices": allocator.describe_devices(),
        "peer_access_0_1": allocator.can_access_peer(0, 1),
        "machine": platform.node(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([os.path.basename(sys.argv[0]), *(argv if argv is not None else sys.argv[1:])]),
        "copies": copy_rows(allocator, args.sizes, args.repeats),
        "program": program_rows(allocator, args.repeats, args.program_size),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
