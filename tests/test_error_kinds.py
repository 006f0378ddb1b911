"""One vocabulary of error kinds (docs/design.md §8): every devcopy exception's `kind` is a name
of `names.ERROR_KINDS`, the CLI's JSON `error.kind` uses exactly those names, and the CLI calls a library exception
what the exception calls itself."""

import importlib
import pkgutil

import pytest

import devcopy_lib
from devcopy_lib.cli import common
from devcopy_lib.names import ERROR_KINDS
from devcopy_lib.tensors.error import Error


def _exception_classes():
    seen = set()
    for info in pkgutil.walk_packages(devcopy_lib.__path__, "devcopy_lib."):
        if info.name.endswith("__main__") or ".cupy" in info.name or "methods_cuda" in info.name:
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name:
                seen.add(value)
    return sorted(seen, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


EXCEPTIONS = _exception_classes()


def test_the_cli_offers_exactly_the_shared_kinds():
    assert tuple(common.KIND_EXITS) == ERROR_KINDS


@pytest.mark.parametrize("cls", [c for c in EXCEPTIONS if hasattr(c, "kind")], ids=lambda c: c.__qualname__)
def test_every_library_exception_kind_is_a_shared_kind(cls):
    assert cls.kind in ERROR_KINDS


def test_the_kinds_cover_the_library_failures():
    kinds = {c.__qualname__: getattr(c, "kind", None) for c in EXCEPTIONS}
    assert {
        name: kinds[name]
        for name in (
            "PlacementError",
            "MissingOperatorError",
            "RegistrationError",
            "LoadError",
            "ExecutionError",
            "DeviceCopyError",
            "DeviceMemoryAccessError",
        )
    } == {
        "PlacementError": "placement",
        "MissingOperatorError": "missing_operator",
        "RegistrationError": "registration",
        "LoadError": "load",
        "ExecutionError": "execution",
        "DeviceCopyError": "device",
        "DeviceMemoryAccessError": "device",
    }


@pytest.mark.parametrize(
    "cls", [c for c in EXCEPTIONS if c.__qualname__ in ("LoadError", "ExecutionError")], ids=lambda c: c.__qualname__
)
def test_the_cli_names_a_runtime_failure_as_the_library_does(cls):
    exc = cls(Error.NotFound, "no allocator")
    assert common.classify(exc) == (cls.kind, {"error_code": "NotFound"})


def test_the_argument_errors_have_one_home():
    """`InvalidArgumentError` / `InvalidArgumentTypeError` are defined once, in devcopy_lib.errors, and are the same
    classes wherever they are imported from (devices.errors keeps them importable)."""
    from devcopy_lib import errors
    from devcopy_lib.devices import errors as device_errors

    assert device_errors.InvalidArgumentError is errors.InvalidArgumentError
    assert device_errors.InvalidArgumentTypeError is errors.InvalidArgumentTypeError
    homes = {c.__module__ for c in EXCEPTIONS if c.__name__.startswith("InvalidArgument")}
    assert homes == {"devcopy_lib.errors"}
