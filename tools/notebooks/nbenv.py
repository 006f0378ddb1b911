"""The environment notebooks run in under test, in the browser test and when built: the simulated backend and
CI-sized cells. Warnings are as under `make lab` (devcopy_lib.lowering.noise silences the known third-party noise),
so a checked cell that writes to stderr fails nbval."""

NOTEBOOK_ENV = {"DEVCOPY_BACKEND": "simulated", "CI": "1"}
