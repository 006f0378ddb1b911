"""Writing an output file whole or not at all: a report or a trace is written beside its destination and renamed
into place, so a failure (a full disk, an interrupt) never leaves half a file under the name the user gave."""

from __future__ import annotations

import contextlib
import os
import tempfile


def write_text(path: str, text: str) -> str:
    """Write `text` (UTF-8) to `path` atomically; returns the absolute path written. A folder that does not exist,
    or a path that is a folder, is an OSError naming the path and the fix."""
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: str, data: bytes) -> str:
    """Write `data` to `path` atomically, readable by all (0644, as any file a user asks a tool to write: a report,
    a trace, a `.pte`); returns the absolute path written. Errors as `write_text`."""
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder) or os.path.isdir(target):
        problem = "is a folder" if os.path.isdir(target) else f"is in a folder that does not exist ({folder})"
        raise OSError(f"Cannot write {path!r}: it {problem}; give a file path in an existing, writable folder")
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".devcopy-", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.chmod(temporary, 0o644)  # mkstemp makes it private; an output is an ordinary readable file
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return target
