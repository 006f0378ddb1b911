"""LLM decode (models.llama_decode_step, llama_decode_step_functional): a decode step reads its KV cache as the full
model reads the whole sequence; devcopy runs step after step equal to eager in both modes, the in-place cache kept
by the loaded method between calls, the functional one threaded by the caller; the report says per step how many
bytes of cache, weights and activations cross, and ExecuTorch 1.5.1 places the same copies."""

from __future__ import annotations

import copy
import functools

import pytest
import torch
import torch.utils._pytree as pytree

from devcopy_lib import compare_outputs, export_program, load_method, lower, models, place_devices
from devcopy_lib.devices.errors import InvalidArgumentError
from devcopy_lib.lowering.lower import model_ops
from devcopy_lib.names import CopyRole
from devcopy_lib.placement.place import PlacementError
from devcopy_lib.runtime.failures import ExecutionError

from .placement.test_executorch_reference import assert_agree, both

pytestmark = pytest.mark.filterwarnings("ignore:torchvision's compiled ops did not load:RuntimeWarning")

SMALL = {"max_cache_len": 16, "prompt_len": 5}
FORMS = {"buffers": "llama_decode_step", "inputs": "llama_decode_step_functional"}
# keys and values of 2 layers, [1, 2 key/value heads, 16 positions, 16 wide] float32 each
CACHE_BYTES = 4 * 2 * 16 * 16 * 4


@functools.cache
def _exported(cache: str):
    """(module, inputs, exported program) at the small size: exported once for every delegate set."""
    module, inputs = _build(cache)
    return module, inputs, export_program(module, inputs)


def _build(cache: str, **options):
    try:
        return models.REAL_MODELS[FORMS[cache]](**{**SMALL, **options})
    except models.ModelsExtraMissing as exc:
        pytest.skip(f"the models extra is not installed: {exc}")


def _next_tokens(count: int, first_position: int):
    generator = torch.Generator().manual_seed(1)
    return [
        (torch.randint(0, 1024, (1, 1), generator=generator), torch.tensor([first_position + i])) for i in range(count)
    ]


@pytest.mark.parametrize("cache", sorted(FORMS))
def test_a_decode_step_reads_its_cache_as_the_full_model_reads_the_sequence(cache):
    """Token by token from an empty cache, each step's logits are the full forward's at that position."""
    module, _ = _build(cache)
    tokens = torch.randint(0, 1024, (1, 6), generator=torch.Generator().manual_seed(2))
    step = models.LlamaDecodeStep(module.model, max_cache_len=8, cache=cache)
    state = () if cache == "buffers" else step.empty_cache()
    with torch.no_grad():
        full = module.model(input_ids=tokens, use_cache=False).logits
        for position in range(tokens.shape[1]):
            result = step(tokens[:, position : position + 1], torch.tensor([position]), *state)
            logits, state = (result, ()) if cache == "buffers" else (result[0], tuple(result[1:]))
            torch.testing.assert_close(logits[0, -1], full[0, position], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cache", sorted(FORMS))
def test_the_factory_fills_the_cache_with_its_prompt_and_asks_for_the_next_position(cache):
    module, inputs = _build(cache)
    tensors = [b for n, b in module.named_buffers() if "_cache_" in n] if cache == "buffers" else inputs[2:]
    assert len(tensors) == 4 and inputs[1].tolist() == [SMALL["prompt_len"]]
    for tensor in tensors:
        written = tensor.abs().sum(dim=(0, 1, 3)) > 0
        assert written.tolist() == [p < SMALL["prompt_len"] for p in range(SMALL["max_cache_len"])]


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: models.llama_decode_step(max_cache_len=4, prompt_len=4), "prompt_len=4 leaves no room"),
        (lambda: models.llama_decode_step(prompt_len=-1), "0 <= prompt_len < max_cache_len"),
    ],
)
def test_a_prompt_that_does_not_fit_is_refused_naming_the_sizes(call, message):
    pytest.importorskip("transformers", reason="the models extra is not installed")
    with pytest.raises(ValueError, match=message):
        call()


