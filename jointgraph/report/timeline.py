"""Plots of a Plan's memory: the timeline stacked by kind (budget line, peak marked) and the Pareto curve.

Example::

    plan = jointgraph.plan(model, x, partitioner="budget", memory_budget=0.6)
    png = plot_timeline(plan, budget_bytes=12_000_000)      # PNG bytes
    open("timeline.png", "wb").write(png)
"""

from __future__ import annotations

import io
import itertools
import operator
from typing import Any

from ..units import BYTE_UNITS

# Bottom to top: what is live all step, then what the step accumulates, then what comes and goes.
KIND_STYLES = {
    "inputs": ("parameters and inputs", "#9e9e9e"),
    "communication": ("the caller's all-gather buffer", "#9467bd"),
    "gradients": ("gradients", "#2ca02c"),
    "saved": ("saved for the backward", "#1f77b4"),
    "temporaries": ("temporaries", "#ff7f0e"),
}
PHASE_COLORS = {"forward": "#1f77b4", "backward": "#d62728"}
BUDGET_COLOR = "#d62728"
EAGER_COLOR = "#6a3d9a"


### Main API

def plot_timeline(plan: Any, *, budget_bytes: int | None = None, figsize: tuple[float, float] = (10, 4.2),
                  dpi: int = 110, layers: list[str] | None = None, eager: Any = None) -> bytes | None:
    """A PNG of ``plan.timeline`` (``[(phase, node_name, live_bytes), ...]``) stacked by
    ``plan.timeline_by_kind`` when the plan has it; ``None`` when the timeline is empty.

    The peak is marked with its node; ``budget_bytes`` draws the budget as a horizontal line;
    ``layers`` (one name per timeline entry, ``report.explain.timeline_layers``) labels the x-axis
    where the layer changes; ``eager``, eager's memory measured by ``jointgraph bench``: its
    ``jointgraph.bench.curve.MemoryCurve`` overlays eager's live memory, each phase stretched over the
    same phase of the timeline (Note [Eager's memory curve]); its peak in bytes (an int) is drawn as a
    line.
    """
    timeline = list(plan.timeline or [])
    if not timeline:
        return None
    by_kind = plan.timeline_by_kind
    peak = max(live for _, _, live in timeline)
    eager_curve = None if eager is None or isinstance(eager, int) else eager
    eager_peak_bytes = eager_curve.peak_bytes if eager_curve is not None else eager
    top = max(peak, budget_bytes or 0, eager_peak_bytes or 0)
    scale, unit = _unit(top)
    fig, ax = _figure(figsize, dpi)
    xs = list(range(len(timeline) + 1))   # one past the end: the last step spans its node
    if len(by_kind) == len(timeline):
        _stacked(ax, xs, by_kind, scale)
    else:
        _by_phase(ax, xs, timeline, scale)
    _phase_marks(ax, timeline)
    peak_index = max(range(len(timeline)), key=lambda i: timeline[i][2])
    phase, node, _ = timeline[peak_index]
    ax.plot([peak_index + 0.5], [peak / scale], marker="v", color="black", markersize=7, zorder=5)
    right_half = peak_index > len(timeline) / 2
    ax.annotate(f"peak {peak / scale:.2f} {unit}\n{phase}: {node}", (peak_index + 0.5, peak / scale),
                textcoords="offset points", xytext=(-12 if right_half else 12, -34), fontsize=8,
                ha="right" if right_half else "left", zorder=6,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.7, "edgecolor": "#999999"})
    if budget_bytes:
        ax.axhline(budget_bytes / scale, color=BUDGET_COLOR, linestyle="--", linewidth=1.5,
                   label=f"budget {budget_bytes / scale:.2f} {unit}", zorder=4)
    if eager_curve is not None:
        _eager_curve(ax, eager_curve, timeline, scale, unit)
    elif eager_peak_bytes:
        ax.axhline(eager_peak_bytes / scale, color=EAGER_COLOR, linestyle="-.", linewidth=1.2,
                   label=f"eager's measured peak {eager_peak_bytes / scale:.2f} {unit}", zorder=4)
    if layers and len(layers) == len(timeline):
        _layer_ticks(ax, layers)
        ax.set_xlabel("layer (execution order: forward, then backward)")
    else:
        ax.set_xlabel("node (execution order: forward, then backward)")
    ax.set_ylabel(f"live memory ({unit})")
    ax.set_ylim(bottom=0, top=top / scale * 1.22)
    ax.set_xlim(0, len(timeline))
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), fontsize=8, ncols=5, frameon=False)
    ax.grid(alpha=0.3)
    return _png(fig)


