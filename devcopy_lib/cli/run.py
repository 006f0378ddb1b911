"""`devcopy run MODEL`: place, emit, load and run a model in one runtime mode, and compare with eager PyTorch
(workflows.model.run_model; a `.pte`: workflows.program.run_program)."""

from __future__ import annotations

import argparse
import functools
from typing import TYPE_CHECKING, Any

from ..names import (
    DEFAULT_LIBS,
    DEVICE_RULES,
    LINKABLE_LIBS,
    MODES,
    PEER_COPY_LIB,
    DeviceRule,
    Direction,
    Mode,
    Strategy,
    format_bytes,
)
from . import exports, model_spec, pte
from .common import (
    Outcome,
    Parser,
    UsageError,
    add_backend,
    add_capture,
    add_json,
    backend_name,
    capture_option,
    count_type,
    linked_libs,
    split_list,
)
from .place import add_placement_args, placement_options, targets_in_flag_terms

if TYPE_CHECKING:
    from ..runtime.operator_registry import KernelLib

DEFAULT_ATEN_LIBS = ",".join(DEFAULT_LIBS[Mode.ATEN])
DEFAULT_PROFILE_CALLS = 10


def _libs(args: argparse.Namespace) -> list[KernelLib] | None:
    """The linked libs: the mode's default in portable mode, `--libs` with the device rule in ATen mode; the
    ATen options in portable mode, or a lib of the other mode, are UsageErrors."""
    if args.mode != Mode.ATEN:
        given = [
            option
            for option, value in (("--libs", args.aten_libs), ("--aten-device-rule", args.aten_device_rule))
            if value is not None
        ]
        if given:
            raise UsageError(
                f"{' and '.join(given)} only apply in ATen mode (--mode aten); portable mode links "
                f"{','.join(DEFAULT_LIBS[Mode.PORTABLE])}. Drop {' and '.join(given)} or add --mode aten."
            )
        return None
    aten_libs = DEFAULT_ATEN_LIBS if args.aten_libs is None else args.aten_libs
    names = split_list(aten_libs, "--libs")
    if args.strategy == Strategy.PEER and args.aten_libs is None:  # the default links what the strategy needs
        names.append(PEER_COPY_LIB)
    return linked_libs(names, LINKABLE_LIBS, Mode.ATEN, "--libs", args.aten_device_rule or DeviceRule.SEED)