def test_an_unknown_cache_form_and_a_wrong_cache_count_are_refused():
    module, inputs = _build("buffers")
    with pytest.raises(ValueError, match=r"cache='disk' is not a KV cache form; give 'buffers' .* or 'inputs'"):
        models.LlamaDecodeStep(module.model, 8, cache="disk")
    with pytest.raises(ValueError, match="takes 0 cache tensors after input_ids and position, got 1"):
        module(*inputs, torch.zeros(1))


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_a_loaded_method_keeps_its_cache_from_step_to_step(sim, mode):
    """The in-place cache is the method's state: three calls equal three eager steps; the model's own buffers are
    the model's (eager writes them, devcopy never does, and a method does not refuse them as changed constants)."""
    module, inputs = _build("buffers")
    placed = place_devices(lower(export_program(module, inputs), models.DELEGATE_SETS["matrix_views"]))
    before = {n: b.clone() for n, b in module.named_buffers()}
    with load_method(placed, mode) as method:
        devcopy = [method(*step) for step in _next_tokens(3, SMALL["prompt_len"])]
        after_devcopy = {n: b.clone() for n, b in module.named_buffers()}
        with torch.no_grad():
            eager = [[module(*step)] for step in _next_tokens(3, SMALL["prompt_len"])]
        method(*_next_tokens(1, 8)[0])  # raises ConstantsChangedError if the method watched the buffers eager wrote
    assert all(torch.equal(before[n], after_devcopy[n]) for n in before)
    for position, (ours, theirs) in enumerate(zip(devcopy, eager, strict=True)):
        ok, err = compare_outputs(ours, theirs)
        assert ok, f"step {position}: max |devcopy - eager| = {err}"


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_the_functional_cache_goes_through_devcopy_step_after_step(sim, mode):
    module, inputs = _build("inputs")
    placed = place_devices(lower(export_program(module, inputs), models.DELEGATE_SETS["default"]))
    ours, theirs = inputs[2:], inputs[2:]
    given = [t.clone() for t in ours]
    with load_method(placed, mode) as method:
        for position, (token, where) in enumerate(_next_tokens(3, SMALL["prompt_len"])):
            result = method(token, where, *ours)
            with torch.no_grad():
                expected = pytree.tree_leaves(module(token, where, *theirs))
            ok, err = compare_outputs(result, expected)
            assert ok, f"step {position}: max |devcopy - eager| = {err}"
            ours, theirs = tuple(result[1:]), tuple(expected[1:])
    assert all(torch.equal(a, b) for a, b in zip(given, inputs[2:], strict=True))  # inputs are read, not written


# cache bytes crossing per step (H2D, D2H) by delegate set. matrix: attention's bmm reads the cache expanded to the
# 4 query heads, copied over from the CPU (twice the cache); with views delegated the cache crosses as it is. The
# functional form's clone of its inputs is a view op: delegated, the cache goes over and back before the CPU update.
CACHE_CROSSINGS = {
    ("buffers", "matrix"): (2, 0),
    ("buffers", "matrix_views"): (1, 0),
    ("buffers", "cnn"): (0, 0),
    ("buffers", "default"): (1, 0),
    ("inputs", "matrix"): (2, 0),
    ("inputs", "matrix_views"): (2, 1),
    ("inputs", "cnn"): (0, 0),
    ("inputs", "default"): (2, 1),
}
LINEAR_WEIGHT_BYTES = 4 * (2 * (64 * 64 * 2 + 32 * 64 * 2 + 176 * 64 * 3) + 1024 * 64)  # q, o, k, v, MLP; lm_head


