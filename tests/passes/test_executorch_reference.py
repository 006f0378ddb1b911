"""Differential: devcopy's placement against ExecuTorch 1.5.1's own pipeline (same ops, same partitioning)."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_dags import random_dags

from devcopy_lib import export_and_lower, models, place_devices
from devcopy_lib.passes.placement import PlacementError

pytestmark = pytest.mark.reference
OPS = ["add.Tensor", "mm.default", "sin.default"]  # what ExecuTorch's BackendWithCompilerDemo lowers
SKIPS = [{}, {"skip_h2d_for_method_inputs": True}, {"skip_d2h_for_method_outputs": True}]
# Cases both refuse, with the message each gives: asserted, never skipped.
# Each is skip-H2D of a graph input read twice (by two delegates, or a delegate and a CPU op).
EXPECTED_REFUSALS = {
    (name, partition, "skip_h2d_for_method_inputs"): "exactly one user"
    for name, partitions in {"cpu_between": ("capability", "per_node"), "residual": ("capability", "per_node"),
                             "shared_input": ("per_node",), "transformer_block": ("capability", "per_node")}.items()
    for partition in partitions
}


def both(module, inputs, partition, options):
    """(devcopy counts or error, ExecuTorch counts or error) for one case."""
    from devcopy_lib.passes.executorch_reference import executorch_counts

    try:
        report = place_devices(export_and_lower(module, inputs, OPS, partition=partition), **options).report
        ours = {"delegates": report.delegates, **report.copies}
    except PlacementError as exc:
        ours = exc
    try:
        counts = executorch_counts(module, inputs, OPS, partition=partition, **options)
        theirs = {k: counts[k] for k in ("delegates", "h2d", "d2h")}
    except RuntimeError as exc:
        theirs = exc
    return ours, theirs


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_sample_models_match_executorch(name):
    refusals = {}
    for partition in ("capability", "per_node"):
        for options in SKIPS:
            ours, theirs = both(*models.MODELS[name](), partition, options)
            if isinstance(ours, Exception) or isinstance(theirs, Exception):
                assert isinstance(ours, Exception) and isinstance(theirs, Exception), (partition, options, ours, theirs)
                refusals[(name, partition, *options)] = (str(ours), str(theirs))
            else:
                assert ours == theirs, (partition, options)
    expected = {k: v for k, v in EXPECTED_REFUSALS.items() if k[0] == name}
    assert set(refusals) == set(expected)
    for key, fragment in expected.items():
        assert all(fragment in message for message in refusals[key])


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(dag=random_dags(ops=("add", "mm", "sin", "cos", "relu")), partition=st.sampled_from(["capability", "per_node"]),
       options=st.sampled_from(SKIPS))
def test_random_dags_match_executorch(dag, partition, options):
    ours, theirs = both(*dag, partition, options)
    if isinstance(theirs, Exception):  # ExecuTorch refuses skip-H2D of a shared input; devcopy must too
        assert isinstance(ours, PlacementError) and "exactly one user" in str(theirs), (ours, theirs)
    else:
        assert ours == theirs
