"""The memory timeline of a Plan: live bytes after each forward and backward node, peak marked."""

from __future__ import annotations

import io
from typing import Any

PHASE_COLORS = {"forward": "#1f77b4", "backward": "#d62728"}


def plot_timeline(plan: Any, *, budget_bytes: int | None = None) -> bytes | None:
    """A PNG of ``plan.timeline`` (``[(phase, node_name, live_bytes), ...]``); ``None`` when it is empty."""
    timeline = list(plan.timeline or [])
    if not timeline:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale, unit = _unit(max(live for _, _, live in timeline))
    fig, ax = plt.subplots(figsize=(10, 4), dpi=110)
    start = 0
    for phase, length in _phases(timeline):
        xs = list(range(start, start + length + 1))  # one past the end: the last step spans its node
        ys = [timeline[min(i, start + length - 1)][2] / scale for i in xs]
        color = PHASE_COLORS.get(phase, "#7f7f7f")
        ax.step(xs, ys, where="post", color=color, label=phase)
        ax.fill_between(xs, ys, step="post", alpha=0.15, color=color)
        if start:
            ax.axvline(start, color="#555555", linestyle=":", linewidth=1)
        start += length
    peak_index = max(range(len(timeline)), key=lambda i: timeline[i][2])
    phase, node, peak = timeline[peak_index]
    ax.plot([peak_index], [peak / scale], marker="v", color="black")
    right_half = peak_index > len(timeline) / 2
    ax.annotate(f"peak {peak / scale:.2f} {unit}\n{phase}: {node}", (peak_index, peak / scale),
                textcoords="offset points", xytext=(-10 if right_half else 10, -30), fontsize=8,
                ha="right" if right_half else "left",
                bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85, "edgecolor": "#999999"})
    if budget_bytes:
        ax.axhline(budget_bytes / scale, color="#2ca02c", linestyle="--", label=f"budget {budget_bytes / scale:.2f}")
    ax.set_xlabel("node (execution order)")
    ax.set_ylabel(f"live memory ({unit})")
    ax.set_ylim(bottom=0, top=peak / scale * 1.15)
    ax.set_xlim(0, len(timeline))
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def _phases(timeline: list) -> list[tuple[str, int]]:
    """Runs of consecutive entries of the same phase, in order."""
    runs: list[tuple[str, int]] = []
    for phase, _, _ in timeline:
        if runs and runs[-1][0] == phase:
            runs[-1] = (phase, runs[-1][1] + 1)
        else:
            runs.append((phase, 1))
    return runs


def _unit(peak: int) -> tuple[float, str]:
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if peak >= size:
            return float(size), unit
    return 1.0, "B"
