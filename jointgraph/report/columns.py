"""The figures of a ``jointgraph bench`` run as table columns, shared by the HTML report and the CLI.

The benchmark runner produces the figures; how they are shown lives here, so the report does
not depend on the runner.
"""

from __future__ import annotations

from typing import Any

from ..units import fmt_bytes, fmt_seconds

# How the measured peak is taken, by device type (the runner measures it; the report says how).
PEAK_METHOD = {
    "cpu": "torch.profiler CPU allocator events (running sum over the step) + bytes live at step start",
    "cuda": "torch.cuda.max_memory_allocated over the step + bytes live at step start",
}

BENCH_COLUMNS = ("contender", "peak (measured)", "peak (simulated)", "saved (measured)", "saved (plan)",
                 "step (median)", "compile", "max |grad diff|")


def bench_cells(r: Any) -> list[str]:
    """One ``jointgraph bench`` contender's figures as strings, in ``BENCH_COLUMNS`` order after the name."""
    diff = "ref" if r.kind == "eager" else "n/a" if r.max_grad_diff is None else f"{r.max_grad_diff:.1e}"
    return [fmt_bytes(r.measured_peak_bytes), fmt_bytes(r.simulated_peak_bytes), fmt_bytes(r.saved_bytes_measured),
            fmt_bytes(r.saved_bytes_planned), fmt_seconds(r.step_seconds),
            "—" if r.kind == "eager" else fmt_seconds(r.compile_seconds), diff]
