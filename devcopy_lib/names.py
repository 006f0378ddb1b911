"""The names every layer shares, in one torch-free module: what a user may choose, and the runtime's fixed names.

Each vocabulary is a `Name` enum, a `str` whose members equal, hash, print and serialize (JSON values and keys) as
their values, so a user's plain `mode="portable"` and `Mode.PORTABLE` are interchangeable. The tuples (`MODES`,
`STRATEGIES`, ...) are derived from the enums: each is the full list of valid choices, in the order help texts show
them; the CLI offers exactly these (tests/cli/test_choices.py keeps it so). tests/test_names.py refuses a literal of
these vocabularies anywhere else in the library. docs/design.md §7 lists them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Name(str, Enum):
    """A name of the shared vocabulary: a `str` that prints, formats, reprs and serializes as its value on every
    Python, so messages that quote a name (`{mode!r}`) read the same whether it came from a user or from names."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return str.__repr__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


class Strategy(Name):
    """Placement strategies: ExecuTorch's PropagateDevicePass, one H2D per (value, device), direct device copies."""

    EXECUTORCH = "executorch"
    DEDUPE = "dedupe"
    PEER = "peer"


class Partition(Name):
    """How lowering groups supported nodes into delegates: devcopy's capability partitioner (O(N(N+E)/64) words of
    bitsets, lowering/partition.py), torch.fx's own CapabilityBasedPartitioner, or one delegate per supported node."""

    CAPABILITY = "capability"
    FX = "fx"
    PER_NODE = "per_node"


class Mode(Name):
    """Runtime modes: the portable runtime (devcopy's tensors) or the ATen-mode runtime (torch tensors)."""

    PORTABLE = "portable"
    ATEN = "aten"


class Lib(Name):
    """The kernel libs a method may link: ExecuTorch's three, and devcopy's peer-copy lib."""

    PORTABLE = "portable"
    NATIVE = "native"
    DEVICE_COPY = "device_copy_ops_aten_lib"
    PEER_COPY = "peer_copy_ops_aten_lib"


class DeviceRule(Name):
    """Where the ATen-mode copy kernel takes its device: ExecuTorch's op identity + current device, or the tensor."""

    SEED = "seed"
    TENSOR = "tensor"


class Backend(Name):
    """Device backends: CuPy on a real GPU, or the simulated accelerator in host memory."""

    CUPY = "cupy"
    SIMULATED = "simulated"


class Direction(Name):
    """The direction of a device copy; also the key of every per-direction count in reports and JSON."""

    H2D = "h2d"
    D2H = "d2h"
    D2D = "d2d"


class CopyRole(Name):
    """What a copy moves, for the report's per-call byte split: program state carried from call to call (a KV
    cache: mutated buffers, inputs written back or returned updated), values computed only from weights and constants,
    or activations (everything else)."""

    CACHE = "cache"
    WEIGHTS = "weights"
    ACTIVATIONS = "activations"


class ErrorKind(Name):
    """What went wrong, in one vocabulary: the CLI's JSON `error.kind` and every devcopy exception's `kind` attribute
    (docs/design.md §8). A runtime failure's ExecuTorch error code travels beside it (`error`)."""

    USAGE = "usage"
    USER_CODE = "user_code"
    UNSUPPORTED_MODEL = "unsupported_model"
    PLACEMENT = "placement"
    MISSING_OPERATOR = "missing_operator"
    REGISTRATION = "registration"
    LOAD = "load"
    EXECUTION = "execution"
    DEVICE = "device"
    EXECUTORCH_REFUSED = "executorch_refused"
    INTERRUPTED = "interrupted"
    INTERNAL = "internal"


@dataclass(frozen=True)
class CopyOp:
    """One device-copy op: its direction, its runtime operator name, how messages word it, and its kernel's name
    (the last `::` part of a YAML `kernel_name`, the same in the portable and ATen-mode libs)."""

    direction: Direction
    name: str
    words: str
    kernel_name: str

    @property
    def schema_name(self) -> str:
        """The op name without its namespace, as the YAML schema and `torch.ops.et_copy` spell it: `_h2d_copy.out`."""
        return self.name.partition("::")[2]


# The device-copy ops by direction: ExecuTorch's H2D and D2H, and devcopy's D2D (the `peer` strategy's).
COPY_OP = {
    Direction.H2D: CopyOp(Direction.H2D, "et_copy::_h2d_copy.out", "host->device", "_h2d_copy_out"),
    Direction.D2H: CopyOp(Direction.D2H, "et_copy::_d2h_copy.out", "device->host", "_d2h_copy_out"),
    Direction.D2D: CopyOp(Direction.D2D, "et_copy::_d2d_copy.out", "device->device", "_d2d_copy_out"),
}
COPY_OP_BY_NAME = {op.name: op for op in COPY_OP.values()}

# The choices as plain strings, derived from the enums: for callers that iterate, test membership or print them.
STRATEGIES = tuple(member.value for member in Strategy)
PARTITIONS = tuple(member.value for member in Partition)
MODES = tuple(member.value for member in Mode)
DEVICE_RULES = tuple(member.value for member in DeviceRule)
BACKENDS = tuple(member.value for member in Backend)
AUTO_BACKEND = "auto"  # wherever a backend is chosen: the best one available (select_backend)
BACKEND_CHOICES = (AUTO_BACKEND, *BACKENDS)
ERROR_KINDS = tuple(member.value for member in ErrorKind)
DIRECTIONS = tuple(member.value for member in Direction)
COPY_ROLES = tuple(member.value for member in CopyRole)

