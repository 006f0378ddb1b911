"""Known third-party deprecation noise is silenced by exact message; every other warning and log record still shows."""

import logging
import warnings

from devcopy_lib.lowering.noise import quiet_known_noise


def test_the_leafspec_future_warning_is_silenced_and_other_future_warnings_are_not():
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        warnings.simplefilter("always")
        quiet_known_noise()
        warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated, use ...", FutureWarning, stacklevel=1)
        warnings.warn("a real deprecation", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["a real deprecation"]


def test_torchao_load_failures_and_the_enum_notice_are_dropped_other_records_kept(caplog):
    quiet_known_noise()
    quiet_known_noise()  # idempotent: one filter per logger
    assert len(logging.getLogger("torchao").filters) == 1
    with caplog.at_level(logging.WARNING):
        logging.getLogger("torchao").warning("Failed to load %s: %s", "_C_mxfp8.so", "no CUDA")
        logging.getLogger("torch.utils._pytree").warning("%s is an Enum subclass and is now natively supported", "E")
        logging.getLogger("torchao").warning("quantization config ignored")
    assert [r.getMessage() for r in caplog.records] == ["quantization config ignored"]
