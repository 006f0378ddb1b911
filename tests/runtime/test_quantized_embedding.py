"""The quantized embedding kernels of the quantized libs (`embedding_byte`, `embedding_4bit`, `embedding_2bit`, each
`.out` and `.dtype_out`, ops/quantized_embedding.py) against ExecuTorch's own definitions: its Python ops (the eager
meaning, exir/passes/_quant_patterns_and_replacements.py) for random tables, groups, scale dtypes and zero points,
and its C++ kernels (ExecuTorch's portable_lib running the same .pte). Bad arguments fail naming what was wrong and
leave `out` as it was. An embedding quantized the way ExecuTorch's Llama export does places with ExecuTorch's counts
and runs equal to eager in both modes."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernel_calls import call_kernel

from devcopy_lib import DEFAULT_DELEGATE_OPS, export_and_lower, load_method, models, place_devices
from devcopy_lib.ops.quantized_embedding import unpack
from devcopy_lib.runtime.libs import quantized_lib
from devcopy_lib.tensors.error import Error

pytestmark = [
    pytest.mark.reference,
    pytest.mark.skipif(importlib.util.find_spec("executorch") is None, reason="needs ExecuTorch's definitions"),
]

MODES = ["portable", "aten"]
OPS = {8: "embedding_byte", 4: "embedding_4bit", 2: "embedding_2bit"}
RANGE = {8: (-128, 127), 4: (-8, 7), 2: (-2, 1)}


@pytest.fixture(scope="module", autouse=True)
def _executorch_ops():
    """ExecuTorch's Python definitions of the functional ops (the reference) and its packing op."""
    import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401


def _pack(values: torch.Tensor, bits: int) -> torch.Tensor:
    """ExecuTorch's own packing of signed `bits`-bit values (quant_fusion::_pack_embedding_weight); 8 bits: as is."""
    if bits == 8:
        return values
    return torch.ops.quant_fusion._pack_embedding_weight(values, bits)


def _table(draw, bits: int):
    rows = draw(st.integers(1, 6))
    per_byte = 8 // bits
    groups = draw(st.sampled_from([1, 2, 4]))
    group = max(2, per_byte) * draw(st.integers(1, 3))  # eager refuses groups of one column
    dim = groups * group
    low, high = RANGE[bits]
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(low, high + 1, (rows, dim), generator=gen, dtype=torch.int8)
    if bits == 8 and draw(st.booleans()):
        values = torch.randint(0, 256, (rows, dim), generator=gen).to(torch.uint8)
    weight = values if bits == 8 else _pack(values, bits)
    scale_dtype = draw(st.sampled_from([torch.float32, torch.float16]))
    shape = (rows, groups) if groups > 1 or draw(st.booleans()) else (rows,)
    scales = (torch.rand(shape, generator=gen) / 10 + 1e-3).to(scale_dtype)
    zero_points = None
    if draw(st.booleans()):
        zero_points = torch.randint(-3, 4, shape, generator=gen).to(scale_dtype)
    index_shape = draw(st.sampled_from([(3,), (2, 4), (1, 1, 5)]))
    indices = torch.randint(0, rows, index_shape, generator=gen)
    return weight, scales, zero_points, low, high, indices


def _run(mode: str, name: str, args: list, out: torch.Tensor) -> tuple[torch.Tensor, Error, str]:
    """The kernel of `name` in `mode` on boxed `args` + `out`: (out afterwards, failure state, message)."""
    return call_kernel(quantized_lib(mode).kernel(f"quantized_decomposed::{name}"), mode, args, out)


