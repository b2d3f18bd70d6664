"""The "mincut" partitioner: save the cheapest set of forward values, recompute the rest.

Note [Min-cut rematerialization]
--------------------------------
Every joint-graph node ``v`` becomes two vertices ``v_in -> v_out``; the edge's
capacity is what saving ``v`` costs (its bytes). A data edge ``u -> v`` becomes
``u_out -> v_in`` with infinite capacity. The source feeds ``v_in`` (infinite) for
every node that must run in the forward: graph inputs and nodes that may not be
recomputed (``rules.recompute_rule``). Every tangent-dependent node feeds the sink
(``v_in -> sink``, infinite): it can only run in the backward. A minimum s-t cut
then crosses only ``v_in -> v_out`` edges: ``v_in`` on the source side and
``v_out`` on the sink side means ``v`` is computed in the forward and saved;
everything on the sink side that the backward needs is recomputed there
(``split`` does that).

Capacities (bytes, scaled so the finite total fits scipy's int32):
- graph inputs cost 0 (the caller holds them all step, saving one is free);
- forward user outputs cost 0 (the caller holds them during the backward);
- multi-output nodes are never saved themselves (infinite): their getitems are;
- every capacity gets +1 so that, among equal-byte cuts, fewer saved values win.

The objective is bytes alone; time enters through ``rules.recompute_rule`` (compute-heavy
ops are never recomputed, attention scores excepted: Note [Attention scores are recomputed]) and
through the allowance below. What may be recomputed is memory-bound, a kernel per op when the graphs
run eagerly, and close to free under Inductor, where a recomputed pointwise chain fuses into the
backward kernel that reads it (Note [Cost model] in costs.py).

Note [Recompute allowance]
--------------------------
The attention scores are the one recomputation that costs FLOPs, and the softmax after them is
materialized for the product that reads it (it fuses into no library kernel): on a GPT with 4
layers, width 256 and sequence 256 under Inductor on a CPU, recomputing every layer's scores adds
about 2.5% of the step per layer (measured with ``benchmarks/inductor_steps.py``). mincut admits
such *costly* recomputations (``RecomputeRule.costly``) in forward order while their estimated time
(``costs.recompute_seconds``, priced for the backward's compiler) stays within
``RECOMPUTE_ALLOWANCE`` of the estimated step (``costs.graph_seconds`` of the joint graph); the
rest are saved, with the figures in their reason. Earlier layers go first: their recomputation
runs last in the backward, when the later layers' values are already freed. The budget planner
weighs every recomputation against its budget itself: it checks mincut's plan both within the
allowance and without it.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse
import torch
import torch.fx
from scipy.sparse.csgraph import breadth_first_order, maximum_flow

from ..ir import Decision, Role
from ..ir.graph import output_node
from ..ir.graph_utils import (
    SavedChoice,
    aliases_input,
    ancestors,
    backward_nodes,
    checkpoint_policy,
    is_multi_output,
    is_random,
    unsaved_inputs,
)
from .costs import device_for, graph_seconds, recompute_seconds
from .rules import RecomputeRule, recompute_rule
from .simulate import allocated_nbytes

# Note [Recompute allowance]: estimated seconds of costly recomputation mincut accepts, as a
# fraction of the estimated step.
RECOMPUTE_ALLOWANCE = 0.055

_INF = 2**30
_FINITE_BUDGET = 2**29  # sum of finite capacities after scaling stays below this


def plan_mincut(graph: torch.fx.Graph, compiler: str = "eager",
                allowance: float | None = None) -> list[SavedChoice]:
    """Return the values to save, each with the reason it crosses to the backward; ``compiler`` is
    the backward's graph compiler, which prices costly recomputation against ``allowance`` (a fraction
    of the estimated step, ``RECOMPUTE_ALLOWANCE`` when None; ``math.inf``: no limit; Note [Recompute
    allowance])."""
    nodes = [n for n in graph.nodes if n.op != "output"]
    index = {n: i for i, n in enumerate(nodes)}
    # Note [Phases]: backward nodes stay in the backward, tangent-dependent or not.
    from_tangents = backward_nodes(graph)
    # Note [Activation checkpointing]: tagged regions are recomputed (sink side) or saved (banned).
    from_tangents |= {n for n in graph.nodes if n.op == "call_function" and not is_random(n)
                      and checkpoint_policy(n) == "recompute" and not is_multi_output(n)}
    out = output_node(graph)
    user_outputs = {v for v, r in zip(out.args[0], out.meta["roles"], strict=True)
                    if r is Role.USER_OUTPUT and isinstance(v, torch.fx.Node)}
    rules = {n: recompute_rule(n) for n in nodes if n not in from_tangents}
    for n in rules:
        if checkpoint_policy(n) == "save":
            rules[n] = RecomputeRule(False, "checkpoint policy: save")
    _within_allowance(graph, rules, compiler, RECOMPUTE_ALLOWANCE if allowance is None else allowance)
    saved = _solve(nodes, index, from_tangents, user_outputs, rules)
    saved = _needed_by_backward(out, saved)
    return [SavedChoice(n, Decision.SAVE, _reason(n, rules, user_outputs)) for n in nodes if n in saved]


def _within_allowance(graph: torch.fx.Graph, rules: dict, compiler: str, allowance: float) -> None:
    """Save the costly recomputations past ``allowance`` (Note [Recompute allowance])."""
    costly = [n for n, rule in rules.items() if rule.costly and rule.recomputable]
    if not costly or allowance == math.inf:
        return
    device = device_for(graph)
    step = graph_seconds(graph, device, compiler)
    spent = 0.0
    for node in costly:
        seconds = recompute_seconds(node, _chain(node, rules), device, compiler)
        if spent + seconds <= allowance * step:
            spent += seconds
            continue
        rules[node] = RecomputeRule(False, f"attention scores: recomputing them would add {seconds * 1e3:.3g} ms to "
                                           f"an estimated {step * 1e3:.3g} ms step, past "
                                           f"mincut's {allowance:.1%} allowance "
                                           f"(Note [Recompute allowance])", costly=True)


def _chain(product: torch.fx.Node, rules: dict) -> list[torch.fx.Node]:
    """The cheap forward ops recomputed with ``product``: its same-size recomputable descendants, and
    the reductions (softmax statistics) they feed."""
    size = allocated_nbytes(product.meta["val"])
    chain, frontier = [], [product]
    while frontier:
        for user in frontier.pop().users:
            rule = rules.get(user)
            if user in chain or rule is None or not rule.recomputable or rule.costly:
                continue
            chain.append(user)
            val = user.meta.get("val")
            if isinstance(val, torch.Tensor) and allocated_nbytes(val) == size:
                frontier.append(user)
    return chain


def _solve(nodes: list, index: dict, from_tangents: set, user_outputs: set, rules: dict) -> set:
    """Build the flow network of Note [Min-cut rematerialization]; return the cut's nodes."""
    n = len(nodes)
    source, sink = 2 * n, 2 * n + 1
    weights = np.array([_weight(v, user_outputs) for v in nodes], dtype=np.int64)
    finite = weights[weights < _INF]
    scale = max(1, int(finite.sum()) // _FINITE_BUDGET + 1) if finite.size else 1
    weights = np.where(weights < _INF, weights // scale + 1, _INF)
    tails, heads, caps = [], [], []
    for v in nodes:
        i = index[v]
        for user in v.users:
            j = index.get(user)
            if j is not None:
                tails.append(2 * i + 1), heads.append(2 * j), caps.append(_INF)
        if v in from_tangents:
            tails.append(2 * i), heads.append(sink), caps.append(_INF)
        elif not rules[v].recomputable:
            tails.append(source), heads.append(2 * i), caps.append(_INF)
    tails.extend(range(0, 2 * n, 2))
    heads.extend(range(1, 2 * n, 2))
    caps.extend(weights.tolist())
    capacity = scipy.sparse.coo_matrix(
        (np.minimum(np.array(caps, dtype=np.int64), _INF), (tails, heads)), shape=(2 * n + 2, 2 * n + 2)).tocsr()
    capacity.sum_duplicates()
    capacity.data = np.minimum(capacity.data, _INF).astype(np.int32)
    flow = maximum_flow(capacity, source, sink, method="dinic").flow
    residual = (capacity - flow).tocsr()
    residual.data = np.where(residual.data > 0, 1, 0).astype(np.int32)
    residual.eliminate_zeros()
    reachable = np.zeros(2 * n + 2, dtype=bool)
    reachable[breadth_first_order(residual, source, directed=True, return_predecessors=False)] = True
    in_side, out_side = reachable[0:2 * n:2], reachable[1:2 * n:2]
    return {nodes[i] for i in np.flatnonzero(in_side & ~out_side)}


def _weight(node: torch.fx.Node, user_outputs: set) -> int:
    if node.op == "placeholder" or node in user_outputs:
        return 0
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return allocated_nbytes(val) if not aliases_input(node) else val.dtype.itemsize
    if isinstance(val, (tuple, list)):
        return _INF
    return 8  # a symbolic size


def _needed_by_backward(out: torch.fx.Node, cut: set) -> set:
    """The cut nodes the gradients actually read (the cut may contain free, unused inputs)."""
    roots = [v for v, r in zip(out.args[0], out.meta["roles"], strict=True)
             if r in (Role.GRADIENT, Role.BACKWARD_MUTATION) and isinstance(v, torch.fx.Node)]
    reached = ancestors(roots, cut)
    missing = unsaved_inputs(reached, cut)
    if missing:
        raise AssertionError(f"min-cut left graph input {missing[0].name} on the backward side")
    return reached & cut


def _priced_source(node: torch.fx.Node, rules: dict) -> torch.fx.Node | None:
    """A product past the allowance that recomputing ``node`` would run (through recomputable ops)."""
    seen, stack = set(), list(node.all_input_nodes)
    while stack:
        source = stack.pop()
        rule = rules.get(source)
        if source in seen or rule is None:
            continue
        seen.add(source)
        if rule.costly and not rule.recomputable:
            return source
        if rule.recomputable:
            stack.extend(source.all_input_nodes)
    return None


def _reason(node: torch.fx.Node, rules: dict, user_outputs: set) -> str:
    if node.op == "placeholder":
        return "graph input, already live"
    if node in user_outputs:
        return "forward output, already live"
    rule = rules[node]
    if not rule.recomputable:
        return f"saved: {rule.reason}"
    priced = _priced_source(node, rules)
    if priced is not None:
        return f"saved: cheapest cut — recomputing it needs {priced.name}; {rules[priced].reason}"
    for source in node.all_input_nodes:
        if source.op == "call_function" and not rules[source].recomputable:
            return f"saved: cheapest cut — recomputing it needs {source.name}; {rules[source].reason}"
    return "saved: cheapest cut — smaller than the values it is computed from"
