"""compare_outputs: match within assert_close's dtype tolerance, and the worst absolute error in float64."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from devcopy_lib.compare import compare_outputs


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 64), st.floats(1e-3, 10))
def test_a_real_difference_is_reported_with_its_size(n, delta):
    want = torch.zeros(n)
    got = want.clone()
    got[-1] = delta
    ok, worst = compare_outputs((got,), [want])
    assert not ok and abs(worst - float(torch.tensor(delta))) < 1e-6


def test_equal_outputs_match_with_zero_error():
    x = torch.randn(3, 4)
    assert compare_outputs((x.clone(),), [x]) == (True, 0.0)


def test_shape_or_count_mismatch_never_matches():
    assert compare_outputs((torch.zeros(2),), [torch.zeros(3)]) == (False, float("inf"))
    assert compare_outputs((), [torch.zeros(1)])[0] is False


def test_a_count_mismatch_gives_inf_even_when_the_common_outputs_agree():
    x = torch.ones(2)
    assert compare_outputs((x, x), [x]) == (False, float("inf"))
    assert compare_outputs((), [x]) == (False, float("inf"))


def test_integer_outputs_need_exact_equality():
    assert compare_outputs((torch.tensor([1, 2]),), [torch.tensor([1, 3])]) == (False, 1.0)


def test_nan_and_inf_where_eager_has_them_match():
    want = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0])
    assert compare_outputs((want.clone(),), [want]) == (True, 0.0)


def test_nan_or_inf_where_eager_has_none_is_a_mismatch():
    want = torch.tensor([1.0, 2.0])
    ok, worst = compare_outputs((torch.tensor([float("nan"), 2.0]),), [want])
    assert not ok and worst != worst  # NaN: no finite error describes it
    ok, worst = compare_outputs((torch.tensor([float("inf"), 2.0]),), [want])
    assert not ok and worst == float("inf")
