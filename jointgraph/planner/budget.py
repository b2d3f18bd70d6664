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
deep model needs a handful of verified candidates (``_staircase_search``).
"""

from __future__ import annotations

import dataclasses
import operator
import statistics
import time
import warnings
from collections.abc import Callable

import torch
import torch.fx

from ..hooks.codecs import codec_decision
from ..hooks.precision import Exactness, saved_value_needs
from ..ir import Role
from ..ir.graph import output_node
from .costs import CODEC_RATIO, codec_seconds, device_for, node_seconds
from .default import plan_default
from .graph_utils import (
    SavedChoice,
    aliases_input,
    backward_nodes,
    is_multi_output,
    is_random,
    is_symbolic_scalar,
    storage_root,
    tensor_bytes,
)
from .mincut import plan_mincut
from .rules import COMPUTE_HEAVY_OPS, recompute_rule

# A value crossing a separator must be at least this many times smaller than it.
SMALL_CROSSING = 8


@dataclasses.dataclass(frozen=True)
class Option:
    """How one region is planned: a recompute mode and a storage for what the backward receives."""

    mode: str                  # "save" | "cheap" | "full" | "span"
    storage: str | None = None  # None | "compress" | "offload" | "compress+offload"

    def __str__(self) -> str:
        return self.mode + (f"+{self.storage}" if self.storage else "")


SAVE = Option("save")


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
    check("mincut", plan_mincut(graph))
    start, verifying = time.perf_counter(), timings["verify"]
    _milp_candidates(regions, budget_bytes, default.peak_bytes, check)
    timings["milp"] = time.perf_counter() - start - (timings["verify"] - verifying)
    _staircase_search(regions, default.est_seconds, budget_bytes, checked, fits, checked_peak)
    candidates = list(checked.values())
    feasible = [c for c in candidates if c.peak_bytes <= budget_bytes]
    if feasible:
        best = min(feasible, key=lambda c: (c.est_seconds, c.peak_bytes))
    else:
        best = min(candidates, key=lambda c: (c.peak_bytes, c.est_seconds))
        warnings.warn(f"memory budget {budget_bytes / 2**20:.2f} MiB is below the minimum achievable peak "
                      f"{best.peak_bytes / 2**20:.2f} MiB found by the budget planner; using that plan",
                      stacklevel=3)
    return BudgetResult(best.choices, regions.recompute_reasons(best.choices), best.peak_bytes, best.est_seconds,
                        candidates, timings)


def _staircase_search(regions: Regions, base_seconds: float, budget_bytes: int, checked: dict,
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
    top = _first_true(lambda k: not promising(level, k), 0, count)   # the first k judged unable to win
    # The judgement is an estimate: the boundary step itself is checked too.
    hi = count if level_fits is not None and top == count else min(top, count - 1)
    if hi >= 0 and fits(level, hi):
        _first_true(lambda k: fits(level, k), 0, hi)


def _milp_candidates(regions: Regions, budget_bytes: int, default_peak: int,
                     check: Callable[..., Verified], *, rounds: int = 4) -> None:
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


def _first_true(predicate: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest ``x`` in ``[lo, hi]`` with ``predicate(x)``, assuming it is monotone and true at ``hi``."""
    while lo < hi:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


### Implementation