def _collect(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON object of `devcopy run`: the model (workflows.model.run_model) or the .pte
    (workflows.program.run_program) run once per step in the requested mode on the requested backend."""
    from ..workflows.model import run_model
    from ..workflows.trial import RunOptions

    options = RunOptions(args.mode, _libs(args), capture_option(args), args.profile, args.trace, args.steps)
    backend = backend_name(args)
    if pte.is_pte(args.model):  # ExecuTorch's own program: read, not lowered
        if args.steps > 1:
            raise UsageError(
                f"--steps {args.steps} steps a model beside its eager module, and {args.model} is an ExecuTorch "
                "program with no eager module: drop --steps, or pass the model (a sample or file.py:factory)"
            )
        return pte.run(args, options, backend)
    placement = placement_options(args)
    module, inputs = model_spec.load(args.model)
    guard = functools.partial(model_spec.user_code, args.model)
    with targets_in_flag_terms():
        return run_model(module, inputs, placement, options, backend, args.model, guard)


def _render(result: dict[str, Any]) -> str:
    from ..workflows.program import RUNTIME_FIELD

    copies, arenas = result["copies_executed"], result["arena_bytes"]
    profile = []
    if "profile" in result:
        from ..bench.profile_view import markdown_table
        from ..names import basis_text

        profile = [
            f"  profile (median of the profiled calls; {basis_text(result['pricing'])}):",
            markdown_table(result["profile"]),
        ]
    return "\n".join(
        [
            f"{result['model']}: {'ok' if result['ok'] else 'MISMATCH'} ({result['mode']} mode, {result['backend']} "
            f"backend, {result['strategy']} placement{', resident buffers' if result.get('resident_buffers') else ''})",
            f"  max |devcopy - eager| = {result['max_abs_err']:.3g}"
            + (f" over {result['steps']} consecutive calls" if result.get("steps", 1) > 1 else "")  # a .pte runs once
            if result["max_abs_err"] is not None
            else "  max |devcopy - eager|: not a number (NaN where eager has none)",
            f"  copies executed: {copies[Direction.H2D]} H2D, {copies[Direction.D2H]} D2H; "
            f"by the caller: {result['caller_copies']}",
            "  arenas: " + ", ".join(f"{device} {format_bytes(nbytes)}" for device, nbytes in arenas.items()),
            f"  {result['capture']['line']}",
            *([f"  {result[RUNTIME_FIELD]['summary']}"] if RUNTIME_FIELD in result else []),  # a .pte's
            *profile,
            *exports.export_lines(result),
        ]
    )


# The capture refusal's way out, in the flags of `devcopy run` rather than load_method's arguments.
CAPTURE_FALLBACK_FLAGS = "leave out --capture to fall back where no step can be recorded, or pass --no-capture"


def _collect_in_flag_terms(args: argparse.Namespace) -> dict[str, Any]:
    """`_collect(args)`; a refused `--capture` is told in terms of the flags, not of load_method's `capture=`."""
    from ..runtime.capture import FALLBACK_HINT
    from ..runtime.failures import MethodError

    try:
        result = _collect(args)
    except MethodError as exc:
        if not str(exc).startswith("capture=True"):
            raise
        told = str(exc).replace("capture=True", "--capture", 1).replace(FALLBACK_HINT, CAPTURE_FALLBACK_FLAGS)
        raise type(exc)(exc.error, told) from None
    capture = result.get("capture")
    if isinstance(capture, dict) and capture.get("option") is False:
        capture["line"] = str(capture["line"]).replace("(capture=False)", "(--no-capture)")
    return result


def run(args: argparse.Namespace) -> Outcome:
    exports.check_trace(args, DEFAULT_PROFILE_CALLS)  # before any work
    result = _collect_in_flag_terms(args)
    return Outcome(result, _render, 0 if result["ok"] else 1)


def add_parser(subparsers: argparse._SubParsersAction[Parser]) -> None:
    parser = subparsers.add_parser("run", help="place, load and run a model in a runtime mode; compare with eager")
    add_placement_args(parser)
    parser.add_argument("--mode", default=Mode.PORTABLE, choices=MODES, help="runtime mode (default portable)")
    parser.add_argument(  # --libs, as on every subcommand that links libs; --aten-libs is its older name
        "--libs",
        "--aten-libs",
        dest="aten_libs",
        default=None,
        metavar="LIBS",
        help=f"ATen mode only: comma list of libs to link (default {DEFAULT_ATEN_LIBS}); alias --aten-libs",
    )
    parser.add_argument(
        "--aten-device-rule",
        default=None,
        choices=DEVICE_RULES,
        help="ATen mode only: the copy kernel's device (default seed): seed = op identity + current "
        "device, as ExecuTorch; tensor = the device the tensor carries",
    )
    parser.add_argument(
        "--profile",
        nargs="?",
        const=DEFAULT_PROFILE_CALLS,
        type=count_type(),
        default=0,
        metavar="N",
        help="time every instruction over N calls (default 10): JSON 'profile' rows with measured "
        "and (copies) cost-model predicted seconds",
    )
    parser.add_argument(
        "--steps",
        type=count_type(1, 1000),
        default=1,
        metavar="N",
        help="run N consecutive calls of one method beside the eager module, comparing each (default 1): state "
        "such as a KV cache carries over; a model with next_inputs(inputs, outputs) (a decode step) is fed its "
        "next token and position, any other its inputs again",
    )
    exports.add_run_exports(parser)
    add_capture(parser)
    add_backend(parser)
    add_json(parser)
    parser.set_defaults(handler=run)
