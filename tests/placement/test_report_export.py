"""A placement report as a file (placement/report_export.py): one self-contained HTML page that parses and shows every
node, the totals and where the prices come from; JSON that is the report's dict plus its provenance."""

import html
import json
from html.parser import HTMLParser

import pytest
from hypothesis import HealthCheck, given, settings
from random_dags import random_dags

from devcopy_lib import export_and_lower, export_report, models, place_devices, placement_diff, report_document
from devcopy_lib.bench.cost_model import default_model
from devcopy_lib.placement.report_export import report_html

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr"}


class _Page(HTMLParser):
    """Checks nesting (every opened element closed, in order) and collects tags, attributes and text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open, self.tags, self.attributes, self.text, self.errors = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += attrs
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if not self.open or self.open.pop() != tag:
            self.errors.append(f"</{tag}> closes nothing open")

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    assert parser.errors == [] and parser.open == [], (parser.errors, parser.open)
    return parser


def _placed(name="cpu_between", strategy="executorch"):
    return place_devices(export_and_lower(*models.MODELS[name]()), strategy=strategy, cost_model=default_model())


def test_the_html_report_is_one_self_contained_page(tmp_path):
    placed = _placed()
    path = export_report(placed.report, str(tmp_path / "r.html"), "cpu_between", default_model())
    page = (tmp_path / "r.html").read_text()
    assert path == str(tmp_path / "r.html") and page.startswith("<!DOCTYPE html>")
    parsed = parse(page)
    assert "http://" not in page and "https://" not in page  # nothing fetched: no script, stylesheet or image link
    assert not {"script", "link", "img", "iframe"} & set(parsed.tags)
    assert not [value for name, value in parsed.attributes if name in ("src", "href")]
    assert {"style", "svg", "table"} <= set(parsed.tags)
    text = " ".join(parsed.text)
    for row in placed.report.rows:  # every node with its reason, copies with their predicted time
        assert row.name in text and row.reason in text
        if row.predicted_s is not None:
            assert f"{row.predicted_s * 1e6:.1f} us" in text
    assert "NVIDIA H200 (devcopy engine, wall clock, pinned host memory)" in text
    assert "H2D copies per call" in text and "4 (256 B)" in text  # the totals
    assert placed.report.roles_line() in text  # and their split by role
    assert "dedupe saves 1 H2D, 64 B" in text and "same copies" in text  # the strategies compared: dedupe, peer


def test_the_json_report_is_the_reports_dict_with_its_provenance(tmp_path):
    placed = _placed()
    export_report(placed.report, str(tmp_path / "r.json"), "cpu_between", default_model(), backend="simulated")
    written = json.loads((tmp_path / "r.json").read_text())
    provenance = written.pop("provenance")
    assert written == json.loads(json.dumps(placed.report.to_dict()))
    assert provenance["model"] == "cpu_between" and provenance["backend"] == "simulated"
    assert provenance["cost_model"] == default_model().source and provenance["priced_memory"] == "pinned"


def test_an_unpriced_report_says_so():
    placed = place_devices(export_and_lower(*models.add()))
    text = " ".join(parse(report_html(report_document(placed.report))).text)
    assert "not priced: no cost model was given" in text


def test_a_report_that_holds_a_diff_shows_it():
    report = {**_placed().report.to_dict(), "diff": placement_diff(_placed(), _placed(strategy="dedupe"))}
    text = " ".join(parse(report_html(report_document(report, "cpu_between"))).text)
    assert "diff executorch -> dedupe: 0 copies appear, 1 vanish" in text and "b_h2d_1" in text


@pytest.mark.parametrize("name, problem", [("r.txt", "ends in '.txt'"), ("missing/r.html", "does not exist")])
def test_a_bad_path_is_refused_and_nothing_is_written(tmp_path, name, problem):
    with pytest.raises((ValueError, OSError), match=problem):
        export_report(_placed().report, str(tmp_path / name))
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(dag=random_dags())
def test_any_placement_renders_a_page_that_parses_and_names_every_node(dag):
    report = place_devices(export_and_lower(*dag)).report
    page = report_html(report_document(report))
    parse(page)
    for row in report.rows:
        assert html.escape(row.reason) in page


def test_a_saving_the_rounding_hides_is_given_exactly():
    from devcopy_lib.placement.report import saving_text

    assert saving_text(6_600_000, 6_600_000 - 776) == "6.3 MiB -> 6.3 MiB per call, 776 B less"
    assert saving_text(2048, 1024) == "2 KiB -> 1 KiB per call"  # readable apart: nothing added
    assert saving_text(100, 100) == "100 B -> 100 B per call"
