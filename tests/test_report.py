"""The HTML report: written, self-contained, with the timeline image, the saved-values table and graphs."""

import dataclasses
import html

import pytest
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
    assert "<table id='saved' class='sortable'>" in page
    assert plan.saved
    for s in plan.saved:
        assert f"<td>{html.escape(s.name)}</td>" in page
        assert f"data-sort='{s.nbytes}'" in page
    assert plan.timeline and "data:image/png;base64," in page
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
    assert "<table id='saved' class='sortable'>" in page and "data:image/" in page


def _gpt_plan(**options):
    from jointgraph.bench import ZooShape, build_workload

    work = build_workload("gpt", ZooShape(layers=1, width=32, batch=2, seq=16))
    return jointgraph.plan(work.step, *work.inputs, **options), work


def test_timeline_by_kind_sums_to_live_bytes():
    plan, work = _gpt_plan(partitioner="default")
    assert len(plan.timeline_by_kind) == len(plan.timeline) > 0
    for (_, _, live), kinds in zip(plan.timeline, plan.timeline_by_kind, strict=True):
        assert set(kinds) == {"inputs", "communication", "gradients", "saved", "temporaries"}
        assert sum(kinds.values()) == live and min(kinds.values()) >= 0
    phases = [phase for phase, _, _ in plan.timeline]
    first_bw = phases.index("backward")
    params = sum(p.numel() * p.element_size() for p in work.step.parameters())
    # inputs: parameters and token ids, live all step; no gradient before the backward; all saved bytes
    # are allocated by the end of the forward, and all are freed by the end of the backward.
    assert {k["inputs"] for k in plan.timeline_by_kind} == {plan.timeline_by_kind[0]["inputs"]}
    assert plan.timeline_by_kind[0]["inputs"] >= params
    assert all(k["gradients"] == 0 for k in plan.timeline_by_kind[:first_bw])
    assert plan.timeline_by_kind[first_bw - 1]["saved"] >= plan.saved_bytes - plan.timeline_by_kind[0]["inputs"]
    assert plan.timeline_by_kind[-1]["saved"] == 0
    assert plan.timeline_by_kind[-1]["gradients"] >= params


def test_timeline_by_kind_counts_offloaded_values_as_nothing():
    from jointgraph.hooks import SavedTensorPolicy

    kept, _ = _gpt_plan(partitioner="default")
    offloaded, _ = _gpt_plan(partitioner="default", saved_tensors=SavedTensorPolicy(offload=True))
    first_bw = [p for p, _, _ in offloaded.timeline].index("backward")
    assert offloaded.timeline_by_kind[first_bw - 1]["saved"] < kept.timeline_by_kind[first_bw - 1]["saved"]
    assert offloaded.peak_bytes < kept.peak_bytes


def test_timeline_png_stacks_kinds_and_draws_the_budget(monkeypatch):
    import matplotlib.axes

    from jointgraph.report.timeline import plot_timeline

    plan, _ = _gpt_plan(partitioner="default")
    calls = {}
    for name in ("stackplot", "axhline"):
        original = getattr(matplotlib.axes.Axes, name)

        def spy(self, *args, _name=name, _original=original, **kwargs):
            calls.setdefault(_name, []).append((args, kwargs))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(matplotlib.axes.Axes, name, spy)
    budget = int(plan.peak_bytes * 0.8)
    png = plot_timeline(plan, budget_bytes=budget)
    assert png.startswith(b"\x89PNG")
    (args, kwargs), = calls["stackplot"]
    assert kwargs["labels"] == ["parameters and inputs", "gradients", "saved for the backward", "temporaries"]
    stacked_top = [sum(column) for column in zip(*args[1:], strict=True)]
    scale = 1 << 20 if plan.peak_bytes >= 1 << 20 else 1 << 10
    assert max(stacked_top) * scale == pytest.approx(plan.peak_bytes)
    (args, kwargs), = calls["axhline"]
    assert args[0] * scale == pytest.approx(budget) and "budget" in kwargs["label"]