class Regions:
    """The forward cut into regions at its separators, each with its ladder of options."""

    def __init__(self, graph: torch.fx.Graph, policy=None, compiler: str = "eager"):
        self.graph = graph
        self.compiler = compiler   # the backward's: it runs the recomputation
        self.policy = policy
        self.needs = saved_value_needs(graph) if policy is not None else {}   # Note [Compared saved values]
        self.device = device_for(graph)
        backward = backward_nodes(graph)
        out = output_node(graph)
        grad_roots = {v for v, r in zip(out.args[0], out.meta["roles"], strict=True)
                      if r in (Role.GRADIENT, Role.BACKWARD_MUTATION) and isinstance(v, torch.fx.Node)}
        self.forward = [n for n in graph.nodes if n.op == "call_function" and n not in backward]
        # Forward values the backward reads directly (a gradient that is a forward value included).
        self.needed = [n for n in graph.nodes if n.op != "output" and n not in backward
                       and (n in grad_roots or any(u in backward and u.op != "output" for u in n.users))]
        self.side = self._side_values()
        self.region_of, self.separators = self._cut()
        self.order = list(range(len(self.separators) + 1))
        self.members: list[list[torch.fx.Node]] = [[] for _ in self.order]
        for node in self.forward:
            self.members[self.region_of[node]].append(node)
        self.scores: dict[tuple[int, Option], tuple[float, float]] = {}   # (seconds, bytes) per ladder option
        self.class_of = self._classes()
        first: dict[int, int] = {}
        self.ladders = []
        for r in self.order:   # Note [Repeated layers]: one ladder per class
            leader = first.setdefault(self.class_of[r], r)
            if leader == r:
                self.ladders.append(self._ladder(r))
            else:
                self.ladders.append(self.ladders[leader])
                self.scores.update({(r, o): self.scores[(leader, o)] for o in self.ladders[leader]})
        self.levels = max(len(ladder) for ladder in self.ladders)

    ### Regions

    def _cut(self) -> tuple[dict, list]:
        """Separators (Note [Budget formulation]) and the region index of every forward call node."""
        pos = {n: i for i, n in enumerate(self.forward)}
        end = len(self.forward)
        last = {n: end if any(u.op == "output" for u in n.users)
                else max([pos[n], *(pos[u] for u in n.users if u in pos)]) for n in self.forward}
        for n in reversed(self.forward):   # a view keeps its base's storage live
            base = storage_root(n)
            if base is not n and base in last:
                last[base] = max(last[base], last[n])
        sizes = {n: self._own_bytes(n) for n in self.forward}
        typical = statistics.median([b for b in sizes.values() if b] or [0])
        side = self.side
        region_of: dict = {}
        separators: list = []
        active: dict = {}
        for i, node in enumerate(self.forward):
            region_of[node] = len(separators)
            for u in [u for u, stop in active.items() if stop <= i]:
                del active[u]
            nbytes = sizes[node]
            crossing = [u for u in active if u is not node and u not in side]
            if (nbytes and nbytes * 2 >= typical and last[node] > i and node not in side
                    and all(sizes[u] * SMALL_CROSSING <= nbytes for u in crossing)):
                separators.append(node)
            if nbytes and last[node] > i:
                active[node] = last[node]
        return region_of, separators

    def _classes(self) -> list[int]:
        """Class index of every region: equal for regions of equal structure followed by regions
        of equal structure (Note [Repeated layers])."""
        local = {n: (self.region_of[n], i) for r in self.order for i, n in enumerate(self.members[r])}
        needed = set(self.needed)
        separators = set(self.separators)
        side = self.side

        def arg(a, region: int):
            if isinstance(a, torch.fx.Node):
                if a in side and local.get(a, (None,))[0] != region:   # the same mask for every layer
                    return ("side", *local.get(a, (a.name,)))
                if a in local:
                    other, i = local[a]
                    if other == region:
                        return ("node", 0, i)
                    # Read from another region: its cost and storage depend on what it is too.
                    return ("node", other - region, i, str(a.target), _shape_key(a.meta.get("val")))
                return ("value", a.op, a.meta.get("role"), _shape_key(a.meta.get("val")))
            if isinstance(a, (list, tuple)):
                return tuple(arg(x, region) for x in a)
            return (type(a).__name__, repr(a))

        keys = []
        for r in self.order:
            keys.append(tuple((str(n.target), _shape_key(n.meta.get("val")), arg(n.args, r),
                               arg(tuple(sorted(n.kwargs.items())), r), n in needed, n in separators,
                               n.meta.get("recompute"))
                              for n in self.members[r]))
        ids: dict[tuple, int] = {}
        return [ids.setdefault((keys[r], keys[r + 1] if r + 1 < len(keys) else None), len(ids)) for r in self.order]

    def _side_values(self) -> set[torch.fx.Node]:
        """Forward values no differentiable input reaches (attention masks, rotary tables, position
        ids): computed once, read by every layer, never differentiated, so they may cross a
        separator whatever their size (Note [Budget formulation])."""
        out = output_node(self.graph)
        gradients = [v for v, r in zip(out.args[0], out.meta["roles"], strict=True) if r is Role.GRADIENT]
        inputs = [n for n in self.graph.nodes if n.op == "placeholder" and n.meta.get("role") is not Role.TANGENT]
        reached = {ph for ph, grad in zip(inputs, gradients, strict=False) if isinstance(grad, torch.fx.Node)}
        for node in self.forward:
            if not reached.isdisjoint(node.all_input_nodes):
                reached.add(node)
        return {n for n in self.forward if n not in reached}

    def _own_bytes(self, v: torch.fx.Node) -> int:
        """Bytes of the storage ``v`` allocates (0 for inputs, views and tuples)."""
        if v.op != "call_function" or aliases_input(v) or is_multi_output(v):
            return 0
        if storage_root(v) is not v:
            return 0
        return tensor_bytes(v.meta.get("val"))

    ### Options

    def _storages(self) -> list[str | None]:
        policy = self.policy
        if policy is None:
            return [None]
        host = self.device.name != "cpu" and policy.offload   # Note [Budget formulation]: no host on a CPU
        found = [None]
        if policy.compress:
            found.append("compress")
        if host:
            found.append("offload")
        if host and policy.compress:
            found.append("compress+offload")
        return found

    def _ladder(self, region: int) -> list[Option]:
        """The region's options by increasing estimated time and decreasing estimated bytes."""
        scored = []
        for mode in ("save", "cheap", "full", "span"):
            for storage in self._storages():
                option = Option(mode, storage)
                # "span": the next region's recomputation reaches into this one (so it is "full" here).
                scope = {region, region + 1} if mode == "span" else {region}
                saved, recomputed = self._walk(
                    lambda r, o=option, scope=scope: o if r == region else Option("full") if r in scope else SAVE,
                    [n for n in self.needed if self.region_of.get(n) in scope])
                nbytes = 0.0
                seconds = sum(node_seconds(v, self.device, self.compiler) for v in recomputed
                              if self.region_of[v] == region)
                for v, codec in saved.items():
                    if self.region_of.get(v) != region:
                        continue
                    own = self._own_bytes(storage_root(v))
                    nbytes += own * _ratio(codec)
                    seconds += sum(codec_seconds(s, own, self.device) for s in (codec or "").split("+") if s)
                scored.append((seconds, nbytes, option))
        ladder, best_bytes = [], float("inf")
        for seconds, nbytes, option in sorted(scored, key=lambda t: (t[0], t[1])):
            if nbytes < best_bytes:
                ladder.append(option)
                self.scores[(region, option)] = (seconds, nbytes)
                best_bytes = nbytes
        return ladder

    def model_seconds(self, option_of: Callable[[int], Option]) -> float:
        """The estimated seconds the regions' options add, from their scores."""
        return sum(self.scores[(r, option_of(r))][0] for r in self.order)

    def staircase(self, level: int, k: int) -> Callable[[int], Option]:
        """Every region at ladder step ``level``, the first ``k`` regions one step further."""
        def option(region: int) -> Option:
            ladder = self.ladders[region]
            return ladder[min(level + (region < k), len(ladder) - 1)]
        return option

    ### Selections

    def _walk(self, option_of: Callable[[int], Option], roots: list) -> tuple[dict, set]:
        """(saved node -> codec, recomputed nodes) for the values ``roots`` the backward reads."""
        options = self._effective(option_of)
        saved: dict = {}
        recomputed: set = set()
        stack = [(v, None) for v in roots]
        while stack:
            v, via = stack.pop()
            if v in saved or v in recomputed:
                continue
            region = self.region_of.get(v)
            if region is None or is_symbolic_scalar(v) or aliases_input(v):
                saved[v] = None
                continue
            option = options[region]
            crossing = via is not None and via != region and not (
                via == region + 1 and option.mode == "span" and options[via].mode in ("full", "span"))
            if is_multi_output(v) or (not crossing and self._recompute(v, option, region)):
                recomputed.add(v)
                stack.extend((u, region) for u in v.all_input_nodes)
            else:
                saved[v] = self._codec(v, option)
        return saved, recomputed

    def _effective(self, option_of: Callable[[int], Option]) -> list[Option]:
        """Per-region options; a "span" region right after another one is "full" instead, so that
        a recomputation covers at most two regions."""
        options: list[Option] = []
        for region in self.order:
            option = option_of(region)
            if option.mode == "span" and options and options[-1].mode == "span":
                option = dataclasses.replace(option, mode="full")
            options.append(option)
        return options

    def _recompute(self, v: torch.fx.Node, option: Option, region: int) -> bool:
        source = v.args[0] if v.target is operator.getitem else v
        boundary = region < len(self.separators) and v is self.separators[region]
        if option.mode == "save" or (boundary and option.mode != "span"):
            return False
        if option.mode == "cheap":
            return not is_random(source) and recompute_rule(source).recomputable
        return _may_recompute(source)

    def _codec(self, v: torch.fx.Node, option: Option) -> str | None:
        val = v.meta.get("val")
        if option.storage is None or not isinstance(val, torch.Tensor):
            return None
        need = self.needs.get(v)
        allowed = self.policy.codec_for(val, need.exactness if need else Exactness.ANY)
        if allowed is None:
            return None
        wanted = option.storage.split("+")
        stages = [s for s in allowed.split("+") if ("offload" if s == "offload" else "compress") in wanted]
        return "+".join(stages) or None

    def choices(self, option_of: Callable[[int], Option]) -> list[SavedChoice]:
        """SavedChoices for the plan where region ``r`` uses ``option_of(r)``."""
        saved, _ = self._walk(option_of, self.needed)
        result = []
        for v in self.graph.nodes:
            if v not in saved:
                continue
            codec = saved[v]
            decision = codec_decision(codec)
            result.append(SavedChoice(v, decision, self._save_reason(v, option_of), codec))
        return result

    def _save_reason(self, v: torch.fx.Node, option_of: Callable[[int], Option]) -> str:
        if v.op == "placeholder" or aliases_input(v):
            return "graph input, already live"
        if is_symbolic_scalar(v):
            return "sizes are computed in the forward"
        region = self.region_of[v]
        option = option_of(region)
        mib = self._own_bytes(storage_root(v)) / 2**20
        if region < len(self.separators) and v is self.separators[region]:
            return f"kept: boundary of region {region} ({mib:.2f} MiB); the backward recomputes from it"
        if option.mode != "save" and not _may_recompute(v):
            return f"saved: {recompute_rule(v).reason}"
        return f"kept: region {region} is planned '{option}' within the budget ({mib:.2f} MiB)"

    def recompute_reasons(self, choices: list[SavedChoice]) -> dict[str, str]:
        saved = {c.node for c in choices}
        reasons = {}
        for v in self.forward:
            if v in saved:
                continue
            mib = self._own_bytes(v) / 2**20
            reasons[v.name] = (f"recomputed: frees {mib:.2f} MiB of region {self.region_of[v]} at "
                               f"{node_seconds(v, self.device, self.compiler) * 1e3:.3f} ms")
        return reasons


def _shape_key(val) -> tuple | str:
    if isinstance(val, torch.Tensor):
        return (tuple(str(s) for s in val.shape), tuple(str(s) for s in val.stride()), str(val.dtype),
                val.requires_grad)
    if isinstance(val, (list, tuple)):
        return tuple(_shape_key(v) for v in val)
    return type(val).__name__


def _ratio(codec: str | None) -> float:
    ratio = 1.0
    for stage in (codec or "").split("+"):
        if stage:
            ratio *= CODEC_RATIO[stage]
    return ratio


def _may_recompute(v: torch.fx.Node) -> bool:
    """Recomputable under a budget: rules.recompute_rule, plus compute-heavy ops and shrinking
    reductions, whose cost the estimate weighs. Random ops never (Note [Random ops are not
    recomputed]); a getitem only if its tuple is."""
    if v.op != "call_function" or is_symbolic_scalar(v) or is_random(v):
        return False
    if v.target is operator.getitem:
        return _may_recompute(v.args[0])
    if recompute_rule(v).recomputable:
        return True
    target = v.target
    return isinstance(target, torch._ops.OpOverload) and (
        target.overloadpacket in COMPUTE_HEAVY_OPS or torch.Tag.reduction in target.tags)
