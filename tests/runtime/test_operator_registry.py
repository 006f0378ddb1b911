"""The operator registry: exact-then-fallback lookup, refusal of a second (name, key), linking libs."""

from __future__ import annotations

import pytest
import torch
from torchgen.model import FunctionSchema

from devcopy_lib.runtime.libs import lib_by_name, portable_lib
from devcopy_lib.runtime.operator_registry import Kernel, KernelLib, OperatorRegistry, RegistrationError, kernel_key

SCHEMA = FunctionSchema.parse("f.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")


def kernel(key: str, tag: str) -> Kernel:
    return Kernel("x::f.out", key, lambda ctx, args: tag, SCHEMA, "test", "portable", tag, "test.yaml")


def test_lookup_prefers_exact_key_then_fallback():
    registry = OperatorRegistry()
    registry.register(kernel("", "fallback"))
    registry.register(kernel("v1/6;0", "float"))
    assert registry.lookup("x::f.out", "v1/6;0")(None, []) == "float"
    assert registry.lookup("x::f.out", "v1/3;0")(None, []) == "fallback"
    assert registry.lookup("x::g.out") is None


def test_duplicate_registration_is_refused():
    registry = OperatorRegistry()
    registry.register(kernel("", "a"))
    with pytest.raises(RegistrationError, match=r"Re-registering x::f.out \(kernel key '' = fallback\)"):
        registry.register(kernel("", "b"))


def test_linking_two_libs_with_the_same_op_is_refused():
    twin = KernelLib(
        "portable_twin",
        "portable",
        "twin.yaml",
        lambda: dict(portable_lib().entries),
        lambda op: SCHEMA,
        lambda op, name, schema: None,
    )
    registry = OperatorRegistry([portable_lib()])
    with pytest.raises(RegistrationError, match="Re-registering .*lib 'portable' already registers it"):
        registry.link(twin)
    assert registry.libs == [portable_lib()]


def test_libs_of_different_modes_do_not_link():
    with pytest.raises(ValueError, match="cannot link aten-mode lib"):
        OperatorRegistry([portable_lib(), lib_by_name("device_copy_ops_aten_lib")])


def test_listing_ops_and_keys():
    registry = OperatorRegistry([lib_by_name("device_copy_ops_aten_lib")])
    assert registry.ops() == ["et_copy::_d2h_copy.out", "et_copy::_h2d_copy.out"]
    assert registry.keys("et_copy::_h2d_copy.out") == [""]


def test_kernel_key_uses_executorch_scalar_type_codes():
    assert kernel_key([(torch.float32, (0, 1)), (torch.int64, (1, 0))]) == "v1/6;0,1|4;1,0"


def test_resolved_kernel_exposes_its_schema():
    k = OperatorRegistry([portable_lib()]).lookup("aten::add.out")
    assert [a.name for a in k.schema.arguments.flat_all] == ["self", "other", "alpha", "out"]
