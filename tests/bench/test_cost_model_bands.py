"""The cost model's size bands: a small-copy line under 1 MiB (the driver's fixed cost), fitted from a method's small
profiled copies; the error each band showed out of sample, quoted by every price of that band."""

import pytest

from devcopy_lib.bench.cost_model import (
    SMALL_COPY_BYTES,
    CostModel,
    ErrorBand,
    Line,
    basis_text,
    copy_pricer,
    error_bands,
)

MiB = 1 << 20


def _copy(op, nbytes, seconds, memory="pinned"):
    return {"op": f"et_copy::_{op}_copy.out", "bytes": nbytes, "measured_s": seconds, "memory": memory}


def _line_points(latency, gbps, sizes):
    return [(n, latency + n / (gbps * 1e9)) for n in sizes]


def _refit() -> CostModel:
    """A model whose pinned lines come from copies on two lines: 12 µs + 20 GB/s below 1 MiB, 25 µs + 50 GB/s up."""
    copies = [_copy("h2d", n, t) for n, t in _line_points(12e-6, 20.0, [64, 4096, 65536, 262144])]
    copies += [_copy("h2d", n, t) for n, t in _line_points(25e-6, 50.0, [MiB, 4 * MiB, 64 * MiB])]
    copies += [_copy("h2d", 64, 1.0, memory="pageable")]  # never fitted: only pinned copies refit pinned lines
    base = CostModel({("h2d", "pinned"): Line(99e-6, 1.0), ("h2d", "pageable"): Line(10e-6, 10.0)})
    return base.with_planned_copies(copies, {"clock": "events"})


def test_copies_under_1_mib_are_priced_by_their_own_line_and_larger_ones_by_the_bandwidth_line():
    model = _refit()
    assert model.predict("h2d", 64) == pytest.approx(12e-6 + 64 / 20e9, rel=1e-6)
    assert model.predict("h2d", SMALL_COPY_BYTES - 1) == pytest.approx(12e-6 + (MiB - 1) / 20e9, rel=1e-6)
    assert model.predict("h2d", SMALL_COPY_BYTES) == pytest.approx(25e-6 + MiB / 50e9, rel=1e-6)
    assert model.predict("h2d", 64, "pageable") == pytest.approx(10e-6 + 64 / 10e9, rel=1e-6)  # no small line


def test_a_band_with_one_size_keeps_the_line_it_had():
    base = CostModel({("d2h", "pinned"): Line(7e-6, 30.0)})
    model = base.with_planned_copies([_copy("d2h", 64, 1e-5), _copy("d2h", 64, 2e-5)], {"clock": "events"})
    assert model.small_lines == {} and model.lines == base.lines  # exact: nothing refitted, the same objects


def test_error_bands_are_the_90th_percentile_and_worst_error_per_band():
    model = CostModel({("h2d", "pinned"): Line(10e-6, 1e6), ("d2h", "pinned"): Line(1.0, 1e9)})  # ~10 µs, ~1 s
    small = [_copy("h2d", 64, 10e-6 / ratio) for ratio in (1.0, 1.02, 0.95, 1.1, 1.05, 0.9, 1.01, 0.99, 1.03, 1.5)]
    large = [_copy("h2d", MiB, 10e-6 / 1.04), _copy("d2h", MiB, 1.0), _copy("h2d", MiB, 1.0, memory="pageable")]
    bands = error_bands(model, small + large, "run X")
    assert [(b.low_bytes, b.high_bytes, b.copies, b.run) for b in bands] == [
        (0, MiB, 10, "run X"),
        (MiB, None, 2, "run X"),
    ]
    assert bands[0].error == pytest.approx(0.1, abs=1e-3) and bands[0].worst == pytest.approx(0.5, abs=1e-3)
    assert bands[1].worst == pytest.approx(0.04, abs=1e-3)
    assert bands[0].text == "±10% for copies under 1 MiB (90% of 10 out-of-sample copies within it, worst 50%)"
    assert bands[1].sizes == "of 1 MiB and up"


def test_a_checked_model_quotes_its_band_on_every_price_and_in_its_basis():
    bands = (
        ErrorBand("pinned", 0, MiB, 0.2, 0.5, 100, "run X"),
        ErrorBand("pinned", MiB, None, 0.08, 0.17, 14, "run X"),
    )
    model = _refit().with_checks(bands)
    pricer = copy_pricer("cupy", model=model)
    assert pricer.price("h2d", 64).error == bands[0] and pricer.price("h2d", 64 * MiB).error == bands[1]
    assert pricer.error("h2d", 4096) == pytest.approx(0.2) and pricer.error("h2d", 2 * MiB) == pytest.approx(0.08)
    assert pricer.price("h2d", 64, memory="pageable").error is None and pricer.error("h2d", 64, "pageable") is None
    assert "; error ±20% for copies under 1 MiB (90% of 100" in basis_text(pricer.basis())
    assert "±8% for copies of 1 MiB and up (90% of 14 out-of-sample copies within it, worst 17%)" in (
        basis_text(pricer.basis())
    )
    assert "error" not in copy_pricer("simulated", model=model).basis()  # pageable prices were never checked


def test_bands_and_checks_survive_a_json_round_trip(tmp_path):
    model = _refit().with_checks([ErrorBand("pinned", MiB, None, 0.08, 0.17, 14, "run X")])
    model.save(str(tmp_path / "m.json"))
    again = CostModel.load(str(tmp_path / "m.json"))
    assert again.close_to(model) and again.checks == model.checks and again.small_lines == model.small_lines
    assert not again.close_to(again.with_checks(()))
    assert not again.close_to(CostModel(again.lines, again.source, {}, again.checks))


def test_the_placement_report_and_the_explorer_quote_each_copys_error():
    from devcopy_widgets.graph_view_data import graph_elements

    from devcopy_lib import models
    from devcopy_lib.lowering.lower import export_and_lower
    from devcopy_lib.placement.place import place_devices

    bands = (ErrorBand("pinned", 0, MiB, 0.2, 0.5, 100, "run X"),)
    lines = {("h2d", "pinned"): Line(12e-6, 20.0), ("d2h", "pinned"): Line(12e-6, 20.0)}
    pricer = copy_pricer("cupy", model=CostModel(lines, {"clock": "events"}, checks=bands))
    module, inputs = models.add()
    placed = place_devices(export_and_lower(module, inputs), cost_model=pricer)
    copies = [row for row in placed.report.rows if row.kind in ("h2d", "d2h")]
    assert copies and all(row.predicted_error == pytest.approx(0.2) for row in copies)
    assert all(row.predicted_error is None for row in placed.report.rows if row.kind not in ("h2d", "d2h"))
    nodes, _ = graph_elements(placed)
    texts = [n["predicted_text"] for n in nodes if n["kind"] in ("h2d", "d2h")]
    assert texts and all(text.endswith(" ±20%") and "pinned host memory, events clock: " in text for text in texts)
    assert pricer.price("h2d", 64).label.endswith(" ±20%")
