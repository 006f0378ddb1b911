"""docs/reliability.md names, for every guarantee, the test that proves it: each named test must exist."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _named_tests():
    """(file, test) pairs from `path.py::name` references; `::name` alone reuses the previous file."""
    pairs, current = [], None
    for line in (ROOT / "docs" / "reliability.md").read_text().splitlines():
        for path, name in re.findall(r"`(?:([\w/]+\.py))?::(\w+)`", line):
            current = path or current
            pairs.append((current, name))
    return pairs


def test_every_test_the_document_names_exists():
    pairs = _named_tests()
    assert len(pairs) > 30
    missing = [
        f"{path}::{name}"
        for path, name in pairs
        if not re.search(rf"^(def|class) {name}\b|^{name} = ", (ROOT / "tests" / path).read_text(), re.M)
    ]
    assert not missing, f"docs/reliability.md names tests that do not exist: {missing}"
