"""Run the copy sweep on the CUDA machine and write raw samples to docs/data/copy_bandwidth.json.

    python benchmarks/copy_bandwidth.py [--out docs/data/copy_bandwidth.json] [--sizes 4..1G] [--tune]
    python benchmarks/copy_bandwidth.py --simulated      # CPU only: docs/data/copy_simulated.json

`--tune` first times the staging pipeline's shapes (chunk, buffers, threads) on pageable memory and prints a table.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import platform
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from devcopy_lib.bench.harness import Policy, TextProgress, measure
from devcopy_lib.bench.measurement import median_of
from devcopy_lib.bench.sizes import parse_sizes
from devcopy_lib.bench.sweep import sweep

ROOT = Path(__file__).resolve().parents[1]


def versions() -> dict[str, Any]:
    out = {"python": platform.python_version()}
    for name in ("devcopy", "torch", "cupy-cuda13x", "numpy"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def gpu_info() -> str:
    try:
        return subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def tune(sizes: Any = (16 << 20, 64 << 20, 256 << 20)) -> list[dict[str, Any]]:
    """Median wall time of staged pageable copies for a few pipeline shapes."""
    import cupy

    from devcopy_lib.bench.clocks import WallClock
    from devcopy_lib.devices.copy_engine import CopyEngine, EngineConfig, MiB
    from devcopy_lib.devices.cupy_cuda import CupyTransport

    transport, clock, rows = CupyTransport(), WallClock(cupy.cuda.runtime.deviceSynchronize), []
    for n in sizes:
        host, dev = np.full(n, 7, np.uint8), cupy.empty(n, np.uint8)
        for chunk, low_kib, buffers, threads in [
            (8, 512, 3, 8),
            (16, 512, 3, 8),
            (4, 512, 3, 8),
            (8, 512, 3, 12),
            (8, 512, 2, 6),
            (8, 256, 4, 8),
        ]:
            engine = CopyEngine(transport, EngineConfig(chunk * MiB, low_kib << 10, buffers, threads))
            for direction, fn in (
                ("h2d", partial(engine.h2d, dev.data.ptr, host.ctypes.data, n)),
                ("d2h", partial(engine.d2h, host.ctypes.data, dev.data.ptr, n)),
            ):
                t = median_of(measure(fn, clock, Policy(warmup=1, min_samples=5, max_samples=8)))
                rows.append(
                    {
                        "bytes": n,
                        "direction": direction,
                        "chunk_MiB": chunk,
                        "min_chunk_KiB": low_kib,
                        "buffers": buffers,
                        "threads": threads,
                        "gbps": round(n / t / 1e9, 2),
                    }
                )
                print(rows[-1], flush=True)
            engine.close()
    return rows


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="default: docs/data/copy_bandwidth.json (copy_simulated.json)")
    parser.add_argument("--simulated", action="store_true", help="sweep the simulated backend (no GPU)")
    parser.add_argument("--sizes", default=None, help="e.g. 4..1G or 4K,64M (default: 4 B .. 1 GiB in 4x steps)")
    parser.add_argument("--tune", action="store_true")
    args = parser.parse_args(argv)
    backend = "simulated" if args.simulated else "cupy"
    out = args.out or str(ROOT / "docs/data" / ("copy_simulated.json" if args.simulated else "copy_bandwidth.json"))
    tuning = tune() if args.tune else None
    started = time.time()
    result = sweep(backend, sizes=parse_sizes(args.sizes) if args.sizes else None, progress=TextProgress())
    result.meta.update(
        {
            "machine": f"{platform.node()} ({platform.machine()}, {platform.processor() or 'cpu'})",
            "gpu": "none (simulated)" if args.simulated else gpu_info(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python " + " ".join(["benchmarks/copy_bandwidth.py", *(argv or sys.argv[1:])]),
            "versions": versions(),
            "sweep_seconds": round(time.time() - started, 1),
        }
    )
    if tuning:
        result.meta["tuning"] = tuning
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result.to_dict(), indent=None, separators=(",", ":")) + "\n")
    for warning in result.warnings:
        print("warning:", warning)
    print(f"wrote {out}: {len(result.measurements)} measurements in {result.meta['sweep_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
