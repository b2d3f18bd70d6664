"""The HTML report: written, self-contained, with the timeline image, the saved-values table and graphs."""

import dataclasses
import html

import torch

import jointgraph
from jointgraph.cli import main
from jointgraph.report import html as report_html


def _plan():
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    return jointgraph.plan(model, torch.randn(8, 16))


def test_report_has_timeline_and_saved_table(tmp_path):
    plan = _plan()
    path = str(tmp_path / "report.html")
    assert plan.to_html(path) == path
    page = open(path, encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page
    assert "<table id='saved'>" in page
    assert plan.saved
    for s in plan.saved:
        assert f"<td>{html.escape(s.name)}</td>" in page
        assert f"{s.nbytes:,}" in page
    if plan.timeline:
        assert "data:image/png;base64," in page
    else:
        assert "No memory timeline" in page
    assert "<h3>forward</h3>" in page and "<h3>backward</h3>" in page
    assert "src='http" not in page  # self-contained


def test_report_without_timeline_says_so(tmp_path):
    plan = dataclasses.replace(_plan(), peak_bytes=None, timeline=[])
    page = open(report_html.write_plan_html(plan, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert "No memory timeline" in page and "n/a" in page


def test_report_without_graphviz_prints_the_graphs(tmp_path, monkeypatch):
    monkeypatch.setattr("jointgraph.report.graphs.shutil.which", lambda name: None)
    page = open(report_html.write_plan_html(_plan(), str(tmp_path / "r.html")), encoding="utf-8").read()
    assert "Not drawn" in page and "graphviz" in page and "def forward" in page


def test_report_command(tmp_path, capsys):
    path = tmp_path / "mlp.html"
    assert main(["report", "mlp", "--layers", "1", "--width", "16", "--batch", "2", "--seq", "4", "-o",
                 str(path)]) == 0
    page = path.read_text(encoding="utf-8")
    assert "<table id='saved'>" in page and "data:image/" in page
