"""The CLI offers exactly the library's choices (devcopy_lib.names): a name added to the library reaches the CLI."""

import argparse

import pytest

from devcopy_lib import names
from devcopy_lib.cli import build_parser


def _choices(command: str) -> dict[str, tuple]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {a.dest: tuple(a.choices) for a in sub._actions if a.choices is not None}


@pytest.mark.parametrize(
    "command, option, expected",
    [
        ("place", "strategy", names.STRATEGIES),
        ("place", "partition", names.PARTITIONS),
        ("run", "strategy", names.STRATEGIES),
        ("run", "mode", names.MODES),
        ("run", "aten_device_rule", names.DEVICE_RULES),
        ("run", "backend", names.BACKEND_CHOICES),
        ("registry", "mode", names.MODES),
        ("bench", "backend", names.BACKEND_CHOICES),
        ("info", "backend", names.BACKEND_CHOICES),
    ],
)
def test_cli_choices_are_the_librarys(command, option, expected):
    assert _choices(command)[option] == tuple(expected)
