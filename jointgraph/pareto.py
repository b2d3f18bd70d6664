"""The budget/step-time Pareto sweep: ``jointgraph.pareto``.

It plans at budgets from 100% down to 10% of the default plan's peak and keeps the plans no
other plan beats on both simulated peak and estimated step time. It is built on
``jointgraph.plan`` and lives beside it, in the API layer.

Example::

    points = jointgraph.pareto(step, idx, targets)
    for p in points:
        print(p.peak_bytes, p.est_seconds)
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from .api import plan
from .ir import Plan
from .planning import estimated_seconds

PARETO_FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


@dataclasses.dataclass(frozen=True)
class ParetoPoint:
    """One plan of the sweep: its simulated peak, estimated step time and the plan itself."""

    peak_bytes: int
    est_seconds: float
    plan: Plan


def pareto(fn_or_module: Any, *example_args: Any, fractions: tuple[float, ...] = PARETO_FRACTIONS,
           **options: Any) -> list[ParetoPoint]:
    """Plan ``fn_or_module`` at budgets ``fractions`` of the default plan's peak; return the
    Pareto-optimal points, by increasing peak (so estimated time does not increase).

    ``options`` are ``jointgraph.plan``'s (``partitioner`` and ``memory_budget`` are set here).
    """
    options = {k: v for k, v in options.items() if k not in ("partitioner", "memory_budget")}
    points = []
    for fraction in fractions:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # budgets below the minimum: the lowest-peak plan
            result = plan(fn_or_module, *example_args, partitioner="budget", memory_budget=float(fraction),
                          **options)
        points.append(ParetoPoint(result.peak_bytes, estimated_seconds(result), result))
    points.sort(key=lambda p: (p.peak_bytes, p.est_seconds))
    front: list[ParetoPoint] = []
    for point in points:
        if not front or point.est_seconds < front[-1].est_seconds:
            front.append(point)
    return front
