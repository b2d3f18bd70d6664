"""Note [Budget MILP]: the budget planner's HiGHS model, one integer count per (class, ladder step).

``milp_candidates`` solves it for a budget and hands each solution to the caller's
``check`` (the real split + simulator), tightening the model's limit when a solution
overshoots.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .regions import Option, Regions

Check = Callable[..., Any]   # (label, choices, model_seconds) -> budget.Verified


def milp_candidates(regions: Regions, budget_bytes: int, default_peak: int,
                     check: Check, *, rounds: int = 4) -> None:
    """Note [Budget MILP]: one ladder step per region, chosen by HiGHS, one block per class.

    The backward runs the regions last to first; while region ``q``'s backward runs, every
    earlier region still holds what its option keeps and region ``q`` holds its whole working
    set (what "save" keeps), so for every ``q``::

        sum_{r < q} kept_bytes[r]  <=  B' - working[q]

    plus the end of the forward (every region's kept bytes); minimize the estimated recompute
    and codec seconds. ``B'`` is the budget minus the bytes this region model does not see
    (parameters, gradients, temporaries), calibrated on the simulated peak of the all-"save"
    plan.

    By Note [Repeated layers] the first ``n[c, l]`` regions of class ``c`` sit at ladder step
    ``l`` or further, so the integer variables are the counts ``n[c, l]`` (non-increasing in
    ``l``): a few dozen for any depth. Class ``c`` has ``m_c(q)`` regions before ``q``, of
    which ``min(n[c, l], m_c(q))`` are at step ``l`` or further; each step lowers the kept
    bytes, so the constraints only need a lower bound on that minimum and a continuous
    ``w[c, l, q] <= n[c, l]`` bounded by ``m_c(q)`` stands for it (the solver raises ``w``
    to the minimum whenever that helps). Bytes are in MiB to keep HiGHS's tolerances sane.

    Each solution is verified with the real simulator (``check``); when it is over budget,
    ``B'`` shrinks by twice the excess and HiGHS solves again. The staircase search runs as
    well; the fastest verified plan wins.
    """
    model = ClassMILP(regions)
    if not model.count_vars:
        return
    limit = budget_bytes - max(default_peak - model.model_peak, 0)
    for round_ in range(rounds):
        options = model.solve(limit)
        if options is None:
            return
        verified = check(f"MILP round {round_ + 1}", regions.choices(options.__getitem__),
                         regions.model_seconds(options.__getitem__))
        if verified.peak_bytes <= budget_bytes:
            return
        limit -= 2 * (verified.peak_bytes - budget_bytes)   # the model underestimates: overshoot the fix


class ClassMILP:
    """The region model of Note [Budget MILP] with one count per (class, ladder step)."""

    MIB = float(2**20)

    def __init__(self, regions: Regions):
        import numpy as np

        self.regions = regions
        mib = self.MIB
        self.members: dict[int, list[int]] = {}
        for r in regions.order:
            self.members.setdefault(regions.class_of[r], []).append(r)
        members = self.members
        self.steps = steps = {c: [regions.scores[(rs[0], o)] for o in regions.ladders[rs[0]]]
                              for c, rs in members.items()}
        # Integer n[c, l] for l >= 1 (step 0, "save" or the cheapest option, needs no variable).
        keys = [(c, step) for c in members for step in range(1, len(steps[c]))]
        self.count_vars = {key: i for i, key in enumerate(keys)}
        var_n = self.count_vars
        working = [max(b for _, b in steps[regions.class_of[q]]) for q in regions.order]
        self.model_peak = max(sum(working[:q]) + working[q] for q in regions.order)
        objective = [steps[c][step][0] - steps[c][step - 1][0] for c, step in keys]
        lower, upper = [0.0] * len(keys), [float(len(members[c])) for c, _ in keys]
        integral = [1] * len(keys)
        rows: list[tuple[list[int], list[float], float, float]] = []   # (columns, values, low, high)
        for (c, step), i in var_n.items():
            if (c, step + 1) in var_n:
                rows.append(([i, var_n[(c, step + 1)]], [1.0, -1.0], 0.0, np.inf))
        peak_rows = []   # (columns, values, constant MiB, working MiB) per position q, then the end
        for q in [*regions.order, len(regions.order)]:
            cols, vals, constant = [], [], 0.0
            for c, rs in members.items():
                before = sum(1 for r in rs if r < q)
                if before == 0:
                    continue
                constant += before * steps[c][0][1] / mib
                for step in range(1, len(steps[c])):
                    if before >= len(rs):
                        cols.append(var_n[(c, step)])
                    else:   # w = min(n[c, l], before), from below
                        w = len(objective)
                        objective.append(0.0)
                        lower.append(0.0)
                        upper.append(float(before))
                        integral.append(0)
                        rows.append(([w, var_n[(c, step)]], [1.0, -1.0], -np.inf, 0.0))
                        cols.append(w)
                    vals.append((steps[c][step][1] - steps[c][step - 1][1]) / mib)
            peak_rows.append((cols, vals, constant, working[q] / mib if q < len(regions.order) else 0.0))
        self.objective = np.array(objective)
        self.bounds = (np.array(lower), np.array(upper))
        self.integral = np.array(integral)
        self.rows, self.peak_rows = rows, peak_rows

    def _matrix(self, spec):
        from scipy.sparse import coo_matrix

        data, rr, cc = [], [], []
        for k, (cols, vals, *_rest) in enumerate(spec):
            rr += [k] * len(cols)
            cc += cols
            data += vals
        return coo_matrix((data, (rr, cc)), shape=(len(spec), len(self.objective))).tocsr()

    def solve(self, limit_bytes: float) -> list[Option] | None:
        """Per-region options minimizing the estimated seconds with the region model's peak at most
        ``limit_bytes`` (None if HiGHS finds no such choice within its time limit)."""
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp

        limit = limit_bytes / self.MIB
        high = np.array([limit - work - constant for _, _, constant, work in self.peak_rows])
        constraints = [LinearConstraint(self._matrix(self.peak_rows), -np.inf, high)]
        if self.rows:
            constraints.append(LinearConstraint(self._matrix(self.rows), [r[2] for r in self.rows],
                                                [r[3] for r in self.rows]))
        result = milp(self.objective, constraints=constraints, integrality=self.integral,
                      bounds=Bounds(*self.bounds), options={"time_limit": 2.0, "mip_rel_gap": 1e-3, "disp": False})
        if result.x is None:
            return None
        options = []
        position = {r: j for rs in self.members.values() for j, r in enumerate(rs)}
        for r in self.regions.order:
            c = self.regions.class_of[r]
            j = position[r]
            level = sum(1 for step in range(1, len(self.steps[c])) if j < round(result.x[self.count_vars[(c, step)]]))
            options.append(self.regions.ladders[r][level])
        return options
