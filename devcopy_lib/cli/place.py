"""`devcopy place MODEL`: lower a model, place devices (workflows.model.place_model), and print the
PlacementReport (optionally beside ExecuTorch's own counts). The placement options are shared with `devcopy run`
through `add_placement_args` and `placement_options`."""

from __future__ import annotations

import argparse
import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..names import PARTITIONS, STRATEGIES, Direction, Partition, Strategy, device_string, format_bytes, format_seconds
from . import exports, model_spec, pte
from .common import Outcome, Parser, UsageError, add_backend, add_json, backend_name, split_list

if TYPE_CHECKING:
    from ..workflows.model import PlacementOptions

# The names MODEL takes, for --help without importing torch (tests/cli/test_place.py keeps them equal to
# models.MODELS and models.REAL_MODELS).
SAMPLE_MODELS = (
    "add",
    "mlp",
    "residual",
    "shared_input",
    "back_to_back",
    "cpu_between",
    "output_and_cpu_user",
    "transformer_block",
)
REAL_MODELS = (
    "resnet18",
    "mobilenet_v3_small",
    "gpt2_2l",
    "gpt2_12l",
    "bert_small",
    "llama_tiny",
    "llama_decode_step",
    "llama_decode_step_functional",
    "mistral_tiny",
    "qwen2_tiny",
    "phi_tiny",
    "gpt_neox_tiny",
    "mixtral_tiny",
    "t5_encoder_tiny",
    "distilbert_tiny",
    "vit_tiny",
    "whisper_encoder_tiny",
    "lstm_tagger",
    "convnext_micro",
)


def add_placement_args(parser: argparse.ArgumentParser) -> None:
    """MODEL and the options that decide delegates and copies (also used by `devcopy run`)."""
    parser.add_argument(
        "model",
        metavar="MODEL",
        help=f"a sample ({', '.join(SAMPLE_MODELS)}), a real model (the models extra: {', '.join(REAL_MODELS)}; "
        "docs/real_models.md), path/to/file.py:factory (this executes the file: factory() returns "
        "(module, example_inputs)) or an ExecuTorch program path/to/file.pte",
    )
    parser.add_argument(
        "--delegate",
        metavar="OPS",
        default=None,
        help="comma list of ATen overloads to delegate (default: DEFAULT_DELEGATE_OPS)",
    )
    parser.add_argument(
        "--target",
        action="append",
        default=None,
        metavar="[OP=]DEVICE",
        help="the delegates' device (default cuda:0); OP=DEVICE (repeatable) puts the delegate of an op "
        "overload or a delegate name there: --target add.Tensor=cuda:1",
    )
    parser.add_argument(
        "--strategy",
        default=Strategy.EXECUTORCH,
        choices=STRATEGIES,
        help="executorch: PropagateDevicePass; dedupe: one H2D per value and device; peer: a direct "
        "device-to-device copy instead of a host hop where peer access exists",
    )
    parser.add_argument(
        "--partition",
        default=Partition.CAPABILITY,
        choices=PARTITIONS,
        help="capability: the partitions torch.fx's partitioner makes, found with reachability bitsets; "
        "fx: torch.fx's own; per_node: one delegate per op",
    )
    parser.add_argument(
        "--skip-h2d-inputs",
        action="store_true",
        help="graph inputs feeding a delegate are passed on the device (skip_h2d_for_method_inputs)",
    )
    parser.add_argument(
        "--skip-d2h-outputs",
        action="store_true",
        help="delegate outputs that only the graph returns stay on the device (skip_d2h_for_method_outputs)",
    )
    parser.add_argument(
        "--hoist-constants",
        action="store_true",
        help="compute values derived only from parameters/buffers/constants once at load and keep "
        "them on the device: no per-call copy for them (beyond ExecuTorch)",
    )
    parser.add_argument(
        "--resident-buffers",
        action="store_true",
        help="keep mutable buffers (a KV cache) on the device their delegates run on: copied there once at load, "
        "updated on the device, never copied per call (beyond ExecuTorch)",
    )


