"""Property-based fuzz of what user code can raise (docs/reliability.md, "The devcopy process"): any exception class
(a BaseException, GeneratorExit, SystemExit, an OSError ...) with any message (empty, huge, with lone surrogates from
a non-UTF-8 name) or a `__str__` that fails or returns a non-string becomes one `user_code` failure whose JSON is
strict and whose text any stream can print; KeyboardInterrupt stays an interrupt."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.cli import model_spec
from devcopy_lib.cli.common import KIND_EXITS, UserCodeError, encodable, failure, to_json

BASES = [Exception, BaseException, GeneratorExit, SystemExit, ValueError, OSError, KeyboardInterrupt]
# Text with lone surrogates (what os.fsdecode makes of non-UTF-8 bytes) as well as any other character.
TEXT = st.text(st.characters(categories=["L", "N", "P", "S", "Z", "C", "Cs"]), max_size=200)


def _str_raising(error):
    def __str__(self):
        raise error

    return __str__


@st.composite
def user_exceptions(draw):
    base = draw(st.sampled_from(BASES))
    behaviour = draw(st.sampled_from(["message", "empty", "raises", "raises base", "not a string", "huge"]))
    message = draw(TEXT)
    methods = {
        "raises": {"__str__": _str_raising(RuntimeError("no message"))},
        "raises base": {"__str__": _str_raising(GeneratorExit())},
        "not a string": {"__str__": lambda self: 42},
    }.get(behaviour, {})
    cls = type("UserError", (base,), methods)
    args = {"message": (message,), "empty": (), "huge": (message * 1000 + "x" * 100_000,)}.get(behaviour, (message,))
    return cls(*args)


@settings(deadline=None)
@given(user_exceptions())
def test_anything_user_code_raises_is_one_printable_user_code_failure(exc):
    with pytest.raises(BaseException) as raised:
        with model_spec.user_code("model.py:factory", "loading"):
            raise exc
    if isinstance(exc, KeyboardInterrupt):
        assert raised.value is exc
        return
    assert isinstance(raised.value, UserCodeError)
    outcome = failure(raised.value)
    error = json.loads(to_json(outcome.payload))["error"]
    assert (error["kind"], outcome.code) == ("user_code", KIND_EXITS["user_code"][0])
    assert error["message"].startswith("model.py:factory: the model code failed during loading: ")
    for encoding in ("utf-8", "ascii", "latin-1"):
        encodable(error["message"], encoding).encode(encoding)  # printable on any stream
