"""workflows.environment without the CLI: what `devcopy info` reports."""

from devcopy_lib.workflows.environment import describe_environment


def test_the_simulated_backend_is_described_as_simulated():
    info = describe_environment("simulated")
    assert info["backend"] == "simulated" and info["simulated"] is True
    assert info["devices"][0]["device"] == "cuda:0" and "torch" in info["versions"]
