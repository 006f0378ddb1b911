"""The one pricing of a copy (bench.cost_model.CopyPricer / price_copy): the host memory kind follows the backend,
the clock follows the line, a missing line prices nothing; the one time formatter; the one savings wording."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devcopy_lib.bench.cost_model import CostModel, Line, basis_text, copy_pricer, default_model, price_copy
from devcopy_lib.names import format_seconds
from devcopy_lib.placement.report import savings_text


def _model() -> CostModel:
    lines = {
        ("h2d", "pinned"): Line(40e-6, 50.0),
        ("h2d", "pageable"): Line(10e-6, 10.0),
    }
    source = {"backend": "cupy", "device": "GPU X", "clock": "wall", "pinned_lines_from": {"clock": "events"}}
    return CostModel(lines, source)


def test_the_host_memory_kind_follows_the_backend_and_the_clock_follows_the_line():
    simulated, cupy = copy_pricer("simulated", model=_model()), copy_pricer("cupy", model=_model())
    assert (simulated.memory, cupy.memory) == ("pageable", "pinned")  # only CuPy pins a method's host buffers
    assert simulated.price("h2d", 1000).seconds == pytest.approx(10e-6 + 1000 / 10e9)
    assert cupy.price("h2d", 1000).seconds == pytest.approx(40e-6 + 1000 / 50e9)
    assert (simulated.price("h2d", 8).clock, cupy.price("h2d", 8).clock) == ("wall", "events")
    assert cupy.price("h2d", 8, memory="pageable").seconds == simulated.price("h2d", 8).seconds
    assert cupy.basis() == {"backend": "cupy", "memory": "pinned", "clock": "events", "measured_on": "GPU X (cupy)"}
    assert basis_text(cupy.basis()) == (
        "copy times predicted for the cupy backend: pinned host memory, events clock, cost model measured on "
        "GPU X (cupy)"
    )


def test_the_selected_backend_is_the_default(monkeypatch):
    monkeypatch.setenv("DEVCOPY_BACKEND", "simulated")
    price = price_copy("h2d", 64)
    assert (price.backend, price.memory, price.nbytes) == ("simulated", "pageable", 64)
    assert price.seconds == default_model().predict("h2d", 64, "pageable")
    assert price.label == (  # the H200's time, said so: the simulated backend has no device of its own to time
        f"as on NVIDIA H200 (cupy), not a time of the simulated backend, pageable host memory, wall clock: {price.text}"
    )


def test_a_direction_without_a_line_is_not_priced_and_predict_says_so():
    pricer = copy_pricer("simulated", model=_model())
    assert pricer.price("d2d", 64).seconds is None and pricer.price("d2d", 64).text == ""
    with pytest.raises(ValueError, match="No cost line for direction='d2d'"):
        pricer.predict("d2d", 64)
    with pytest.raises(ValueError, match="nbytes must be >= 0"):
        pricer.price("h2d", -1)


def test_bad_backend_or_memory_names_the_valid_ones():
    with pytest.raises(ValueError, match="Unknown backend 'gpu'"):
        copy_pricer("gpu")
    with pytest.raises(ValueError, match="Unknown host memory kind 'locked'. Valid: pinned, pageable"):
        copy_pricer("simulated", memory="locked")


@pytest.mark.parametrize(
    "seconds, text",
    [(None, ""), (0.0, "0.0 us"), (1.0943e-05, "10.9 us"), (0.0249159, "24.9 ms"), (2.5, "2.50 s"), (-4e-6, "-4.0 us")],
)
def test_format_seconds_picks_us_ms_or_s(seconds, text):
    assert format_seconds(seconds) == text


@given(st.floats(min_value=-1e4, max_value=1e4, allow_nan=False))
def test_format_seconds_never_writes_e_notation_and_names_a_unit(seconds):
    text = format_seconds(seconds)
    assert "e" not in text.split()[0] and text.split()[1] in ("us", "ms", "s")


def test_savings_are_worded_one_way_with_what_a_strategy_adds():
    assert savings_text("dedupe", "executorch", {"h2d": 1, "d2h": 0}, {"h2d": 4096, "d2h": 0}, 0) == (
        "dedupe saves 1 H2D, 4 KiB against executorch"
    )
    assert savings_text(
        "peer", "executorch", {"h2d": 1, "d2h": 1, "d2d": -1}, {"h2d": 64, "d2h": 64, "d2d": -64}, -128
    ) == (
        "peer saves 1 H2D, 64 B and 1 D2H, 64 B, adds 1 D2D, 64 B against executorch; holds 128 B less device "
        "memory at peak"
    )
    assert savings_text("dedupe", "peer", {"h2d": 0}, {"h2d": 0}, 2048) == (
        "dedupe saves no copies against peer; holds 2 KiB more device memory at peak"
    )


@pytest.mark.gpu
def test_on_cuda_a_profiled_copy_and_the_placement_are_priced_for_pinned_memory(capsys):
    """CuPy pins a method's host buffers: its copies are priced on the pinned lines, as the explorer prices them."""
    import json

    from devcopy_lib.cli import main

    assert main(["run", "add", "--backend", "cupy", "--profile", "3", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["pricing"]["memory"] == "pinned" and run["pricing"]["clock"] == "events"
    copies = [row for row in run["profile"] if row["kind"] == "copy"]
    assert copies and all(row["memory"] == "pinned" for row in copies)
    assert all(0 < row["predicted_error"] < 1 for row in copies)  # the pinned bands were checked out of sample
    direction = {"et_copy::_h2d_copy.out": "h2d", "et_copy::_d2h_copy.out": "d2h"}
    assert [row["predicted_s"] for row in copies] == [
        price_copy(direction[row["op"]], row["bytes"], backend="cupy").seconds for row in copies
    ]
    assert main(["place", "add", "--backend", "cupy", "--json"]) == 0
    place = json.loads(capsys.readouterr().out)
    assert place["pricing"] == run["pricing"]
    priced = [n["predicted_s"] for n in place["nodes"] if n["kind"] in ("h2d", "d2h")]
    assert priced == [row["predicted_s"] for row in copies]
