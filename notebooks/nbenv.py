"""The environment notebooks run in under test, in the browser test and when built: the simulated backend,
CI-sized cells, and torch's FutureWarnings silenced (they would add stderr output to checked cells)."""
NOTEBOOK_ENV = {"DEVCOPY_BACKEND": "simulated", "CI": "1", "PYTHONWARNINGS": "ignore::FutureWarning"}
