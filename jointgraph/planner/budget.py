"""The "budget" partitioner: the fastest plan whose simulated training-step peak fits a budget.

Note [Budget formulation]
-------------------------
Every forward node ``v`` the backward may need gets two binaries: ``s_v`` (computed
in the forward and saved) and ``r_v`` (recomputed in the backward). Constraints:

- a forward value a backward node reads is saved or recomputed: ``s_v + r_v >= 1``;
- a recomputed node has its inputs: ``r_v <= s_u + r_u`` for every input ``u``;
- recompute chains stay inside one backward *region*: if input ``u`` is itself read
  by the backward later than ``v`` is (``T_u > T_v``), ``u`` must be saved
  (``r_v <= s_u``). This is what makes recomputation local (a transformer block
  recomputes from its saved input, not from the start of the network) and keeps the
  memory model below linear in the variables;
- random ops are never recomputed (Note [Random ops are not recomputed]); multi-output
  nodes are never saved (their elements are); graph inputs are saved for free.

Memory is constrained at every step of the schedule, forward then backward (the
order ``split`` and ``reorder_recompute`` produce), with the storage model of
Note [Memory simulation model]: a saved storage stays live from the end of its
forward life to its last backward use; a recomputed value is live from its first
backward use ``T_v`` to its last ``L_v``. Steps with the same set of variable
terms are merged (one row, the largest constant), which keeps the model small.
The objective is the recompute time of Note [Cost model]. HiGHS
(``scipy.optimize.milp``) solves it under a time limit.

The model is an estimate: every plan is verified with the real split + simulator,
and a plan above the budget tightens the model's budget and solves again. Three
heuristic plans (save everything needed; recompute cheap ops only; recompute every
region from its saved inputs) are verified too; the fastest verified plan within
the budget wins, else the lowest-peak one with a warning.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import time
import warnings
from collections.abc import Callable

import numpy as np
import scipy.sparse
import torch
import torch.fx
from scipy.optimize import Bounds, LinearConstraint, milp

from ..ir import Decision, Role
from ..ir.graph import output_node
from .costs import device_for, node_seconds, tensor_bytes
from .graph_utils import SavedChoice, aliases_input, is_random, is_symbolic_scalar, tangent_dependent
from .rules import COMPUTE_HEAVY_OPS, is_view, recompute_rule

TIME_LIMIT_S = 10.0
MAX_ATTEMPTS = 6


@dataclasses.dataclass
class Verified:
    """A candidate plan checked with the real split + simulator."""

    choices: list[SavedChoice]
    peak_bytes: int
    est_seconds: float
    label: str


@dataclasses.dataclass
class BudgetResult:
    """The chosen plan, the reasons for its recomputations (by node name) and every verified candidate."""

    choices: list[SavedChoice]
    recompute_reasons: dict[str, str]
    peak_bytes: int
    est_seconds: float
    candidates: list[Verified]


Verify = Callable[[list[SavedChoice]], tuple[int, float]]


### Main API

def plan_budget(graph: torch.fx.Graph, budget_bytes: int, verify: Verify,
                *, time_limit: float = TIME_LIMIT_S) -> BudgetResult:
    """Return the fastest verified plan with peak <= ``budget_bytes`` (Note [Budget formulation]).

    ``verify(choices) -> (simulated peak bytes, estimated step seconds)`` runs the real split + simulator.
    """
    models = [_Model(graph, window) for window in _windows(graph)]
    candidates = [_check(verify, m.choices(sel, "heuristic"), f"{label} (window {m.window})")
                  for m in models for label, sel in m.heuristics()[2 if m is not models[0] else 0:]]
    model = min(models, key=lambda m: min(c.peak_bytes for c in candidates if c.label.endswith(f" {m.window})")))
    target = budget_bytes
    deadline = time.perf_counter() + time_limit
    for _ in range(MAX_ATTEMPTS):
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            break
        selection = model.solve(target, remaining)
        if selection is None:
            break
        result = _check(verify, model.choices(selection, "milp"), "milp")
        candidates.append(result)
        if result.peak_bytes <= budget_bytes:
            break
        target -= max(result.peak_bytes - budget_bytes, budget_bytes // 200)
    feasible = [c for c in candidates if c.peak_bytes <= budget_bytes]
    if feasible:
        best = min(feasible, key=lambda c: (c.est_seconds, c.peak_bytes))
    else:
        best = min(candidates, key=lambda c: (c.peak_bytes, c.est_seconds))
        warnings.warn(f"memory budget {budget_bytes / 2**20:.2f} MiB is below the minimum achievable peak "
                      f"{best.peak_bytes / 2**20:.2f} MiB found by the budget planner; using that plan",
                      stacklevel=3)
    return BudgetResult(best.choices, model.recompute_reasons(best.choices), best.peak_bytes, best.est_seconds,
                        candidates)


def _windows(graph: torch.fx.Graph) -> list[int]:
    """Recompute-chain windows, in backward steps, to try (Note [Budget formulation])."""
    steps = sum(1 for n in graph.nodes if n.meta.get("phase") == "backward")
    return sorted({max(1, steps // k) for k in (16, 4, 2)})


def _check(verify: Verify, choices: list[SavedChoice], label: str) -> Verified:
    peak, seconds = verify(choices)
    return Verified(choices, peak, seconds, label)


### Implementation

class _Model:
    """The joint graph's forward values, their live ranges and costs, as MILP data."""

    def __init__(self, graph: torch.fx.Graph, window: int):
        self.graph = graph
        self.window = window
        self.device = device_for(graph)
        backward = tangent_dependent(graph) | {n for n in graph.nodes if n.meta.get("phase") == "backward"}
        out = output_node(graph)
        self.bw_steps = [n for n in graph.nodes if n in backward and n.op == "call_function"]
        self.fw_steps = [n for n in graph.nodes if n.op == "call_function" and n not in backward]
        bw_pos = {n: k for k, n in enumerate(self.bw_steps)}
        end = max(len(self.bw_steps) - 1, 0)
        grad_roots = [v for v, r in zip(out.args[0], out.meta["roles"], strict=True)
                      if r in (Role.GRADIENT, Role.BACKWARD_MUTATION) and isinstance(v, torch.fx.Node)]
        self.fw_outputs = {v for v, r in zip(out.args[0], out.meta["roles"], strict=True)
                           if r not in (Role.GRADIENT, Role.BACKWARD_MUTATION) and isinstance(v, torch.fx.Node)}
        fw_all = [n for n in graph.nodes if n.op != "output" and n not in backward]
        # Direct backward reads of forward values (a gradient that is a forward value: read at the end).
        direct: dict = {}
        for v in fw_all:
            uses = [bw_pos[u] for u in v.users if u in bw_pos]
            if v in grad_roots:
                uses.append(end)
            if uses:
                direct[v] = (min(uses), max(uses))
        self.needed = list(direct)
        # The forward values a recomputation may reach: ancestors of the needed ones.
        relevant: set = set()
        stack = list(self.needed)
        while stack:
            v = stack.pop()
            if v not in relevant:
                relevant.add(v)
                stack.extend(v.all_input_nodes)
        self.nodes = [n for n in fw_all if n in relevant]
        self.index = {n: i for i, n in enumerate(self.nodes)}
        # T_v: first backward step that reads v (directly, else through its forward users); L_v: the last.
        first: dict = {}
        last: dict = {}
        for v in reversed(self.nodes):
            users = [u for u in v.users if u in self.index]
            lo, hi = direct.get(v, (math.inf, -1))
            first[v] = min([lo, *(first[u] for u in users)]) if users or lo < math.inf else end
            if first[v] == math.inf:
                first[v] = end
            last[v] = max([hi, *(first[u] for u in users)]) if users or hi >= 0 else first[v]
            last[v] = max(last[v], first[v])
        self.first, self.last = first, last
        self.direct = direct
        # When a recomputed v can first be live: its first direct read, or that of a user whose
        # recomputation may chain through it (crossing edges force a save instead).
        self.start = {}
        for v in reversed(self.nodes):
            chained = [self.start[u] for u in v.users if u in self.index and not self.crosses(v, u)]
            self.start[v] = min([direct.get(v, (first[v],))[0], *chained])
        self.eligible = {v: _may_recompute(v) for v in self.nodes}
        self.cost = {v: node_seconds(v, self.device) for v in self.nodes}
        self.nbytes = {v: self._own_bytes(v) for v in self.nodes}
        self.base_seconds = sum(node_seconds(n, self.device) for n in graph.nodes)

    def _own_bytes(self, v: torch.fx.Node) -> int:
        """Bytes of the storage ``v`` allocates (0 for inputs, views and tuples)."""
        if v.op == "placeholder" or aliases_input(v) or isinstance(v.meta.get("val"), (tuple, list)):
            return 0
        if v.target is not operator.getitem and _is_alias(v):
            return 0
        return tensor_bytes(v.meta.get("val"))

    def owner(self, v: torch.fx.Node) -> torch.fx.Node:
        """The node whose storage ``v`` shares (itself if it allocates)."""
        while v.op == "call_function" and _is_alias(v) and v.target is not operator.getitem:
            v = v.args[0]
        return v

    ### Heuristic plans: selections (saved set, recomputed set)

    def heuristics(self) -> list[tuple[str, tuple[set, set]]]:
        return [("save needed", self._propagate(lambda v: False)),
                ("recompute cheap ops", self._propagate(lambda v: recompute_rule(v).recomputable)),
                ("recompute regions", self._propagate(lambda v: True))]

    def _propagate(self, want: Callable[[torch.fx.Node], bool]) -> tuple[set, set]:
        """Recompute every needed value ``want`` accepts (within Note [Budget formulation]'s rules)."""
        saved: set = set()
        recomputed: set = set()
        stack = list(self.needed)
        while stack:
            v = stack.pop()
            if v in saved or v in recomputed:
                continue
            if self.eligible[v] and want(v):
                recomputed.add(v)
                for u in v.all_input_nodes:
                    if self.crosses(u, v):
                        saved.add(u)
                    else:
                        stack.append(u)
            elif self.may_save(v):
                saved.add(v)
            else:  # a tuple: its elements are what is saved, so recompute it from its inputs
                recomputed.add(v)
                stack.extend(v.all_input_nodes)
        return saved, recomputed

    def crosses(self, u: torch.fx.Node, v: torch.fx.Node) -> bool:
        """True if the backward reads input ``u`` itself after it first needs ``v``: recomputing
        ``v`` then starts from a saved ``u`` (Note [Budget formulation])."""
        return u in self.direct and self.direct[u][0] > self.first[v] + self.window and self.may_save(u)

    def may_save(self, v: torch.fx.Node) -> bool:
        return not isinstance(v.meta.get("val"), (tuple, list))

    ### MILP

    def solve(self, budget: int, time_limit: float) -> tuple[set, set] | None:
        n = len(self.nodes)
        if n == 0:
            return set(), set()
        rows, cols, vals, lo, hi = [], [], [], [], []

        def add(terms: list[tuple[int, float]], lower: float, upper: float) -> None:
            r = len(lo)
            for c, a in terms:
                rows.append(r), cols.append(c), vals.append(a)
            lo.append(lower), hi.append(upper)

        s = lambda v: self.index[v]          # noqa: E731 — column of s_v
        r = lambda v: n + self.index[v]      # noqa: E731 — column of r_v
        upper = np.ones(2 * n)
        lower = np.zeros(2 * n)
        for v in self.nodes:
            if not self.eligible[v]:
                upper[r(v)] = 0
            if not self.may_save(v):
                upper[s(v)] = 0
            if v in self.direct:
                add([(s(v), 1), (r(v), 1)], 1, np.inf)
            o = self.owner(v)
            if o is not v and o in self.index and self.may_save(o):
                add([(s(o), 1), (s(v), -1)], 0, np.inf)   # saving a view keeps its base storage
            for u in v.all_input_nodes:
                if u not in self.index:
                    continue
                if self.crosses(u, v):
                    add([(s(u), 1), (r(v), -1)], 0, np.inf)
                else:
                    add([(s(u), 1), (r(u), 1), (r(v), -1)], 0, np.inf)
        for terms, const in self._memory_rows(s, r):
            add(terms, -np.inf, budget - const)
        matrix = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(len(lo), 2 * n))
        # Objective: recompute seconds, plus a tie-break towards fewer saved bytes.
        cost = np.zeros(2 * n)
        for v in self.nodes:
            cost[r(v)] = self.cost[v] + 1e-9
            cost[s(v)] = self.nbytes[self.owner(v)] * 1e-15
        result = milp(cost, constraints=LinearConstraint(matrix, lo, hi), integrality=np.ones(2 * n),
                      bounds=Bounds(lower, upper), options={"time_limit": max(time_limit, 0.1), "disp": False})
        if result.x is None:
            return None
        x = np.round(result.x).astype(bool)
        return {v for v in self.nodes if x[s(v)]}, {v for v in self.nodes if x[r(v)]}

    def _memory_rows(self, s, r) -> list[tuple[list[tuple[int, float]], int]]:
        """Live bytes at every forward and backward step: (variable terms, constant), merged."""
        fw_const, fw_spans = self._forward_profile()
        bw_const, bw_spans = self._backward_profile()
        rows = []
        for const, spans in ((fw_const, fw_spans), (bw_const, bw_spans)):
            events: dict[int, list] = {}
            for start, stop, column, nbytes in spans(s, r):
                events.setdefault(start, []).append((column, nbytes, +1))
                events.setdefault(stop + 1, []).append((column, nbytes, -1))
            active: dict[int, float] = {}
            segment_max = None
            for step in range(len(const) + 1):
                if step in events or step == len(const):
                    if segment_max is not None:
                        rows.append(([(c, float(a)) for c, a in active.items() if a], segment_max))
                    for column, nbytes, sign in events.get(step, []):
                        active[column] = active.get(column, 0.0) + sign * nbytes
                    segment_max = None
                if step < len(const):
                    segment_max = const[step] if segment_max is None else max(segment_max, const[step])
        return rows

    def _forward_profile(self):
        steps = self.fw_steps
        pos = {v: t for t, v in enumerate(steps)}
        end = len(steps) - 1
        pinned = sum(tensor_bytes(p.meta.get("val")) for p in self.graph.nodes
                     if p.op == "placeholder" and p.meta.get("role") is not Role.TANGENT)
        delta = np.zeros(len(steps) + 1)
        death: dict = {}
        for v in steps:
            o = self.owner(v)
            if o.op == "placeholder":
                continue
            last = max([pos[v], *(pos[u] for u in v.users if u in pos)])
            if v in self.fw_outputs:
                last = end
            death[o] = max(death.get(o, -1), last)
        for o, last in death.items():
            delta[pos[o]] += self._alloc_bytes(o)
            delta[last + 1] -= self._alloc_bytes(o)
        const = (np.cumsum(delta)[:-1] + pinned).tolist()

        def spans(s, r):
            for o, last in death.items():
                if o in self.index and self.nbytes[o] and last < end:
                    yield last + 1, end, s(o), self.nbytes[o]
        return const, spans

    def _alloc_bytes(self, o: torch.fx.Node) -> int:
        """Bytes ``o`` allocates; a tuple's elements are counted on their getitems."""
        if isinstance(o.meta.get("val"), (tuple, list)) or (o.target is not operator.getitem and _is_alias(o)):
            return 0
        return tensor_bytes(o.meta.get("val"))

    def _backward_profile(self):
        steps = self.bw_steps
        pos = {v: k for k, v in enumerate(steps)}
        end = len(steps)
        pinned = sum(tensor_bytes(p.meta.get("val")) for p in self.graph.nodes
                     if p.op == "placeholder" and p.meta.get("role") is not Role.TANGENT)
        out = output_node(self.graph)
        grads = {v for v in out.args[0] if isinstance(v, torch.fx.Node)}
        delta = np.zeros(end + 1)
        for p in self.graph.nodes:
            if p.op == "placeholder" and p.meta.get("role") is Role.TANGENT:
                last = max([0, *(pos[u] for u in p.users if u in pos)])
                delta[0] += tensor_bytes(p.meta.get("val"))
                delta[last + 1] -= tensor_bytes(p.meta.get("val"))
        death: dict = {}
        for v in steps:
            o = self.owner(v)
            if o not in pos:
                continue
            last = max([pos[v], *(pos[u] for u in v.users if u in pos)])
            if v in grads:
                last = end - 1
            death[o] = max(death.get(o, -1), last)
        for o, last in death.items():
            nbytes = self._alloc_bytes(o)
            delta[pos[o]] += nbytes
            delta[last + 1] -= nbytes
        const = (np.cumsum(delta)[:-1] + pinned).tolist()

        def spans(s, r):
            for v in self.nodes:
                nbytes = self.nbytes[v]
                if not nbytes:
                    continue
                last = self.last[v]
                for alias in self._aliases(v):
                    last = max(last, self.last[alias])
                yield 0, min(last, end - 1), s(v), nbytes
                yield min(self.start[v], end - 1), min(self.last[v], end - 1), r(v), nbytes
        return const, spans

    def _aliases(self, v: torch.fx.Node) -> list:
        """Views of ``v`` among the model's nodes (their reads keep ``v``'s storage live)."""
        found, stack = [], [u for u in v.users if u in self.index and _is_alias(u) and u.target is not operator.getitem]
        while stack:
            u = stack.pop()
            found.append(u)
            stack.extend(w for w in u.users if w in self.index and _is_alias(w) and w.target is not operator.getitem)
        return found

    ### Results

    def choices(self, selection: tuple[set, set], how: str) -> list[SavedChoice]:
        """SavedChoices for the values the backward reads, given (saved, recomputed)."""
        saved, recomputed = selection
        # Saving a view saves its base storage: count a saved view on its owner.
        reached: set = set()
        stack = list(self.needed)
        chosen = []
        while stack:
            v = stack.pop()
            if v in reached:
                continue
            reached.add(v)
            if v in saved or v not in recomputed:
                chosen.append(v)
                continue
            stack.extend(u for u in v.all_input_nodes if u in self.index)
        chosen_set = set(chosen)
        return [SavedChoice(v, Decision.SAVE, self._save_reason(v, recomputed, how))
                for v in self.nodes if v in chosen_set]

    def _save_reason(self, v: torch.fx.Node, recomputed: set, how: str) -> str:
        if v.op == "placeholder" or aliases_input(v):
            return "graph input, already live"
        if is_symbolic_scalar(v):
            return "sizes are computed in the forward"
        if not self.eligible[v]:
            return f"saved: {recompute_rule(v).reason}"
        mib = self.nbytes[self.owner(v)] / 2**20
        if v not in self.direct:
            return f"kept: recomputation in a later region starts from it ({mib:.2f} MiB)"
        return f"kept: the budget allows it ({mib:.2f} MiB, recomputing would cost " \
               f"{self.cost[v] * 1e3:.3f} ms)"

    def recompute_reasons(self, choices: list[SavedChoice]) -> dict[str, str]:
        saved = {c.node for c in choices}
        reasons = {}
        for v in self.nodes:
            if v in saved or not self.eligible[v]:
                continue
            mib = self.nbytes[v] / 2**20
            reasons[v.name] = f"recomputed: frees {mib:.2f} MiB at {self.cost[v] * 1e3:.3f} ms"
        return reasons


def _is_alias(v: torch.fx.Node) -> bool:
    target = v.target
    return target is operator.getitem or target is torch.ops.aten._unsafe_view.default or (
        isinstance(target, torch._ops.OpOverload) and is_view(target))


def _may_recompute(v: torch.fx.Node) -> bool:
    """Recomputable under a budget: rules.recompute_rule, plus compute-heavy ops and shrinking
    reductions, whose cost the objective now weighs. Random ops never (Note [Random ops are not
    recomputed]); a getitem only if its tuple is."""
    if v.op != "call_function" or is_symbolic_scalar(v) or is_random(v):
        return False
    if v.target is operator.getitem:
        return _may_recompute(v.args[0])
    rule = recompute_rule(v)
    if rule.recomputable:
        return True
    target = v.target
    return isinstance(target, torch._ops.OpOverload) and (
        target.overloadpacket in COMPUTE_HEAVY_OPS or torch.Tag.reduction in target.tags)
