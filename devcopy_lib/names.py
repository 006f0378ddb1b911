"""The names every layer shares, in one torch-free module: what a user may choose, and the runtime's fixed names.

Each tuple is the full list of valid choices, in the order help texts show them; the CLI offers exactly these
(tests/cli/test_choices.py keeps it so). docs/design.md §7 lists them.
"""

from __future__ import annotations

# Placement strategies: ExecuTorch's PropagateDevicePass, one H2D per (value, device), direct device-to-device copies.
STRATEGIES = ("executorch", "dedupe", "peer")
# How lowering groups supported nodes into delegates: torch.fx's capability partitions (devcopy's near-linear
# partitioner, or torch.fx's own as "fx"), or one delegate per supported node.
PARTITIONS = ("capability", "fx", "per_node")
# Runtime modes and the libs each links by default.
MODES = ("portable", "aten")
PORTABLE_LIB = "portable"
NATIVE_LIB = "native"
DEVICE_COPY_LIB = "device_copy_ops_aten_lib"
PEER_COPY_LIB = "peer_copy_ops_aten_lib"
LIB_NAMES = (PORTABLE_LIB, NATIVE_LIB, DEVICE_COPY_LIB)  # ExecuTorch's libs: what registration_status lists
LINKABLE_LIBS = (*LIB_NAMES, PEER_COPY_LIB)
DEFAULT_LIBS = {"portable": (PORTABLE_LIB,), "aten": (NATIVE_LIB, DEVICE_COPY_LIB)}
# Where the ATen-mode copy kernel takes its device from: ExecuTorch's op identity + current device, or the tensor.
DEVICE_RULES = ("seed", "tensor")
# Device backends (plus "auto" wherever a backend is chosen).
BACKENDS = ("cupy", "simulated")
BACKEND_CHOICES = ("auto", *BACKENDS)

# What went wrong, in one vocabulary: the CLI's JSON `error.kind` and every devcopy exception's `kind` attribute
# (docs/design.md §8). A runtime failure's ExecuTorch error code travels beside it (`error`).
ERROR_KINDS = (
    "usage",
    "user_code",
    "unsupported_model",
    "placement",
    "missing_operator",
    "registration",
    "load",
    "execution",
    "device",
    "executorch_refused",
    "interrupted",
    "internal",
)

FALLBACK_KEY = ""  # the kernel key of an `arg_meta: null` entry: matches any dtype / dim order
CURRENT_DEVICE = -1  # a device index meaning "the current device"

# The device-copy ops by direction, as the runtime names them, and how messages say each direction.
COPY_OPS = {"h2d": "et_copy::_h2d_copy.out", "d2h": "et_copy::_d2h_copy.out", "d2d": "et_copy::_d2d_copy.out"}
COPY_DIRECTIONS = {op: direction for direction, op in COPY_OPS.items()}
DIRECTION_WORDS = {"h2d": "host->device", "d2h": "device->host", "d2d": "device->device"}
