"""The self-contained HTML report of a Plan: memory timeline, saved values, Pareto curve, graph drawings.

Every image is embedded (base64), so the file can be mailed or attached to an issue as is.

Example::

    plan = jointgraph.plan(model, x)
    plan.to_html("report.html")          # same as write_plan_html(plan, "report.html")
    write_plan_html(plan, "report.html", budget_bytes=12_000_000, pareto=jointgraph.pareto(model, x))
"""

from __future__ import annotations

import base64
import datetime
import html
from typing import Any

import torch

from ..ir import Decision
from ..units import fmt_bytes, fmt_seconds
from .columns import BENCH_COLUMNS, PEAK_METHOD, bench_cells
from .graphs import draw_graph
from .timeline import KIND_STYLES, plot_pareto, plot_timeline, shown_kinds

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1200px;
       color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 0.85em; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: .5em 1em; }
.meta { color: #666; font-size: .9em; }
pre { background: #f7f7f7; padding: 1em; overflow-x: auto; font-size: 0.78em; max-height: 40em; }
img.plot { max-width: 100%; }
table.sortable th { cursor: pointer; } tr.recomputed td { color: #777; }
td.num, table.sortable td:nth-child(1), table.sortable td:nth-child(4) { white-space: nowrap; }
.graph { max-width: 100%; overflow: auto; max-height: 60em; border: 1px solid #eee; }
.legend > span { margin-right: 1.5em; font-size: .85em; white-space: nowrap; }
.swatch { display: inline-block; width: 1em; height: 1em; border: 1px solid #999; vertical-align: middle;
          margin-right: .35em; border-radius: 2px; }
.graph img { max-width: 100%; cursor: zoom-in; } .graph img.zoom { max-width: none; cursor: zoom-out; }
"""


### Main API

def write_plan_html(plan: Any, path: str, *, title: str = "jointgraph plan", bench: Any = None,
                    budget_bytes: int | None = None, pareto: list | None = None) -> str:
    """Write ``plan`` as one self-contained HTML file at ``path`` and return ``path``.

    ``bench``, a ``jointgraph.bench.BenchResult``, adds the side-by-side table at the top.
    ``budget_bytes`` is the budget line on the timeline (an int ``memory_budget`` is drawn without
    it; a fractional one needs it: the default plan's peak is not part of ``plan``).
    ``pareto``, the points of ``jointgraph.pareto``, adds the budget/step-time curve.
    """
    if budget_bytes is None and bench is not None:
        budget_bytes = bench.budget_bytes
    budget = getattr(plan.options, "memory_budget", None)
    if budget_bytes is None and isinstance(budget, int) and not isinstance(budget, bool):
        budget_bytes = budget
    sections = [_header(plan, title, budget_bytes)]
    if bench is not None:
        sections.append(_bench_section(bench))
    sections.append(_timeline_section(plan, budget_bytes, _eager_memory(bench)))
    if pareto is not None:
        sections.append(_pareto_section(plan, pareto, budget_bytes))
    sections += [_saved_section(plan), _graphs_section(plan)]
    page = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(sections) + "\n</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


### Sections

def _header(plan: Any, title: str, budget_bytes: int | None) -> str:
    options = plan.options
    shown = ", ".join(f"{k}={v!r}" for k, v in vars(options).items()) if options is not None else "n/a"
    timings = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in (plan.timings or {}).items()) or "n/a"
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return (f"<h1>{html.escape(title)}</h1>"
            f"<p class='meta'>written {now} by jointgraph · torch {html.escape(torch.__version__)}</p>"
            "<table>"
            f"<tr><th>simulated peak (one training step)</th><td>{_bytes(plan.peak_bytes)}</td></tr>"
            + (f"<tr><th>memory budget</th><td>{_bytes(budget_bytes)}</td></tr>" if budget_bytes else "") +
            f"<tr><th>saved for the backward</th><td>{_bytes(plan.saved_bytes)} in "
            f"{len(plan.saved)} values</td></tr>"
            + (f"<tr><th>estimated sizes</th><td>{html.escape(plan.size_policy)}</td></tr>"
               if plan.size_policy else "") +
            f"<tr><th>options</th><td>{html.escape(shown)}</td></tr>"
            f"<tr><th>compile phases</th><td>{html.escape(timings)}</td></tr></table>")


def _bench_section(bench: Any) -> str:
    rows = []
    for r in bench.results:
        if r.error:
            rows.append(f"<tr><td>{html.escape(r.name)}</td><td colspan='{len(BENCH_COLUMNS) - 1}'>failed: "
                        f"{html.escape(r.error)}</td></tr>")
            continue
        rows.append(f"<tr><td>{html.escape(r.name)}</td>"
                    + "".join(f"<td class='num'>{html.escape(c)}</td>" for c in bench_cells(r)) + "</tr>")
    o = bench.options
    method = PEAK_METHOD["cuda" if o.device.startswith("cuda") else "cpu"]
    return (f"<h2>Side by side: {html.escape(bench.workload)}</h2>"
            f"<p class='meta'>{html.escape(bench.description)}; {bench.parameters:,} parameters; layers={o.layers} "
            f"width={o.width} batch={o.batch} seq={o.seq} {o.dtype} on {o.device}; median of {o.repeat} steps. "
            f"Peak measured with {html.escape(method)}.</p>"
            "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in BENCH_COLUMNS) + "</tr>"
            + "".join(rows) + "</table>")


def _eager_memory(bench: Any) -> Any:
    """Eager's measured memory from a bench run: its memory curve, else (on CUDA) its peak bytes."""
    eager = next((r for r in getattr(bench, "results", ()) if r.kind == "eager" and not r.error), None)
    if eager is None:
        return None
    return eager.memory_curve if eager.memory_curve is not None else eager.measured_peak_bytes


def _timeline_section(plan: Any, budget_bytes: int | None, eager: Any = None) -> str:
    from .explain import timeline_layers

    png = plot_timeline(plan, budget_bytes=budget_bytes, layers=timeline_layers(plan), eager=eager)
    if png is None:
        return ("<h2>Memory timeline</h2><p class='note'>No memory timeline: the simulator returned none for this "
                "plan (simulated peak: n/a).</p>")
    budget = getattr(plan.options, "memory_budget", None)
    note = ""
    if budget is not None and budget_bytes is None:
        note = (f"<p class='note'>Budget {html.escape(repr(budget))} of the default plan's peak: no budget line "
                "(pass <code>budget_bytes=</code>, or use <code>jointgraph report --budget</code>).</p>")
    return ("<h2>Memory timeline</h2><p class='meta'>Simulated live bytes after each node of the forward, then the "
            "backward, stacked by kind: parameters and inputs, gradients, values saved for the backward (from their "
            "allocation in the forward) and temporaries, each freed after its last use. The peak is marked"
            + (" and the dashed line is the budget" if budget_bytes else "")
            + ("; the purple curve is eager's live memory, measured by the bench (torch.profiler allocator "
               "events), its forward drawn over the forward and its backward over the backward, each at the "
               "fraction of the phase's ATen ops it had run" if eager is not None and not isinstance(eager, int) else
               "; the dash-dotted line is eager's measured peak" if eager else "")
            + ". The x-axis names the layer each stretch of nodes belongs to.</p>"
            + _img("image/png", png, "memory timeline", "plot") + note + _resharding_note(plan) + _peak_split(plan)
            + _live_at_peak(plan))


def _resharding_note(plan: Any) -> str:
    """Note [Inputs the caller reshards]: which inputs leave after the forward and come back."""
    resharded = plan.resharded_bytes
    if not resharded:
        return ""
    gather = plan.gather_bytes
    buffer = (f" FSDP's all-gather buffer ({fmt_bytes(gather)}) lives through the forward and briefly at the "
              "backward's start." if gather else "")
    return (f"<p class='note' id='resharding'>FSDP2 reshards {fmt_bytes(resharded)} of parameters: gathered right "
            "before the forward, freed after it (<code>resharded inputs freed</code>) and gathered again before the "
            f"backward (<code>resharded inputs gathered</code>).{buffer} Live before the step: "
            f"{fmt_bytes(plan.entry_bytes or 0)}; simulated peak above it: "
            f"{fmt_bytes(plan.peak_bytes - (plan.entry_bytes or 0))}.</p>")


def _peak_split(plan: Any) -> str:
    """The table of what is live at the peak, by kind."""
    by_kind = plan.timeline_by_kind
    if len(by_kind) != len(plan.timeline):
        return ""
    i = max(range(len(plan.timeline)), key=lambda j: plan.timeline[j][2])
    phase, node, live = plan.timeline[i]
    cells = "".join(f"<tr><th>{html.escape(KIND_STYLES[kind][0])}</th><td class='num'>"
                    f"{_bytes(by_kind[i].get(kind, 0))}</td></tr>" for kind in shown_kinds(by_kind))
    return (f"<table id='peak-by-kind'><tr><th colspan='2'>live at the peak ({html.escape(phase)}: "
            f"{html.escape(node)})</th></tr>{cells}<tr><th>total</th><td class='num'>{_bytes(live)}</td></tr></table>")


def _live_at_peak(plan: Any) -> str:
    """The largest kept values live at the peak, and what would lower it."""
    from .explain import live_at_peak

    rows = live_at_peak(plan)
    if not rows:
        return ("<p class='note' id='live-at-peak'>No kept value is live at the peak: it is made of parameters, "
                "gradients and temporaries, which recomputing, compressing or offloading saved values does not "
                "lower.</p>") if plan.timeline and plan.backward is not None else ""
    cells = "".join(f"<tr><td class='num'>{_bytes(r.nbytes)}</td><td>{html.escape(r.name)}</td>"
                    f"<td>{html.escape(r.where or '(top level)')}</td>"
                    f"<td>{html.escape(r.reason)}</td></tr>" for r in rows)
    budget = "a smaller <code>memory_budget</code> (the budget planner recomputes, compresses or offloads them)"
    return ("<table id='live-at-peak'><tr><th colspan='4'>largest kept values live at the peak: recomputing, "
            f"compressing or offloading them lowers it ({budget})</th></tr>"
            "<tr><th>bytes</th><th>value</th><th>module (line)</th><th>why kept</th></tr>" + cells + "</table>")


def _pareto_section(plan: Any, points: list, budget_bytes: int | None) -> str:
    png = plot_pareto(points, chosen_peak_bytes=plan.peak_bytes, budget_bytes=budget_bytes)
    if png is None:
        return "<h2 id='pareto'>Budget / step time</h2><p class='note'>jointgraph.pareto returned no points.</p>"
    rows = "".join(f"<tr><td class='num'>{_bytes(p.peak_bytes)}</td><td class='num'>{p.est_seconds * 1e3:.2f} ms"
                   f"</td><td class='num'>{_bytes(p.plan.saved_bytes)}</td><td class='num'>"
                   f"{sum(s.decision is Decision.RECOMPUTE for s in p.plan.saved)}</td></tr>"
                   for p in points)
    return ("<h2 id='pareto'>Budget / step time</h2><p class='meta'>The budget planner at budgets from 100% down to "
            "10% of the default plan's peak (<code>jointgraph.pareto</code>), keeping the plans no other plan beats "
            "on both simulated peak and estimated step time (cost model, not measured).</p>"
            + _img("image/png", png, "Pareto curve", "plot")
            + "<table id='pareto-points'><tr><th>simulated peak</th><th>estimated step</th><th>saved</th>"
            "<th>recomputed values</th></tr>" + rows + "</table>")


def _saved_section(plan: Any) -> str:
    """The explain rows (report/explain.py) as one table, sortable by clicking a column header."""
    from .explain import explain

    explanation = explain(plan)
    rows = []
    for group in explanation.groups:
        for r in group.rows:
            rows.append(_saved_row(r, group.module))
    if not rows:
        rows = ["<tr><td colspan='8'>nothing is saved (no backward, or the backward needs no forward value)</td></tr>"]
    subtotals = "".join(f"<tr><td>{html.escape(g.module or '(top level)')}</td><td class='num'>{_bytes(g.nbytes)}"
                        "</td></tr>" for g in explanation.groups)
    held = explanation.held_anyway
    folded = ("<details><summary>" + html.escape(f"{len(held)} parameters and inputs the backward reads: held "
                                                 "anyway, not counted above") + "</summary>"
              + _saved_table("held-anyway", [_saved_row(r, "(parameters and inputs)") for r in held])
              + "</details>") if held else ""
    return ("<h2>Saved for the backward</h2>"
            f"<p class='meta'>{html.escape(explanation.footer())}. Click a column header to sort.</p>"
            "<table id='saved-by-layer'><tr><th>layer</th><th>bytes held</th></tr>" + subtotals + "</table>"
            + _saved_table("saved", rows) + folded + SORT_SCRIPT)


def _saved_table(table_id: str, rows: list[str]) -> str:
    headers = ("layer", "bytes", "value", "shape", "dtype", "decision", "reason", "module (line)")
    return (f"<table id='{table_id}' class='sortable'><thead><tr>" + "".join(f"<th>{h}</th>" for h in headers)
            + "</tr></thead><tbody>" + "".join(rows) + "</tbody></table>")


def _saved_row(r: Any, layer: str) -> str:
    cells = [(layer or "(top level)", None), (fmt_bytes(r.nbytes), r.nbytes), (r.name, None), (str(r.shape), None),
             (r.dtype, None), (r.decision, None), (r.reason, None),
             (r.where, None)]
    return ("<tr class='" + r.decision + "'>" + "".join(
        f"<td class='num' data-sort='{key}'>{html.escape(text)}</td>" if key is not None
        else f"<td>{html.escape(text)}</td>" for text, key in cells) + "</tr>")


SORT_SCRIPT = """<script>
document.querySelectorAll('table.sortable th').forEach((th, col) => th.addEventListener('click', () => {
  const body = th.closest('table').tBodies[0];
  const key = td => td.dataset.sort !== undefined ? parseFloat(td.dataset.sort) : td.textContent;
  const down = th.dataset.dir !== 'down'; th.dataset.dir = down ? 'down' : 'up';
  [...body.rows].sort((a, b) => { const x = key(a.cells[col]), y = key(b.cells[col]);
    return (x < y ? -1 : x > y ? 1 : 0) * (down ? -1 : 1); }).forEach(r => body.appendChild(r));
}));
</script>"""


def _graphs_section(plan: Any) -> str:
    from .explain import DECISION_WORDS, timeline_layers

    decisions = {s.name: DECISION_WORDS[s.decision] for s in plan.saved}
    names = [(phase, node) for phase, node, _ in plan.timeline]
    layers = dict(zip(names, timeline_layers(plan), strict=True)) if names else {}
    parts = ["<h2>Graphs</h2>", _graph_legend()]
    for name, gm in (("forward", plan.forward), ("backward", plan.backward)):
        if gm is None:
            parts.append(f"<h3>{name}</h3><p class='note'>no {name} graph</p>")
            continue
        own = {node: layer for (phase, node), layer in layers.items() if phase == name}
        drawing = draw_graph(gm, name, decisions, own)
        parts.append(f"<h3>{name}</h3>")
        if drawing.svg is not None:
            parts.append(f"<p class='meta'>{html.escape(drawing.note)}; click the drawing to zoom</p>"
                         "<div class='graph'>" + _img("image/svg+xml", drawing.svg, f"{name} graph", "",
                                                     "this.classList.toggle('zoom')") + "</div>")
            parts.append(f"<details><summary>printed {name} graph</summary><pre>{html.escape(drawing.code)}</pre>"
                         "</details>")
        else:
            parts.append(f"<p class='note'>Not drawn: {html.escape(drawing.note)}</p>"
                         f"<pre>{html.escape(drawing.code)}</pre>")
    return "\n".join(parts)


def _graph_legend() -> str:
    from .graphs import DECISION_COLORS, INPUT_COLOR

    swatches = [(f"{word}: {what}", colour) for (word, colour), what in zip(DECISION_COLORS.items(), (
        "saved by the forward for the backward", "recomputed in the backward from other values",
        "saved compressed", "saved offloaded to host memory"), strict=True)]
    swatches.append(("parameters and inputs", INPUT_COLOR))
    return ("<p class='legend'>" + "".join(
        f"<span><span class='swatch' style='background:{colour}'></span>{html.escape(text)}</span>"
        for text, colour in swatches) + "</p>")


### Helpers

def _img(mime: str, data: bytes, alt: str, cls: str = "", onclick: str = "") -> str:
    encoded = base64.b64encode(data).decode("ascii")
    click = f' onclick="{onclick}"' if onclick else ""
    return f"<img class='{cls}' alt='{html.escape(alt)}'{click} src='data:{mime};base64,{encoded}'>"


def _bytes(n: int | None) -> str:
    return html.escape(fmt_bytes(n))


def _seconds(s: float | None) -> str:
    return html.escape(fmt_seconds(s))
