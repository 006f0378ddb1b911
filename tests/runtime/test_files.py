"""Output files (reports, traces, `.pte`s) are written whole, under the user's name, readable by all."""

from __future__ import annotations

import os

from devcopy_lib.runtime.files import write_bytes, write_text


def test_every_output_file_is_written_whole_and_0644(tmp_path):
    old = os.umask(0o022)
    try:
        for name, write in (
            ("r.html", lambda p: write_text(p, "<p>x</p>")),
            ("a.pte", lambda p: write_bytes(p, b"\0x")),
        ):
            path = tmp_path / name
            assert write(str(path)) == str(path)
            assert path.stat().st_mode & 0o777 == 0o644
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pte", "r.html"]  # no temporary left beside them
    assert (tmp_path / "a.pte").read_bytes() == b"\0x"