@pytest.mark.parametrize("cache,delegate_set", sorted(CACHE_CROSSINGS))
def test_the_report_splits_each_steps_bytes_into_cache_weights_and_activations(cache, delegate_set):
    lowered = lower(_exported(cache)[2], models.DELEGATE_SETS[delegate_set])
    report, hoisted = place_devices(lowered).report, place_devices(lowered, hoist_constants=True).report
    h2d, d2h = CACHE_CROSSINGS[cache, delegate_set]
    for placed in (report, hoisted):
        split = placed.bytes_by_role()
        assert split[CopyRole.CACHE] == {"h2d": h2d * CACHE_BYTES, "d2h": d2h * CACHE_BYTES}
        assert {d: sum(role[d] for role in split.values()) for d in split[CopyRole.CACHE]} == placed.copy_bytes
    assert hoisted.bytes_by_role()[CopyRole.WEIGHTS] == {"h2d": 0, "d2h": 0}  # computed from weights: once, at load
    if delegate_set == "matrix":  # mm reads every Linear weight transposed on the CPU, every step
        assert report.bytes_by_role()[CopyRole.WEIGHTS]["h2d"] >= LINEAR_WEIGHT_BYTES


@pytest.mark.reference
def test_executorch_places_the_in_place_decode_step_as_devcopy_does():
    """Its write-back of the mutated cache and devcopy's: the same delegates, copies and order (about 10 s)."""
    module, inputs = _build("buffers")
    assert_agree(*both(module, inputs, models.DELEGATE_SETS["matrix_views"]), "llama_decode_step")


@pytest.mark.reference
@pytest.mark.deep  # 8 ExecuTorch lowerings of about 8 s each: `make test-deep`
@pytest.mark.parametrize("cache,delegate_set", sorted(CACHE_CROSSINGS))
def test_executorch_places_every_decode_step_as_devcopy_does(cache, delegate_set):
    module, inputs = _build(cache)
    assert_agree(*both(module, inputs, models.DELEGATE_SETS[delegate_set]), (cache, delegate_set))


@pytest.mark.gpu
@pytest.mark.parametrize("cache", sorted(FORMS))
def test_decode_steps_run_equal_to_eager_on_cuda_with_cupy(exact_float32, cache):
    """Full size (128 positions, 16 prompt tokens) on the GPU, three steps per delegate set in both modes; and with
    every op delegated (the attention mask's `arange`s and `scalar_tensor` create their tensors on the GPU), the
    in-place cache resident there."""
    from devcopy_lib.devices import scoped_allocators
    from devcopy_lib.devices.cupy_cuda import CupyCudaAllocator

    module, inputs = _build(cache, max_cache_len=128, prompt_len=16)
    exported = export_program(module, inputs)
    every_op = place_devices(lower(exported, model_ops(exported)), resident_buffers=cache == "buffers")
    with scoped_allocators(CupyCudaAllocator()):
        for placed in [*(place_devices(lower(exported, ops)) for ops in models.DELEGATE_SETS.values()), every_op]:
            for mode in ("portable", "aten"):
                eager, state = copy.deepcopy(module), inputs[2:]
                with load_method(placed, mode) as method:
                    for token, where in _next_tokens(3, 16):
                        result = pytree.tree_leaves(method(token, where, *state))
                        with torch.no_grad():
                            expected = pytree.tree_leaves(eager(token, where, *state))
                        ok, err = compare_outputs(result, expected)
                        assert ok, (cache, placed.report.delegates, mode, err)
                        state = tuple(expected[1:])