def parse_targets(values: list[str] | None) -> tuple[str, dict[str, str]]:
    """`--target` values -> (default device, {op overload or delegate name: device}); a bad form, or one device or
    OP given two different devices, is a UsageError."""
    from ..devices import Device

    default: str | None = None
    per_key: dict[str, str] = {}
    for value in values or ():
        key, sep, device = value.rpartition("=")
        key = key.strip()
        if sep and not key:
            raise UsageError(
                f"--target {value!r}: nothing before '='. Write OP=DEVICE (--target add.Tensor=cuda:1), "
                f"a delegate name (--target delegate_1=cuda:1), or a plain DEVICE (--target cuda:0)."
            )
        try:
            parsed = str(Device.parse(device))
        except ValueError as exc:
            raise UsageError(f"--target {value!r}: {exc}") from None
        if key in per_key and per_key[key] != parsed:
            raise UsageError(f"--target {key} is given twice ({per_key[key]} and {parsed}); give each OP one device.")
        if not sep and default not in (None, parsed):
            raise UsageError(
                f"--target is given two default devices ({default} and {parsed}); give one, and "
                "OP=DEVICE for the delegates that go elsewhere."
            )
        if sep:
            per_key[key] = parsed
        else:
            default = parsed
    return default or "cuda:0", per_key


def _check_op_targets(per_key: dict[str, str], ops: Sequence[str] | None) -> None:
    """An OP target (`--target add.Tensor=cuda:1`) for an op that is not delegated is a UsageError."""
    from ..lowering.lower import DEFAULT_DELEGATE_OPS
    from ..lowering.ops import validate_overloads

    ops = DEFAULT_DELEGATE_OPS if ops is None else ops
    named_ops = validate_overloads([k for k in per_key if "." in k], "--target op")  # others name delegates
    stray = [op for op in named_ops if op not in ops]
    if stray:
        raise UsageError(
            f"--target {', '.join(stray)}: not a delegated op, so no delegate would go there. "
            f"Delegated ops: {', '.join(ops)}; add it with --delegate."
        )


@contextlib.contextmanager
def targets_in_flag_terms() -> Iterator[None]:
    """The library's refusal of a target (a delegate the lowering did not make, a device the backend lacks) told
    in terms of --target."""
    from ..workflows.model import NoSuchDelegate, NoSuchDevice

    try:
        yield
    except NoSuchDelegate as exc:
        raise UsageError(
            f"--target {', '.join(exc.names)}: no such delegate. This lowering made: "
            f"{', '.join(exc.made) or 'no delegate'} (see `devcopy place`)."
        ) from None
    except NoSuchDevice as exc:
        raise UsageError(
            f"--target {', '.join(exc.devices)}: the {exc.backend} backend sees {exc.count} device(s) "
            f"({device_string(0)}..{device_string(exc.count - 1)}); target one of those"
        ) from None


def placement_options(args: argparse.Namespace) -> PlacementOptions:
    """The placement options of parsed flags (also `devcopy run`'s); a bad op or device is a UsageError."""
    from ..lowering.ops import validate_overloads
    from ..workflows.model import PlacementOptions

    given = split_list(args.delegate, "--delegate") if args.delegate is not None else None
    default, per_key = parse_targets(args.target)
    try:
        ops = validate_overloads(given) if given is not None else None
        _check_op_targets(per_key, ops)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return PlacementOptions(
        delegate_ops=ops,
        target=default,
        targets=per_key,
        partition=args.partition,
        strategy=args.strategy,
        skip_h2d_for_method_inputs=args.skip_h2d_inputs,
        skip_d2h_for_method_outputs=args.skip_d2h_outputs,
        hoist_constants=args.hoist_constants,
        resident_buffers=args.resident_buffers,
    )


def _copies_line(result: dict[str, Any]) -> str:
    """Copies per call with their bytes and predicted time, constants, mutable buffers, device peak; units
    throughout."""
    from ..placement.report import loaded_text

    copies, nbytes = result["copies"], result["copy_bytes"]
    parts = [f"{copies[d]} {d.upper()} ({format_bytes(nbytes[d])})" for d in (Direction.H2D, Direction.D2H)]
    if Direction.D2D in copies:
        parts.append(f"{copies[Direction.D2D]} D2D ({format_bytes(nbytes[Direction.D2D])} device to device)")
    predicted = result["predicted_copy_s"]
    return (
        f"copies: {', '.join(parts)} per call"
        + (f", predicted {format_seconds(predicted)}" if predicted else "")
        + f"; {loaded_text(result['constant_bytes'], result['buffers'])}; device peak "
        f"{format_bytes(result['device_peak_bytes'])}"
    )