@pytest.mark.filterwarnings("ignore:memory budget")
def test_report_with_budget_line_and_pareto(tmp_path):
    plan, work = _gpt_plan(partitioner="budget", memory_budget=0.6)
    points = jointgraph.pareto(work.step, *work.inputs, fractions=(1.0, 0.5))
    page = open(report_html.write_plan_html(plan, str(tmp_path / "r.html"), budget_bytes=123_456, pareto=points),
                encoding="utf-8").read()
    assert "<tr><th>memory budget</th><td>120.56 KiB</td></tr>" in page
    assert "the dashed line is the budget" in page
    assert "<table id='peak-by-kind'>" in page
    assert "<h2 id='pareto'>" in page and "<table id='pareto-points'>" in page
    assert page.count("data:image/png;base64,") == 2
    for p in points:
        assert report_html._bytes(p.peak_bytes) in page


@pytest.mark.filterwarnings("ignore:memory budget")
def test_report_of_a_fractional_budget_without_bytes_says_why_no_line(tmp_path):
    plan, _ = _gpt_plan(partitioner="budget", memory_budget=0.6)
    page = open(plan.to_html(str(tmp_path / "r.html")), encoding="utf-8").read()
    assert "no budget line" in page and "<h2 id='pareto'>" not in page


def test_report_command_budget_and_pareto(tmp_path):
    from jointgraph.bench import ZooShape, budget_bytes, build_workload

    path = tmp_path / "gpt.html"
    args = ["--layers", "1", "--width", "32", "--batch", "2", "--seq", "16"]
    assert main(["report", "gpt", *args, "--budget", "1.0", "--pareto", "-o", str(path)]) == 0
    page = path.read_text(encoding="utf-8")
    work = build_workload("gpt", ZooShape(layers=1, width=32, batch=2, seq=16))
    expected = budget_bytes(work, 1.0)
    assert expected == int(1.0 * jointgraph.plan(work.step, *work.inputs, partitioner="default").peak_bytes)
    assert f"<tr><th>memory budget</th><td>{report_html._bytes(expected)}</td></tr>" in page
    assert "<h2 id='pareto'>" in page and page.count("data:image/png;base64,") == 2