@pytest.mark.parametrize("bits", [8, 4, 2])
def test_unpacking_inverts_executorchs_packing(bits):
    low, high = RANGE[bits]
    values = torch.arange(low, high + 1, dtype=torch.int8).repeat(5, 8)[:, :8]
    assert torch.equal(unpack(_pack(values, bits), bits), values)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bits", [8, 4, 2])
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), with_dtype=st.booleans())
def test_each_embedding_kernel_equals_executorchs_python_op(mode, bits, data, with_dtype):
    weight, scales, zero_points, low, high, indices = _table(data.draw, bits)
    op = getattr(torch.ops.quantized_decomposed, OPS[bits])
    dtype = scales.dtype if zero_points is not None else data.draw(st.sampled_from([torch.float32, torch.float16]))
    args = [weight, scales, zero_points, low, high, indices]
    if with_dtype:
        expected = op.dtype(*args, dtype=dtype)
        name, boxed = f"{OPS[bits]}.dtype_out", [*args, dtype]
    else:
        expected = op.default(*args)
        name, boxed = f"{OPS[bits]}.out", args
    out = torch.full(expected.shape, 7.0, dtype=expected.dtype)
    got, state, message = _run(mode, name, boxed, out)
    assert state is Error.Ok, message
    assert got.dtype == expected.dtype and torch.equal(got, expected), name


def _good(bits: int = 4):
    values = torch.randint(RANGE[bits][0], RANGE[bits][1] + 1, (5, 8), dtype=torch.int8)
    weight = values if bits == 8 else _pack(values, bits)
    return [weight, torch.rand(5, 2) + 0.01, None, *RANGE[bits], torch.tensor([0, 4, 2])]


def _bad(change):
    args = _good()
    change(args)
    return args


