"""The verified staircase search of the budget planner (Note [Budget formulation] in ``budget.py``).

A plan is a staircase over the regions' ladders: every region at ladder step ``level``, the
first ``k`` regions one step further. ``staircase_search`` binary-searches the first step that
fits the budget, each probe checked with the real split + simulator through the caller's
``fits``, skipping steps whose estimated time cannot beat the best verified plan.
"""

from __future__ import annotations

from collections.abc import Callable

from .regions import Regions


def staircase_search(regions: Regions, base_seconds: float, budget_bytes: int, checked: dict,
                      fits: Callable[[int, int], bool], checked_peak: Callable[[int, int], int]) -> None:
    """Find the first staircase step that fits (Note [Budget formulation]), skipping the steps
    that cannot beat the fastest verified plan within the budget: those whose estimated time
    (``base_seconds``, the default plan's, plus the regions' scores) minus a slack is no better.
    The slack is twice the largest gap seen so far between such an estimate and a verified
    plan's time, plus 2% of ``base_seconds``: the estimate is off by a few percent either way.
    Each check is a split and a simulation; this keeps a deep model to a handful (Note
    [Repeated layers])."""
    def fastest() -> float:
        return min((c.est_seconds for c in checked.values() if c.peak_bytes <= budget_bytes), default=float("inf"))

    def slack() -> float:
        gaps = [abs(c.est_seconds - base_seconds - c.model_seconds) for c in checked.values()
                if c.model_seconds is not None]
        return 2 * max(gaps, default=0.0) + 0.02 * base_seconds

    def promising(level: int, k: int) -> bool:
        return base_seconds + regions.model_seconds(regions.staircase(level, k)) - slack() < fastest()

    count = len(regions.order)
    level_fits = None   # the first level whose step k=0 fits
    for level in range(regions.levels):
        if not promising(level, 0):
            break
        if fits(level, 0):
            level_fits = level
            break
    else:
        if fastest() == float("inf"):   # nothing fits: the lowest peak may lie between two levels
            lowest = min(range(regions.levels), key=lambda lv: checked_peak(lv, 0))
            for k in (count // 4, count // 2, 3 * count // 4):
                fits(lowest, k)
                if lowest:
                    fits(lowest - 1, k)
        return
    # Between (level, 0) and (level, count) == (level + 1, 0) time grows with k and the peak
    # falls: the first fitting k, among the promising ones, is the one to find.
    level = (level if level_fits is None else level_fits) - 1
    if level < 0:
        return
    top = first_true(lambda k: not promising(level, k), 0, count)   # the first k judged unable to win
    # The judgement is an estimate: the boundary step itself is checked too.
    hi = count if level_fits is not None and top == count else min(top, count - 1)
    if hi >= 0 and fits(level, hi):
        first_true(lambda k: fits(level, k), 0, hi)


def first_true(predicate: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest ``x`` in ``[lo, hi]`` with ``predicate(x)``, assuming it is monotone and true at ``hi``."""
    while lo < hi:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