def plot_pareto(points: list, *, chosen_peak_bytes: int | None = None, budget_bytes: int | None = None
                ) -> bytes | None:
    """A PNG of ``jointgraph.pareto``'s points: simulated peak against estimated step time.

    ``chosen_peak_bytes`` marks the report's own plan; ``budget_bytes`` draws its budget."""
    if not points:
        return None
    peaks = [p.peak_bytes for p in points]
    scale, unit = _unit(max([*peaks, budget_bytes or 0]))
    fig, ax = _figure((7, 3.8), 110)
    ax.plot([p / scale for p in peaks], [p.est_seconds * 1e3 for p in points], marker="o", color="#1f77b4",
            label="Pareto front (budget planner)")
    for p in points:
        ax.annotate(f"{p.peak_bytes / scale:.1f}", (p.peak_bytes / scale, p.est_seconds * 1e3), fontsize=7,
                    textcoords="offset points", xytext=(4, 4))
    if budget_bytes:
        ax.axvline(budget_bytes / scale, color=BUDGET_COLOR, linestyle="--",
                   label=f"budget {budget_bytes / scale:.2f} {unit}")
    if chosen_peak_bytes is not None:
        ax.axvline(chosen_peak_bytes / scale, color="black", linestyle=":", label="this plan's peak")
    ax.set_xlabel(f"simulated peak ({unit})")
    ax.set_ylabel("estimated step time (ms)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def shown_kinds(by_kind: list[dict[str, int]]) -> list[str]:
    """The kinds of ``KIND_STYLES`` to show: all but ``communication`` when no entry has any (a plan
    without resharded inputs, Note [Inputs the caller reshards])."""
    return [k for k in KIND_STYLES if k != "communication" or any(entry.get(k) for entry in by_kind)]


### Implementation

def _stacked(ax: Any, xs: list[int], by_kind: list[dict[str, int]], scale: float) -> None:
    kinds = shown_kinds(by_kind)
    series = [[by_kind[min(i, len(by_kind) - 1)].get(k, 0) / scale for i in xs] for k in kinds]
    ax.stackplot(xs, *series, step="post", labels=[KIND_STYLES[k][0] for k in kinds],
                 colors=[KIND_STYLES[k][1] for k in kinds], alpha=0.8, linewidth=0)
    total = [sum(column) for column in zip(*series, strict=True)]
    ax.step(xs, total, where="post", color="#333333", linewidth=0.8)


def _eager_curve(ax: Any, curve: Any, timeline: list, scale: float, unit: str) -> None:
    """Eager's measured live memory, its forward over the timeline's forward and its backward over
    the backward (each at its fraction of the phase's ops), and its peak marked."""
    spans = {phase: (start, length) for phase, start, length in _phases(timeline)}
    xs, ys = [], []
    for phase, points in (("forward", curve.forward), ("backward", curve.backward)):
        start, length = spans.get(phase, (len(timeline), 0))
        for fraction, value in points:
            xs.append(start + fraction * length)
            ys.append(value / scale)
    if not xs:
        return
    xs.append(len(timeline))
    ys.append(ys[-1])
    peak = max(range(len(ys)), key=ys.__getitem__)
    ax.step(xs, ys, where="post", color=EAGER_COLOR, linewidth=1.3, zorder=4,
            label=f"eager, measured (peak {ys[peak]:.2f} {unit})")
    ax.plot([xs[peak]], [ys[peak]], marker="o", color=EAGER_COLOR, markersize=4, zorder=5)


def _layer_ticks(ax: Any, layers: list[str], max_ticks: int = 18) -> None:
    """A tick where a run of one layer starts, named by the layer's last two path parts; the longest
    runs are labelled first and a label too close to another is left out."""
    runs, start = [], 0   # (first index, layer, length) of each run of one layer
    for name, group in itertools.groupby(layers):
        length = sum(1 for _ in group)
        runs.append((start, name, length))
        start += length
    gap = len(layers) / (max_ticks * 1.5)   # labels closer than this would overlap
    shown: list[tuple[int, str]] = []
    for i, name, _ in sorted(runs, key=lambda r: -r[2]):   # the longest runs get a label first
        if name and all(abs(i - j) >= gap for j, _ in shown):
            shown.append((i, name))
    shown.sort()
    ax.set_xticks([i for i, _ in shown])
    ax.set_xticklabels([".".join(name.split(".")[-2:]) for _, name in shown], rotation=60, ha="right", fontsize=7)


def _by_phase(ax: Any, xs: list[int], timeline: list, scale: float) -> None:
    """Fallback without per-kind figures: one filled step curve per phase."""
    for phase, start, length in _phases(timeline):
        part = xs[start:start + length + 1]
        ys = [timeline[min(i, start + length - 1)][2] / scale for i in part]
        color = PHASE_COLORS.get(phase, "#7f7f7f")
        ax.step(part, ys, where="post", color=color, label=phase)
        ax.fill_between(part, ys, step="post", alpha=0.15, color=color)


def _phase_marks(ax: Any, timeline: list) -> None:
    """A dotted line where the backward starts, and each phase's name at the top of its span (in
    axes height, above the curves: the y-limit leaves that room)."""
    for phase, start, length in _phases(timeline):
        if start:
            ax.axvline(start, color="#555555", linestyle=":", linewidth=1)
        ax.text(start + length / 2, 0.95, phase, ha="center", va="center", fontsize=9, color="#555555",
                transform=ax.get_xaxis_transform(), zorder=6,
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "edgecolor": "none"})


def _phases(timeline: list) -> list[tuple[str, int, int]]:
    """(phase, first index, length) of each run of consecutive entries of one phase, in order."""
    runs, start = [], 0
    for phase, run in itertools.groupby(timeline, key=operator.itemgetter(0)):
        length = sum(1 for _ in run)
        runs.append((phase, start, length))
        start += length
    return runs


def _figure(figsize: tuple[float, float], dpi: int) -> tuple[Any, Any]:
    """A figure with one axes, outside pyplot: no global backend switch, nothing to close."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=dpi)
    return fig, fig.add_subplot()


def _png(fig: Any) -> bytes:
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()




def _unit(peak: int) -> tuple[float, str]:
    for unit, size in BYTE_UNITS:
        if peak >= size:
            return float(size), unit
    return 1.0, "B"