@pytest.mark.parametrize("delegate_set", sorted(models.DELEGATE_SETS))
def test_a_resident_cache_never_crosses_and_decodes_as_eager_step_after_step(sim, delegate_set):
    """resident_buffers=True: no byte of cache crosses per step under any delegate set, and three consecutive calls
    of one method equal three eager steps in both modes (the cache updated on the device in between)."""
    module, inputs = _build("buffers")
    exported = export_program(module, inputs)
    placed = place_devices(lower(exported, models.DELEGATE_SETS[delegate_set]), resident_buffers=True)
    assert placed.report.bytes_by_role()[CopyRole.CACHE] == {"h2d": 0, "d2h": 0}
    resident = [b["resident"] for b in placed.report.buffers]
    assert len(resident) == 4 and all(resident) == (delegate_set != "cnn")  # cnn: no delegate reads the cache
    for mode in ("portable", "aten"):
        eager = copy.deepcopy(module)
        with load_method(placed, mode) as method:
            for position, step in enumerate(_next_tokens(3, SMALL["prompt_len"])):
                ours = method(*step)
                with torch.no_grad():
                    theirs = [eager(*step)]
                ok, err = compare_outputs(ours, theirs)
                assert ok, f"{mode} step {position}: max |devcopy - eager| = {err}"
            state = method.buffers()
        assert sorted(state) == [f"{kind}_cache_{i}" for kind in ("key", "value") for i in (0, 1)]
        assert all(torch.allclose(buffer, getattr(eager, name), atol=1e-6) for name, buffer in state.items())


def _functional_on_device():
    """The functional step with its cache update delegated (index_put), the cache inputs passed on the device and
    the outputs left there: ExecuTorch's switches, the input one naming the cache inputs (position is read on the CPU
    too, so skipping every input is refused)."""
    module, inputs = _build("inputs")
    lowered = lower(export_program(module, inputs), (*models.DELEGATE_SETS["default"], "index_put.default"))
    cache = lowered.input_names[2:]
    with pytest.raises(PlacementError, match="'position' to have exactly one user"):
        place_devices(lowered, skip_h2d_for_method_inputs=True)
    placed = place_devices(lowered, skip_h2d_for_method_inputs=cache, skip_d2h_for_method_outputs=True)
    return module, inputs, placed


@pytest.mark.parametrize("mode", ["portable", "aten"])
def test_the_functional_cache_fed_back_on_the_device_never_crosses(sim, mode):
    """The recipe of docs/real_models.md: step after step equal to eager, the cache fed back as DeviceValues (copied
    on the device), no byte of it crossing; per call the caller moves only the logits it reads."""
    module, inputs, placed = _functional_on_device()
    assert placed.report.bytes_by_role()[CopyRole.CACHE] == {"h2d": 0, "d2h": 0}
    token, position, *ours = inputs
    theirs = list(ours)
    with load_method(placed, mode) as method:
        for step, (token, position) in enumerate(_next_tokens(3, SMALL["prompt_len"])):
            before, moved = method.caller_copies, sim.stats.h2d_bytes + sim.stats.d2h_bytes
            logits, *ours = method(token, position, *ours, keep_on_device=True)
            logits = logits.cpu()
            with torch.no_grad():
                expected = pytree.tree_leaves(module(token, position, *theirs))
            ok, err = compare_outputs([logits], expected[:1])
            assert ok, f"step {step}: max |devcopy - eager| = {err}"
            if step:  # the first call takes the cache from the CPU; from then on only the logits are read back
                assert method.caller_copies - before == 1
                crossed = sim.stats.h2d_bytes + sim.stats.d2h_bytes - moved
                assert crossed == sum(placed.report.copy_bytes.values()) + logits.numel() * 4
            theirs = expected[1:]
        assert all(torch.allclose(a.cpu(), b, atol=1e-6) for a, b in zip(ours, theirs, strict=True))
        stale = ours[0]
        method(token, position, *ours, keep_on_device=True)
        with pytest.raises(
            ExecutionError, match="output of call 3, overwritten by call 4; feed each value to the next call"
        ):
            stale.cpu()
        fresh = method(token, position, *inputs[2:], keep_on_device=True)
        with pytest.raises(ExecutionError, match="input 1: .*takes this input on the host"):
            method(token, fresh[1], *inputs[2:])


def test_naming_an_input_the_program_does_not_have_is_refused_with_its_inputs():
    module, inputs = _build("inputs")
    lowered = lower(_exported("inputs")[2], models.DELEGATE_SETS["default"])
    with pytest.raises(InvalidArgumentError, match="names cache_9, which are not graph inputs .* input_ids, position"):
        place_devices(lowered, skip_h2d_for_method_inputs=["cache_9"])