BAD = {
    "index out of range": (
        lambda a: a.__setitem__(5, torch.tensor([0, 5])),
        ["index 5 is out of range for a weight of 5 rows", "[0, 5)"],
    ),
    "negative index": (lambda a: a.__setitem__(5, torch.tensor([-1])), ["index -1", "[0, 5)"]),
    "int32 indices": (lambda a: a.__setitem__(5, torch.tensor([1], dtype=torch.int32)), ["torch.int32", "int64"]),
    "scales per column": (lambda a: a.__setitem__(1, torch.rand(4) + 0.01), ["sizes [4]", "weight of 5 rows"]),
    "groups not dividing": (lambda a: a.__setitem__(1, torch.rand(5, 3)), ["3 groups do not divide", "dim 8"]),
    "bfloat16 scales": (
        lambda a: a.__setitem__(1, torch.rand(5, 2).to(torch.bfloat16)),
        ["torch.bfloat16", "float32 or float16"],
    ),
    "zero points of other sizes": (
        lambda a: a.__setitem__(2, torch.zeros(5)),
        ["weight_zero_points ([5]", "one zero point per scale"],
    ),
    "int8 packed weight": (lambda a: a.__setitem__(0, a[0].view(torch.int8)), ["torch.int8", "torch.uint8"]),
    "3-D weight": (lambda a: a.__setitem__(0, a[0].reshape(5, 2, 2)), ["2-D", "[5, 2, 2]"]),
    "quant_min above quant_max": (lambda a: a.__setitem__(3, 9), ["9 is greater than", "7"]),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_argument_is_refused_naming_it_and_out_is_left_as_it_was(mode, case):
    change, words = BAD[case]
    out = torch.full((3, 8), 7.0)
    got, state, message = _run(mode, "embedding_4bit.out", _bad(change), out)
    assert state is Error.InvalidArgument
    assert all(word in message for word in words), message
    assert torch.equal(got, torch.full((3, 8), 7.0))


@pytest.mark.parametrize("mode", MODES)
def test_an_out_dtype_other_than_the_asked_one_is_refused(mode):
    out = torch.full((3, 8), 7.0, dtype=torch.float16)
    got, state, message = _run(mode, "embedding_byte.dtype_out", [*_good(8), torch.float32], out)
    assert state is Error.InvalidArgument and "out has dtype torch.float16 for an output of dtype torch.float32" in (
        message
    )
    assert torch.equal(got, torch.full((3, 8), 7.0, dtype=torch.float16))


# ---- programs ------------------------------------------------------------------------------------------------------
CASES = [(8, 0), (8, 8), (4, 0), (4, 8), (2, 4)]


def _embedding(bits, group_size):
    try:
        return models.embedding_quantized(bits=bits, group_size=group_size)
    except models.ModelsExtraMissing as exc:
        pytest.skip(str(exc))


@pytest.mark.parametrize(("bits", "group_size"), CASES, ids=[f"{b}bit-group{g}" for b, g in CASES])
def test_a_quantized_embedding_places_as_executorch_and_runs_equal_to_eager(bits, group_size):
    from test_executorch_reference import assert_agree, both

    module, inputs = _embedding(bits, group_size)
    mine, theirs = both(module, inputs, DEFAULT_DELEGATE_OPS)
    assert_agree(mine, theirs, DEFAULT_DELEGATE_OPS)
    placed = place_devices(export_and_lower(module, inputs, DEFAULT_DELEGATE_OPS))
    expected = module(*inputs)
    for mode in MODES:
        with load_method(placed, mode, backend="simulated") as method:
            (got,) = method(*inputs)
            assert any(k.name.startswith(f"quantized_decomposed::{OPS[bits]}.") for k in method.kernels), mode
        assert torch.equal(got, expected), mode


class _TableOnly(torch.nn.Module):
    def __init__(self, table: torch.nn.Module) -> None:
        super().__init__()
        self.table = table

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.table(tokens)


@pytest.mark.parametrize(("bits", "group_size"), CASES, ids=[f"{b}bit-group{g}" for b, g in CASES])
def test_executorchs_own_kernels_give_what_devcopy_gives_on_the_same_pte(bits, group_size):
    from devcopy_lib import open_pte, pte_program, run_in_executorch
    from devcopy_lib.pte.backend import executorch_pte

    module, inputs = _embedding(bits, group_size)
    table = _TableOnly(module.embed)
    data = executorch_pte(table, inputs, [])
    program = open_pte(data)
    assert any(op.startswith(f"quantized_decomposed::{OPS[bits]}.") for op in program.operators)
    theirs = run_in_executorch(data, list(inputs), program.operators)
    assert theirs.ok, theirs.summary()
    for mode in MODES:
        with load_method(pte_program(program), mode) as method:
            (ours,) = method(*inputs)
        assert torch.equal(ours, theirs.outputs[0]), mode


@pytest.mark.deep  # two ExecuTorch lowerings of a transformer: a minute on two cores
@pytest.mark.parametrize(("bits", "group_size"), [(4, 32), (8, 0)], ids=["4bit-group32", "8bit-per-row"])
def test_the_tiny_llama_with_a_quantized_embedding_places_as_executorch_and_runs_as_its_edge_program(bits, group_size):
    """ExecuTorch's example Llama with its token embedding quantized as its export's `--embedding-quantize` does.
    The embedding is exact; the float layers after it round as ExecuTorch's edge program does, not as eager (the
    edge program multiplies contiguous copies of transposed weights), so the CPU-only run is compared with the edge
    program bit for bit and the delegated one with eager within float32 rounding."""
    from executorch.exir import EdgeCompileConfig, to_edge
    from test_executorch_reference import assert_agree, both

    try:
        module, inputs = models.llama_tiny_embedding_quantized(bits=bits, group_size=group_size)
    except models.ModelsExtraMissing as exc:
        pytest.skip(str(exc))
    mine, theirs = both(module, inputs, DEFAULT_DELEGATE_OPS)
    assert_agree(mine, theirs, DEFAULT_DELEGATE_OPS)
    edge = to_edge(torch.export.export(module, inputs), compile_config=EdgeCompileConfig(_check_ir_validity=False))
    expected, eager = edge.exported_program().module()(*inputs), module(*inputs)
    on_cpu = place_devices(export_and_lower(module, inputs, ()))
    delegated = place_devices(export_and_lower(module, inputs, DEFAULT_DELEGATE_OPS))
    for mode in MODES:
        with load_method(on_cpu, mode, backend="simulated") as method:
            (got,) = method(*inputs)
            assert any(k.name.startswith(f"quantized_decomposed::{OPS[bits]}.") for k in method.kernels), mode
        assert torch.equal(got, expected), mode
        with load_method(delegated, mode, backend="simulated") as method:
            (got,) = method(*inputs)
        torch.testing.assert_close(got, eager)
