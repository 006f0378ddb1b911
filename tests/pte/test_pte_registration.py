"""Registration of a real ExecuTorch program: which of its operators each devcopy mode and lib set resolves, with
ExecuTorch's `Missing operator: [i] name` lines for an ATen-mode runtime without device_copy_ops_aten_lib, checked
against ExecuTorch's own Python runtime (`portable_lib`)."""

import pytest
import torch

from devcopy_lib.names import DEVICE_COPY_LIB
from devcopy_lib.pte.reader import PteUsageError
from devcopy_lib.pte.registration import pte_registration
from devcopy_lib.runtime.resolve import MissingOperatorError, resolve_operators

pytestmark = pytest.mark.reference


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_each_modes_default_libs_resolve_the_whole_table(sin_program, mode):
    r = pte_registration(sin_program, mode)
    assert r.ok and r.missing == [] and r.message == ""
    assert r.resolved == sin_program.operators
    assert r.libs == (
        ("portable", "quantized") if mode == "portable" else ("native", DEVICE_COPY_LIB, "quantized_ops_aten_lib")
    )
    assert {row.op for row in r.rows if row.registered} == set(sin_program.operators)


def test_aten_mode_without_the_device_copy_lib_misses_the_copies_in_executorchs_words(sin_program):
    r = pte_registration(sin_program, "aten", ["native"])
    assert not r.ok
    assert r.missing == [(0, "et_copy::_h2d_copy.out"), (1, "et_copy::_d2h_copy.out")]
    assert r.resolved == ["aten::sin.out", "aten::mul.out"]
    lines = r.message.splitlines()
    assert lines[:3] == [
        "Missing operator: [0] et_copy::_h2d_copy.out",
        "Missing operator: [1] et_copy::_d2h_copy.out",
        "There are 3 instructions don't have corresponding operator registered",  # 2 H2D + 1 D2H call them
    ]
    assert f"link {DEVICE_COPY_LIB} next to native" in r.message
    # the rows say where each copy op is not registered
    assert {(row.op, row.registered) for row in r.rows if row.op.startswith("et_copy")} == {
        ("et_copy::_h2d_copy.out", False),
        ("et_copy::_d2h_copy.out", False),
    }


def test_resolve_operators_takes_the_program_itself(sin_program):
    assert len(resolve_operators(sin_program, ["portable"])) == 4
    with pytest.raises(MissingOperatorError) as info:
        resolve_operators(sin_program, ["native"])
    assert info.value.missing == [(0, "et_copy::_h2d_copy.out"), (1, "et_copy::_d2h_copy.out")]


def test_a_mode_and_libs_that_do_not_match_are_refused(sin_program):
    with pytest.raises(PteUsageError, match="mode must be one of"):
        pte_registration(sin_program, "tpu")
    with pytest.raises(ValueError, match="not portable-mode libs"):
        pte_registration(sin_program, "portable", ["native"])


def test_portable_mode_agrees_with_executorchs_own_runtime(sin_program, sin_bytes):
    """ExecuTorch's portable_lib registers every operator of the table (both et_copy ops among its 240), loads the
    program (so no operator is missing), and fails the first call for want of a CUDA allocator - as devcopy's
    portable mode resolves every operator and needs a registered device allocator to run."""
    from executorch.extension.pybindings import portable_lib

    names = set(portable_lib._get_operator_names())
    assert {"et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"} <= names
    theirs = [op for op in sin_program.operators if op in names]
    assert pte_registration(sin_program, "portable").resolved == theirs == sin_program.operators
    module = portable_lib._load_for_executorch_from_buffer(sin_bytes)
    with pytest.raises(RuntimeError, match="0x20"):  # Error.NotFound: no device allocator for device type 1
        module.forward((torch.randn(2, 3), torch.randn(2, 3)))


# Operators ExecuTorch's portable_lib registers that devcopy's portable lib does not (34 of its 240): ExecuTorch's
# scalar prims and view op, `_empty_dim_order.out`, and a few ATen ops. devcopy registers one op ExecuTorch does not:
# its own et_copy::_d2d_copy.out.
PORTABLE_GAP_SAMPLE = {
    "dim_order_ops::_empty_dim_order.out",
    "executorch_prim::et_view.default",
    "aten::sym_size.int",
}
# The dim-order copies to_edge writes for `.to()`/clone and a lifted scalar's cast: both portable libs have them
DIM_ORDER_COPIES = {"dim_order_ops::_clone_dim_order.out", "dim_order_ops::_to_dim_order_copy.out"}


def test_devcopys_portable_and_quantized_libs_against_executorchs_runtime():
    """ExecuTorch's Python runtime holds portable_lib's 240 operators, and the 19 of its quantized lib once
    `executorch.kernels.quantized` is imported - which devcopy does (ops/quantized.py) so that a quantized program
    lowers. devcopy's quantized lib implements 17 of the 19: not mixed_mm/mixed_linear, which no ExecuTorch flow
    emits (docs/differences.md)."""
    from executorch.extension.pybindings import portable_lib

    from devcopy_lib.runtime.libs import portable_lib as devcopy_portable
    from devcopy_lib.runtime.libs import quantized_lib

    theirs = set(portable_lib._get_operator_names())
    quantized = {op for op in theirs if op.startswith("quantized_decomposed::")}
    portable, ours = theirs - quantized, set(devcopy_portable().ops)
    assert (len(portable), len(quantized)) == (240, 19)
    assert ours - portable == {"et_copy::_d2d_copy.out"}
    assert PORTABLE_GAP_SAMPLE <= portable - ours and len(portable - ours) == 34
    assert DIM_ORDER_COPIES <= ours & portable
    assert set(quantized_lib().ops) <= quantized
    assert quantized - set(quantized_lib().ops) == {
        "quantized_decomposed::mixed_mm.out",
        "quantized_decomposed::mixed_linear.out",
    }


def test_a_program_with_a_dtype_cast_resolves_its_dim_order_op_in_both_modes():
    """`x.to(float64)` becomes dim_order_ops::_to_dim_order_copy.out in the table: ExecuTorch's runtime has it, and
    so do devcopy's portable lib and its ATen-mode native lib."""
    from executorch.extension.pybindings import portable_lib

    from devcopy_lib.pte.backend import executorch_pte
    from devcopy_lib.pte.reader import open_pte

    class Cast(torch.nn.Module):
        def forward(self, x):
            return x.to(torch.float64) * 2

    p = open_pte(executorch_pte(Cast(), (torch.randn(3),), []))
    theirs = set(portable_lib._get_operator_names())
    assert set(p.operators) <= theirs and "dim_order_ops::_to_dim_order_copy.out" in p.operators
    for mode in ("portable", "aten"):
        r = pte_registration(p, mode)
        assert r.ok and r.missing == [] and r.message == "" and r.resolved == p.operators, mode
