"""Lowering, device placement, emission and the ExecuTorch reference; importing it silences the known third-party
deprecation noise these passes trigger (see `noise`)."""

from .noise import quiet_known_noise

quiet_known_noise()
