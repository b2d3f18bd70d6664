"""The "budget" partitioner: the fastest plan whose simulated training-step peak fits a budget.

Note [Budget formulation]
-------------------------
The forward is cut into *regions* at its *separators*: forward values that every
later forward computation reaches only through them (the residual stream between
two transformer sub-blocks; small values such as masks and graph inputs do not
count, nor do values no differentiable input reaches, such as attention masks and rotary
tables, which every layer reads). A region is ``(previous separator, separator]``; repeated layers give
repeated regions. Each region gets one *option* (``Option``): a mode

- ``save``: the backward receives every value of the region it reads (as eager);
- ``cheap``: it recomputes the region's cheap ops (``rules.recompute_rule``:
  pointwise, normalizations, softmax, views) and receives the rest;
- ``full``: block checkpointing: it receives the region's inputs only and
  recomputes everything else, matrix products included (random ops never: Note
  [Random ops are not recomputed]),

and a storage for what it receives: as is, compressed (bf16 / fp8) or offloaded to
the host, as ``SavedTensorPolicy`` allows (offload only where the device is not
the host: on a CPU a host copy frees nothing). Recomputation never crosses a region
boundary: a value of another region a recomputation reads is received, so the
backward recomputes one region at a time, right before its first use
(``passes/reorder_recompute.py``).

Each region's options are ranked on its own (``_ladder``): the estimated device
bytes it keeps against the estimated seconds it adds (Note [Cost model]); options
that keep more bytes for more time are dropped. A plan is a *staircase* over the
ladders: every region at ladder step ``level``, the first ``k`` regions (in forward
order) one step further. The earliest regions go first because their recomputation
runs last in the backward, when the later regions' values are already freed: that
is what lowers the peak. Along the staircase estimated time grows and peak falls,
so two binary searches (over ``level``, then ``k``) find the first step that fits,
each probe checked with the real split + passes + simulator (Note [Memory
simulation model]): about ``log2(levels) + log2(regions)`` simulations, seconds for
a 48-layer model. The ``default`` and ``mincut`` plans are checked too; the fastest
checked plan within the budget wins, else the lowest-peak one, with a warning that
names that minimum achievable peak. Besides the staircase, HiGHS picks one option per
region under per-region peak constraints (Note [Budget MILP]); its solutions are
verified the same way and win when they are faster.

Note [Repeated layers]
----------------------
A deep model repeats the same block: its regions come in a few *classes* of equal
structure (the same ops on the same shapes, wired the same way, with the same values
read by the backward, followed by a region of the same class). A class's ladder and
scores are computed once, from its first region, and shared by the others. In the
MILP, equal regions are interchangeable except for their position, and an earlier
region's kept bytes stay live for longer in the backward, so every solution can be
reordered so that earlier regions of a class sit at least as far down the ladder as
later ones without changing its time or breaking a constraint. With that order
imposed, a class's choice is just how many of its regions (the first ones) go down
each ladder step: the MILP's integer variables are those counts (Note [Budget MILP]),
a few dozen whatever the depth, instead of one per region and option, whose symmetric
copies HiGHS would search through (1-2 s per solve at 48 layers; now ~0.1 s). The
staircase search is bounded by the estimated time of the best verified plan, so a
deep model needs a handful of verified candidates (``staircase.py``).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable

import torch
import torch.fx

from ..ir.graph_utils import SavedChoice
from ..units import fmt_bytes
from .default import plan_default
from .milp import milp_candidates
from .mincut import plan_mincut
from .regions import Regions
from .staircase import staircase_search


class BudgetBelowFloor(UserWarning):
    """The memory budget is below the smallest peak the budget planner found: it uses that plan."""

    def __init__(self, budget_bytes: int, floor_bytes: int):
        self.budget_bytes, self.floor_bytes = budget_bytes, floor_bytes
        self.requirement = (f"memory budget {fmt_bytes(budget_bytes)} is below the minimum achievable peak "
                            f"{fmt_bytes(floor_bytes)} found by the budget planner")
        super().__init__(f"{self.requirement}; using that plan")


@dataclasses.dataclass
class Verified:
    """A candidate plan checked with the real split + simulator."""

    choices: list[SavedChoice]
    peak_bytes: int
    est_seconds: float
    label: str
    model_seconds: float | None = None   # what the region scores predicted it adds (region-built plans)


@dataclasses.dataclass
class BudgetResult:
    """The chosen plan, the reasons for its recomputations (by node name) and every verified candidate."""

    choices: list[SavedChoice]
    recompute_reasons: dict[str, str]
    peak_bytes: int
    est_seconds: float
    candidates: list[Verified]
    timings: dict[str, float] = dataclasses.field(default_factory=dict)   # regions / milp / verify seconds


Verify = Callable[[list[SavedChoice]], tuple[int, float]]


### Main API

def plan_budget(graph: torch.fx.Graph, budget: float | int, verify: Verify, *, policy=None,
                compiler: str = "eager") -> BudgetResult:
    """Return the fastest verified plan with peak <= ``budget`` (Note [Budget formulation]): bytes
    for an int, a fraction of the ``"default"`` plan's simulated peak for a float.

    ``verify(choices) -> (simulated peak bytes, estimated step seconds)`` runs the real split +
    simulator; ``policy`` (a ``SavedTensorPolicy`` or None) says which storages may be used;
    ``compiler`` is the backward's graph compiler, which prices recomputation (Note [Cost model]).
    """
    timings = {"regions": 0.0, "milp": 0.0, "verify": 0.0}
    start = time.perf_counter()
    regions = Regions(graph, policy, compiler)
    timings["regions"] = time.perf_counter() - start
    checked: dict[tuple, Verified] = {}

    def check(label: str, choices: list[SavedChoice], model: float | None = None) -> Verified:
        key = tuple((c.node, c.codec) for c in choices)
        if key not in checked:
            start = time.perf_counter()
            peak, seconds = verify(choices)
            timings["verify"] += time.perf_counter() - start
            checked[key] = Verified(choices, peak, seconds, label, model)
        return checked[key]

    def checked_peak(level: int, k: int) -> int:
        option_of = regions.staircase(level, k)
        return check(f"staircase level {level}, first {k} regions +1", regions.choices(option_of),
                     regions.model_seconds(option_of)).peak_bytes

    def fits(level: int, k: int) -> bool:
        return checked_peak(level, k) <= budget_bytes

    default = check("default", plan_default(graph))
    budget_bytes = int(budget * default.peak_bytes) if isinstance(budget, float) else int(budget)
    check("mincut", plan_mincut(graph, compiler))
    check("mincut, no recompute allowance", plan_mincut(graph, compiler, allowance=math.inf))
    start, verifying = time.perf_counter(), timings["verify"]
    milp_candidates(regions, budget_bytes, default.peak_bytes, check)
    timings["milp"] = time.perf_counter() - start - (timings["verify"] - verifying)
    staircase_search(regions, default.est_seconds, budget_bytes, checked, fits, checked_peak)
    candidates = list(checked.values())
    feasible = [c for c in candidates if c.peak_bytes <= budget_bytes]
    if feasible:
        best = min(feasible, key=lambda c: (c.est_seconds, c.peak_bytes))
    else:
        best = min(candidates, key=lambda c: (c.peak_bytes, c.est_seconds))
        warnings.warn(BudgetBelowFloor(budget_bytes, best.peak_bytes), stacklevel=3)
    return BudgetResult(best.choices, regions.recompute_reasons(best.choices), best.peak_bytes, best.est_seconds,
                        candidates, timings)
