"""Where one call's time goes, on the CUDA machine: a loaded Method with graph replay against the module captured in
one hand-written CUDA graph (benchmarks/call_overhead.py's reference), split into the graph replay alone (launch +
synchronize) and the host work around it, with the GPU kernels each side launches per call (torch.profiler on an
uncaptured call) and the host functions that cost most (cProfile). Writes docs/data/call_profile.json.

    python benchmarks/call_profile.py [--model transformer_block] [--calls 2000] [--out docs/data/call_profile.json]
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import pstats
import sys
from pathlib import Path

import torch

from devcopy_lib import emit, export_and_lower, load_method, make_allocator, place_devices, scoped_allocators
from devcopy_lib.bench.clocks import WallClock
from devcopy_lib.bench.harness import interleaved

sys.path.insert(0, str(Path(__file__).resolve().parent))
from call_overhead import model_cases, module_eager, module_graphed  # noqa: E402  (the same references)

DATA = Path(__file__).resolve().parents[1] / "docs" / "data"


def _kernels(fn, calls: int = 3) -> dict:
    """GPU kernels and memcpys one call of `fn` launches (torch.profiler, median call of `calls`), with their time."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    by_name: dict[str, list[float]] = {}
    for e in events:
        by_name.setdefault(e.name, []).append(e.device_time_total)
    return {
        "launches_per_call": len(events) / calls,
        "device_us_per_call": sum(e.device_time_total for e in events) / calls,
        "top": sorted(
            ({"name": n[:80], "count": len(v) / calls, "us": sum(v) / calls} for n, v in by_name.items()),
            key=lambda r: -r["us"],
        )[:12],
    }


def _host_profile(fn, calls: int) -> list[dict]:
    """The host functions one call spends most in (cProfile's own time, per call, top 15)."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    stats = pstats.Stats(profiler)
    rows = []
    for (path, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append(
            {
                "function": f"{Path(path).name}:{line}({name})",
                "calls_per_call": ncalls / calls,
                "own_us": tottime / calls * 1e6,
                "cum_us": cumtime / calls * 1e6,
            }
        )
    return sorted(rows, key=lambda r: -r["own_us"])[:15]


def _safely(fn):
    """`fn()`, or what went wrong: one failed measurement must not lose the others of a lent machine's run."""
    try:
        return fn()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="transformer_block")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", default=str(DATA / "call_profile.json"))
    args = parser.parse_args(argv)
    torch.set_grad_enabled(False)
    allocator = make_allocator("cupy")
    module, inputs = model_cases()[args.model]()
    module.eval()
    program = emit(place_devices(export_and_lower(module, inputs)))
    hand = module_graphed(module, inputs)
    eager = module_eager(module, True)
    with scoped_allocators(allocator), load_method(program) as method, load_method(program, capture=False) as plain:
        method(*inputs)  # the warm-up after which the graphs are recorded
        replays = [run for run in method._plan._runs if getattr(run, "__qualname__", "").startswith("_replay")]  # noqa: SLF001
        hand_graph = hand.graph

        def hand_replay() -> None:
            hand_graph.replay()
            torch.cuda.synchronize()

        def devcopy_replays() -> None:
            for run in replays:
                run()

        fns = {
            "devcopy call": lambda: method(*inputs),
            "devcopy replays only": devcopy_replays,
            "hand-written call": lambda: hand(*inputs),
            "hand-written replay only": hand_replay,
            "eager module": lambda: eager(*inputs),
        }
        times = {k: t.median for k, t in interleaved(fns, args.rounds, 200, WallClock(torch.cuda.synchronize)).items()}
        result = {
            "meta": {
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "device": torch.cuda.get_device_name(),
                "torch": torch.__version__,
                "command": "python " + " ".join(["benchmarks/call_profile.py", *(argv or sys.argv[1:])]),
            },
            "model": args.model,
            "graphs": method.capture["graphs"],
            "median_us": {k: v * 1e6 for k, v in times.items()},
            "host_us": {
                "devcopy": (times["devcopy call"] - times["devcopy replays only"]) * 1e6,
                "hand-written": (times["hand-written call"] - times["hand-written replay only"]) * 1e6,
            },
            "kernels": {
                "devcopy (uncaptured)": _safely(lambda: _kernels(lambda: plain(*inputs))),
                "devcopy (graph replay)": _safely(lambda: _kernels(lambda: method(*inputs))),
                "eager module": _safely(lambda: _kernels(lambda: eager(*inputs))),
                "hand-written CUDA graph": _safely(lambda: _kernels(lambda: hand(*inputs))),
            },
            "host_profile": _safely(lambda: _host_profile(lambda: method(*inputs), args.calls)),
        }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for k, v in result["median_us"].items():
        print(f"{k:26s} {v:8.1f} us")
    for k, v in result["host_us"].items():
        print(f"host work around the replay, {k}: {v:.1f} us")
    for k, v in result["kernels"].items():
        if "error" in v:
            print(f"{k}: {v['error']}")
            continue
        print(f"{k}: {v['launches_per_call']:.0f} GPU launches per call, {v['device_us_per_call']:.1f} us of GPU time")
        for row in v["top"]:
            print(f"    {row['count']:4.1f} x {row['us']:7.1f} us  {row['name']}")
    profile = result["host_profile"]
    for row in profile if isinstance(profile, list) else [profile]:
        own = f"{row['own_us']:7.2f} us own  {row['cum_us']:7.2f} us cum  {row['function']}" if "own_us" in row else row
        print(f"  {own}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
