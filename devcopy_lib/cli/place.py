"""`devcopy place MODEL`: lower a model, place devices, and print the PlacementReport (optionally beside
ExecuTorch's own counts). The placement options are shared with `devcopy run` through `add_placement_args`."""
from __future__ import annotations

import argparse
from typing import Any

from .common import UsageError, add_json, emit, split_list

STRATEGIES = ("executorch", "dedupe")
PARTITIONS = ("capability", "per_node")
DEMO_BACKEND_OPS = ("add.Tensor", "mm.default", "sin.default")  # what ExecuTorch's demo backend lowers


def add_placement_args(parser: argparse.ArgumentParser) -> None:
    """MODEL and the options that decide delegates and copies (also used by `devcopy run`)."""
    parser.add_argument("model", metavar="MODEL", help="a sample name (add, mlp, ...) or path/to/file.py:factory")
    parser.add_argument("--delegate", metavar="OPS", default=None,
                        help="comma list of ATen overloads to delegate (default: DEFAULT_DELEGATE_OPS)")
    parser.add_argument("--target", default="cuda:0", help="the delegates' device (default cuda:0)")
    parser.add_argument("--strategy", default="executorch", choices=STRATEGIES,
                        help="executorch: PropagateDevicePass; dedupe: one H2D per value and device")
    parser.add_argument("--partition", default="capability", choices=PARTITIONS,
                        help="capability: torch.fx's partitioner groups ops; per_node: one delegate per op")
    parser.add_argument("--skip-h2d-inputs", action="store_true",
                        help="graph inputs feeding a delegate are passed on the device (skip_h2d_for_method_inputs)")
    parser.add_argument("--skip-d2h-outputs", action="store_true",
                        help="delegate outputs that only the graph returns stay on the device "
                             "(skip_d2h_for_method_outputs)")


def lower_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """`export_and_lower` keyword arguments from parsed options; a bad op or device is a UsageError."""
    from ..devices import Device
    from ..passes.ops import validate_overloads

    ops = split_list(args.delegate) if args.delegate is not None else None
    try:
        ops = validate_overloads(ops) if ops is not None else None
        target = str(Device.parse(args.target))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return {"delegate_ops": ops, "target_device": target, "partition": args.partition}


def placement_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """`place_devices` keyword arguments from parsed options."""
    return {"strategy": args.strategy, "skip_h2d_for_method_inputs": args.skip_h2d_inputs,
            "skip_d2h_for_method_outputs": args.skip_d2h_outputs}


def load(args: argparse.Namespace):
    """The model's `(module, example_inputs)`; an unknown model is a UsageError."""
    from ..models import load_model

    try:
        return load_model(args.model)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def lower_and_place(args: argparse.Namespace):
    """`(module, example_inputs, placed)` for the parsed placement options."""
    from ..passes.lower import export_and_lower
    from ..passes.placement import place_devices

    lowering = lower_kwargs(args)
    module, inputs = load(args)
    placed = place_devices(export_and_lower(module, inputs, **lowering), **placement_kwargs(args))
    return module, inputs, placed


def _executorch(args, module, inputs, placed) -> dict[str, Any]:
    """ExecuTorch's own counts for the same ops and partitioning, or why there are none."""
    from ..passes import executorch_reference

    if not executorch_reference.available():
        return {"available": False, "error": "ExecuTorch is not installed: pip install -e '.[reference]'"}
    note = None if args.strategy == "executorch" else "ExecuTorch has no dedupe: these are PropagateDevicePass's counts"
    try:
        counts = executorch_reference.executorch_counts(
            module, inputs, placed.delegate_ops, target_device=args.target, partition=args.partition,
            skip_h2d_for_method_inputs=args.skip_h2d_inputs, skip_d2h_for_method_outputs=args.skip_d2h_outputs)
    except Exception as exc:  # ExecuTorch refusing the program is a result to show, not a crash
        return {"available": True, "error": f"{type(exc).__name__}: {exc}. (Its BackendWithCompilerDemo accepts "
                                             f"only {', '.join(DEMO_BACKEND_OPS)}: try --delegate "
                                             f"{','.join(DEMO_BACKEND_OPS)}.)"}
    return {"available": True, "delegates": counts["delegates"], "copies": {"h2d": counts["h2d"], "d2h": counts["d2h"]},
            **({"note": note} if note else {})}


def collect(args: argparse.Namespace) -> dict[str, Any]:
    module, inputs, placed = lower_and_place(args)
    result = {"ok": True, "model": args.model, "target": args.target, **placed.report.to_dict()}
    if args.compare_executorch:
        result["executorch"] = _executorch(args, module, inputs, placed)
    return result


def _render(result: dict[str, Any]) -> str:
    lines = [f"{result['model']}: {result['delegates']} delegate(s) on {result['target']}, strategy "
             f"{result['strategy']}; delegate ops: {', '.join(result['delegate_ops'])}"]
    width = max(len(n["name"]) for n in result["nodes"])
    for node in result["nodes"]:
        lines.append(f"  {node['name']:<{width}}  {node['kind']:<8} {node['device']:<7} {node['bytes']:>8} B  "
                     f"{node['reason']}")
    copies, nbytes = result["copies"], result["copy_bytes"]
    lines.append(f"copies: {copies['h2d']} H2D ({nbytes['h2d']} B), {copies['d2h']} D2H ({nbytes['d2h']} B) per "
                 f"run; constants {result['constant_bytes']} B loaded once; device peak {result['device_peak_bytes']} B")
    for other in result["comparison"]:
        if "error" in other:
            lines.append(f"vs {other['strategy']}: refused ({other['error']})")
            continue
        saved = other["copies_saved"]
        lines.append(f"vs {other['strategy']}: {saved['h2d']} H2D / {saved['d2h']} D2H saved, "
                     f"{sum(other['bytes_saved'].values())} B saved, {other['extra_device_bytes']} B more device peak")
    if "executorch" in result:
        et = result["executorch"]
        lines.append(f"ExecuTorch: {et['error']}" if "error" in et else
                     f"ExecuTorch: {et['delegates']} delegate(s), {et['copies']['h2d']} H2D, {et['copies']['d2h']} D2H")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    emit(collect(args), args.json, _render)
    return 0


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("place", help="lower a model and place devices: delegates, copies, bytes")
    add_placement_args(parser)
    parser.add_argument("--compare-executorch", action="store_true",
                        help="also lower with ExecuTorch 1.5.1 and show its own counts (the `reference` extra)")
    add_json(parser)
    parser.set_defaults(handler=run)