def _render(result: dict[str, Any]) -> str:
    from ..placement.branches import control_flow_text

    # the report's one wording (placement loads only once a model is placed)
    from ..placement.report import placements_text, roles_text
    from ..workflows.model import EXECUTORCH_FIELD, SAVED_PTE_FIELD

    devices = result["delegate_devices"]
    if len(devices) <= 3:
        where = ", ".join(f"{name} on {device}" for name, device in devices.items())
    else:  # a real model's dozens of delegates: how many on each device
        where = ", ".join(f"{list(devices.values()).count(d)} on {d}" for d in dict.fromkeys(devices.values()))
    own = result["model_delegate_ops"]
    lines = [
        f"{result['model']}: {result['delegates']} delegate(s) ({where or 'none'}), strategy {result['strategy']}; "
        f"delegated ops of this model: {', '.join(own) or 'none'} ({len(own)} of the {len(result['delegate_ops'])} "
        "that may be delegated)"
    ]
    width = max(len(n["name"]) for n in result["nodes"])
    for node in result["nodes"]:
        lines.append(
            f"  {node['name']:<{width}}  {node['kind']:<8} {node['device']:<7} {format_bytes(node['bytes']):>10} "
            f"{format_seconds(node['predicted_s']):>9}  {node['reason']}"
        )
    lines.append(_copies_line(result))
    lines.append(f"bytes by role {roles_text(result['copy_bytes_by_role'])}")
    lines.extend(placements_text(result["bytes_by_placement"]))
    lines.extend(f"buffer {b['name']} ({format_bytes(b['bytes'])}): {b['reason']}" for b in result["buffers"])
    lines.extend(control_flow_text(result.get("control_flow", ())))
    if result["pricing"]:
        from ..names import basis_text

        lines.append(basis_text(result["pricing"]))
    for pair in result["cross_device"]:
        saves = pair["direct_saves"]
        lines.append(
            f"{pair['value']} {pair['src']} -> {pair['dst']} ({format_bytes(pair['bytes'])}): {pair['chosen']}"
            f"{'' if pair['peer_access'] else ' (no peer access)'}; a direct copy saves {saves['copies']} "
            f"copies, {format_bytes(saves['host_bytes'])} over PCIe"
        )
    for other in result["comparison"]:
        lines.append(other["savings"] if "error" not in other else f"{other['strategy']}: refused ({other['error']})")
    lines.extend(f"suggestion: {text}" for text in result["suggestions"])
    if EXECUTORCH_FIELD in result:
        et = result[EXECUTORCH_FIELD]
        lines.append(
            f"ExecuTorch: {et['error']}"
            if "error" in et
            else f"ExecuTorch: {et['delegates']} delegate(s), {et['copies'][Direction.H2D]} H2D, "
            f"{et['copies'][Direction.D2H]} D2H"
        )
    if SAVED_PTE_FIELD in result:
        saved = result[SAVED_PTE_FIELD]
        lines.append(
            f"wrote {saved['path']} ({format_bytes(saved['bytes'])}): ExecuTorch's program, "
            f"operators {saved['operators']}"
        )
    lines.extend(exports.export_lines(result))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> Outcome:
    if pte.is_pte(args.model):  # ExecuTorch's own program: read, not lowered
        return pte.place(args)
    from ..workflows.model import place_model

    diff = exports.diff_target(args, placement_options)  # checks --report and the diff's options before any work
    pte.check_save(args)
    backend = backend_name(args)
    options = placement_options(args)
    module, inputs = model_spec.load(args.model)
    with targets_in_flag_terms():
        result = place_model(
            module,
            inputs,
            options,
            backend,
            args.model,
            functools.partial(model_spec.user_code, args.model),
            args.compare_executorch,
            args.save_pte,
            diff,
            args.report,
        )
    return Outcome(result, _render)


def add_parser(subparsers: argparse._SubParsersAction[Parser]) -> None:
    parser = subparsers.add_parser("place", help="lower a model and place devices: delegates, copies, bytes")
    add_placement_args(parser)
    parser.add_argument(
        "--compare-executorch",
        action="store_true",
        help="also lower with ExecuTorch 1.5.1 and show its own counts (the `reference` extra)",
    )
    parser.add_argument(
        "--save-pte",
        metavar="PATH",
        default=None,
        help="also write the .pte ExecuTorch's own pipeline makes with devcopy's backend (the `reference` extra)",
    )
    add_backend(parser)  # the backend whose host memory kind copies are priced for
    exports.add_place_exports(parser)
    add_json(parser)
    parser.set_defaults(handler=run)