def test_report_names_layers_and_what_is_live_at_the_peak(tmp_path):
    """Issue 17: the timeline's x-axis names layers, the peak says which kept values are live there,
    the saved table holds the explain rows (sortable), graphs are coloured by decision."""
    from jointgraph.bench import ZooShape, build_workload
    from jointgraph.report.explain import explain, live_at_peak, timeline_layers

    work = build_workload("gpt", ZooShape(layers=2, width=64, batch=2, seq=64))   # activations dominate
    plan = jointgraph.plan(work.step, *work.inputs)
    layers = timeline_layers(plan)
    assert len(layers) == len(plan.timeline)
    assert {"model.blocks.0", "model.blocks.1"} <= set(layers)
    forward = [layer for (phase, _, _), layer in zip(plan.timeline, layers, strict=True) if phase == "forward"]
    assert forward.index("model.blocks.0") < forward.index("model.blocks.1")   # execution order
    live = live_at_peak(plan)
    kept = {r.name: r for r in explain(plan).rows if r.holds_memory}
    assert live and all(r.name in kept for r in live)
    assert [r.nbytes for r in live] == sorted((r.nbytes for r in live), reverse=True)
    page = open(report_html.write_plan_html(plan, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert "<table id='live-at-peak'>" in page and live[0].name in page
    assert "The x-axis names the layer" in page
    assert "<table id='saved' class='sortable'>" in page and "<script>" in page
    for row in explain(plan).rows:
        assert f"<tr class='{row.decision}'>" in page
    # parameters and inputs are folded into a closed <details>, each still listed there
    held = explain(plan).held_anyway
    folded = page[page.index("<table id='held-anyway'"):]
    assert held and f"{len(held)} parameters and inputs the backward reads" in page
    assert all(f"<td>{r.name}</td>" in folded for r in held)
    assert all(f"<td>{r.name}</td>" not in page[:page.index("<table id='held-anyway'")] for r in held)


def _drawn_fills(svg: str) -> dict[str, str]:
    """node name -> fill colour of its box in graphviz's SVG."""
    import re

    return dict(re.findall(r'class="node">\s*<title>([^<]+)</title>\s*<path fill="([^"]+)"', svg))


def _svgs(page: str) -> list[str]:
    import base64
    import re

    return [base64.b64decode(data).decode() for data in re.findall(r"data:image/svg\+xml;base64,([^']+)'", page)]


def test_report_graphs_coloured_by_decision(tmp_path):
    """The graphs section always prints both graphs; with graphviz's dot it draws them, each value
    the backward needs filled with its decision's colour (real decisions of a real plan)."""
    import shutil

    from jointgraph.report.explain import DECISION_WORDS
    from jointgraph.report.graphs import DECISION_COLORS, INPUT_COLOR

    plan, _ = _gpt_plan()   # mincut keeps some values and recomputes others
    decisions = {s.name: DECISION_WORDS[s.decision] for s in plan.saved}
    assert {"kept", "recomputed"} <= set(decisions.values())
    page = open(report_html.write_plan_html(plan, str(tmp_path / "r.html")), encoding="utf-8").read()
    assert "<h3>forward</h3>" in page and "<h3>backward</h3>" in page and "def forward" in page
    for word, colour in DECISION_COLORS.items():   # the legend names every colour
        assert f"background:{colour}" in page and word in page
    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot is not on PATH (apt-get install graphviz; .ci/run tries): the drawing "
                    "assertions need it")
    pytest.importorskip("pydot", reason="pydot (the report extra) draws the graphs")
    svgs = _svgs(page)
    assert len(svgs) == 2 and "Not drawn" not in page
    fills = _drawn_fills(svgs[0])   # the forward, drawn node by node (under MAX_NODE_DRAWING)
    forward_names = {n.name for n in plan.forward.graph.nodes}
    assert fills.keys() == forward_names
    for node in plan.forward.graph.nodes:
        expected = DECISION_COLORS[decisions[node.name]] if node.name in decisions else \
            INPUT_COLOR if node.op == "placeholder" else "white"
        assert fills[node.name] == expected, node.name
    assert {fills[n] for n in decisions if n in fills} == {DECISION_COLORS["kept"], DECISION_COLORS["recomputed"]}


def test_graph_drawing_coloured_by_decision_and_summarized(tmp_path):
    import shutil

    pytest.importorskip("pydot", reason="pydot (the report extra) draws the graphs")
    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot is not on PATH (apt-get install graphviz; .ci/run tries)")
    from jointgraph.bench import ZooShape, build_workload
    from jointgraph.report.graphs import DECISION_COLORS, MAX_NODE_DRAWING, draw_graph

    small = _plan()
    words = list(DECISION_COLORS)   # every decision, one per saved value in turn
    decisions = {s.name: words[i % len(words)] for i, s in enumerate(small.saved)}
    drawing = draw_graph(small.forward, "forward", decisions)
    fills = _drawn_fills(drawing.svg.decode())
    assert "summarized" not in drawing.note and decisions.keys() & fills.keys()
    for name, word in decisions.items():
        if name in fills:
            assert fills[name] == DECISION_COLORS[word], name
    work = build_workload("gpt", ZooShape(layers=2, width=32, batch=2, seq=16))
    big = jointgraph.plan(work.step, *work.inputs)
    assert len(big.backward.graph.nodes) > MAX_NODE_DRAWING
    drawing = draw_graph(big.backward, "backward", {s.name: "recomputed" for s in big.saved})
    svg = drawing.svg.decode()
    assert "summarized per layer" in drawing.note and "model.blocks.1" in svg
    assert svg.count("<g id=\"node") < 40   # one box per layer, not hundreds
    assert DECISION_COLORS["recomputed"] in _drawn_fills(svg).values()


def test_eager_memory_curve_places_allocations_by_op_fraction():
    """Note [Eager's memory curve]: an allocation made after half of the forward's ops lies at about
    half of the forward; values are the running sum of the allocator events on top of the base."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from jointgraph.bench.curve import BACKWARD_RANGE, FORWARD_RANGE, curve_from_events

    x = torch.randn(16, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with record_function(FORWARD_RANGE):
            y = x
            for _ in range(10):
                y = y + 1
            big = torch.ones(1 << 18)   # 1 MiB, kept to the end
            for _ in range(9):
                y = y * 1.5
            loss = y.sum()
        with record_function(BACKWARD_RANGE):
            loss.backward()
    curve = curve_from_events(prof.profiler.kineto_results.events(), base_bytes=1000)
    assert curve.forward[0] == (0.0, 1000)
    jumps = [(f, b - a) for (_, a), (f, b) in zip(curve.forward, curve.forward[1:], strict=False)]
    fraction, size = max(jumps, key=lambda j: j[1])
    assert size == big.numel() * 4 and 0.4 < fraction < 0.65
    assert curve.peak_bytes >= 1000 + big.numel() * 4
    assert curve.backward and all(0 <= f <= 1 for f, _ in curve.backward)