PORTABLE_LIB, NATIVE_LIB, DEVICE_COPY_LIB, PEER_COPY_LIB = Lib.PORTABLE, Lib.NATIVE, Lib.DEVICE_COPY, Lib.PEER_COPY
LINKABLE_LIBS = tuple(member.value for member in Lib)
LIB_NAMES = tuple(lib.value for lib in Lib if lib is not Lib.PEER_COPY)  # ExecuTorch's: what registration_status lists
DEFAULT_LIBS = {Mode.PORTABLE: (Lib.PORTABLE,), Mode.ATEN: (Lib.NATIVE, Lib.DEVICE_COPY)}

COPY_OPS = {direction: op.name for direction, op in COPY_OP.items()}
COPY_DIRECTIONS = {op.name: direction for direction, op in COPY_OP.items()}
DIRECTION_WORDS = {direction: op.words for direction, op in COPY_OP.items()}

FALLBACK_KEY = ""  # the kernel key of an `arg_meta: null` entry: matches any dtype / dim order
CURRENT_DEVICE = -1  # a device index meaning "the current device"


def device_string(index: int, *, type: str = "cuda") -> str:
    """A device as `type:index` (`cuda:1`), `cpu` alone for the CPU: the form devices.Device parses and prints."""
    return "cpu" if type == "cpu" and index == 0 else f"{type}:{index}"


def format_bytes(nbytes: float) -> str:
    """Bytes for people, binary units: 64 -> '64 B', 4096 -> '4 KiB', 156552192 -> '149.3 MiB' (never e-notation)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes:.0f} B"


def format_seconds(seconds: float | None) -> str:
    """Seconds for people: 1.09e-05 -> '10.9 us', 0.0249 -> '24.9 ms', 2.5 -> '2.50 s'; None -> '' (not priced or
    not measured). The one time formatter of human-readable output; JSON keeps the raw seconds."""
    if seconds is None:
        return ""
    size = abs(seconds)
    if size < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.1f} ms" if size < 1 else f"{seconds:.2f} s"


def basis_text(basis: Mapping[str, str]) -> str:
    """What copy prices assume, in one line, the same on every surface (CLI, reports, explorer, profile), with the
    model's out-of-sample error where it was checked. `basis` is the one provenance record of a price
    (bench.cost_model's `CopyPricer.basis()`: backend, memory, clock, measured_on, and `times_of` where the backend
    has no real device, so the figure is what the copy would cost on the measured machine, never that backend's)."""
    checked = f"; error {basis['error']}" if basis.get("error") else ""
    if basis.get("times_of"):
        return (
            f"copy times predicted for {basis['times_of']}, where the cost model was measured: what each copy would "
            f"cost there ({basis['memory']} host memory, {basis['clock']} clock), not a time of the "
            f"{basis['backend']} backend{checked}"
        )
    return (
        f"copy times predicted for the {basis['backend']} backend: {basis['memory']} host memory, "
        f"{basis['clock']} clock, cost model measured on {basis['measured_on']}{checked}"
    )


def price_text(seconds: float | None, basis: Mapping[str, str] | None, error: float | None = None) -> str:
    """A predicted copy time after what it assumes: 'NVIDIA H200 (cupy) model, cupy backend, pinned host memory,
    wall clock: 10.9 us', or where the backend has no real device 'as on NVIDIA H200 (cupy), not a time of the
    simulated backend, pageable host memory, wall clock: 10.9 us' (the time last, where the explorer's inspector reads
    it), then its out-of-sample `error` where the model was checked (' ±8%'); just the time without a basis, ''
    when nothing priced it."""
    time = format_seconds(seconds) + (f" ±{error:.0%}" if seconds is not None and error is not None else "")
    if seconds is None or not basis:
        return time
    if basis.get("times_of"):
        return (
            f"as on {basis['times_of']}, not a time of the {basis['backend']} backend, {basis['memory']} host "
            f"memory, {basis['clock']} clock: {time}"
        )
    return (
        f"{basis['measured_on']} model, {basis['backend']} backend, {basis['memory']} host memory, "
        f"{basis['clock']} clock: {time}"
    )


def loaded_text(constant_bytes: int, buffers: Sequence[Mapping[str, Any]]) -> str:
    """The one wording of what a method holds besides its copies: constants, loaded once, and mutable buffers,
    program state the method reads and updates on every call (a KV cache), apart from the constants, since a buffer
    the CPU updates is copied per call, not once: e.g. 'constants 873.3 KiB loaded once; mutable buffers 64 KiB
    (program state, read and updated every call) on cpu'. `constant_bytes` counts the buffers' initial values too
    (`PlacementReport.constant_bytes`: everything a load copies in)."""
    buffer_bytes = sum(int(b["bytes"]) for b in buffers)
    text = f"constants {format_bytes(max(constant_bytes - buffer_bytes, 0))} loaded once"
    if buffers:
        where = ", ".join(dict.fromkeys(str(b["device"]) + (" (resident)" if b["resident"] else "") for b in buffers))
        text += (
            f"; mutable buffers {format_bytes(buffer_bytes)} (program state, read and updated every call) on {where}"
        )
    return text
