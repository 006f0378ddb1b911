"""The third-party deprecation noise devcopy's lowering triggers, silenced in one place (installed when
`devcopy_lib.lowering` or `devcopy_lib.pte` is first imported), so notebooks show devcopy's output and the warnings
that matter.

Each filter matches one known message exactly; every other warning and log record still shows:
- torch 2.13's pytree: `isinstance(treespec, LeafSpec)` is deprecated (FutureWarning; raised inside torch.export and
  when graphs are copied, not by devcopy's code);
- torchao (imported by ExecuTorch, the `reference` extra): "Failed to load ..." for CUDA-only kernel libraries;
- torch's pytree log W....: "... is an Enum subclass and is now natively supported" (torchao registering enums).
"""

from __future__ import annotations

import logging
import warnings

LEAFSPEC_WARNING = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
LOG_NOISE = {
    "torchao": "Failed to load ",
    "torch.utils._pytree": "is an Enum subclass and is now natively supported",
}


class _DropNoise(logging.Filter):
    """Drops the records whose message contains `fragment`; its type marks devcopy's own filter, so installing
    twice adds nothing."""

    def __init__(self, fragment: str) -> None:
        super().__init__()
        self.devcopy_noise = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.devcopy_noise not in record.getMessage()


def quiet_known_noise() -> None:
    """Install the filters above (idempotent)."""
    warnings.filterwarnings("ignore", message=LEAFSPEC_WARNING, category=FutureWarning)
    for name, fragment in LOG_NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNoise) and f.devcopy_noise == fragment for f in logger.filters):
            logger.addFilter(_DropNoise(fragment))
