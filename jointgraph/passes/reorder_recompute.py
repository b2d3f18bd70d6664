"""Move recomputation in the backward graph to just before it is needed."""

from __future__ import annotations

import torch
import torch.fx

from ..ir.graph import is_collective
from ..ir.graph_utils import tangent_dependent


def reorder_recompute(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Place each recomputed node right before its first user, as the autograd engine would.

    Expects: a backward graph from ``split`` (placeholders with roles; tangents have
    ``Role.TANGENT``). A call node that does not depend on a tangent is recomputation
    of forward values.
    Guarantees: the same nodes and outputs in a valid topological order; tangent-dependent
    nodes and collectives keep their relative order; every recomputed node comes after its inputs and
    immediately before (the recomputed chain feeding) its first tangent-dependent user,
    so recomputed values are not all live from the start of the backward.

    Example: ``relu = relu(addmm); expand = expand(tangent); mm = mm(expand, w)``
    becomes ``expand = ...; mm = ...`` then ``relu`` right before ``threshold_backward``.
    """
    graph = gm.graph
    nodes = list(graph.nodes)
    dependent = tangent_dependent(graph)
    # A collective stays where it is (Note [Collectives]): moving a recomputed all-gather would
    # reorder it against the backward's reduce-scatters.
    recompute = {n for n in nodes if n.op == "call_function" and n not in dependent and not is_collective(n)}
    order: list[torch.fx.Node] = []
    emitted: set[torch.fx.Node] = set()
    for anchor in nodes:
        if anchor in recompute or anchor.op == "placeholder":
            continue
        if anchor.op == "output":  # dead recomputation, if any, stays before the output
            for node in nodes:
                if node in recompute:
                    _emit_with_inputs(node, recompute, emitted, order)
        _emit_with_inputs(anchor, recompute, emitted, order)
    out = next(n for n in reversed(nodes) if n.op == "output")
    for node in order:
        if node is not out:
            out.prepend(node)
    gm.recompile()
    return gm


def _emit_with_inputs(root: torch.fx.Node, recompute: set, emitted: set, order: list) -> None:
    """Append ``root`` after the not-yet-emitted recomputed nodes it depends on (post-order)."""
    if root in emitted:
        return
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in emitted:
            continue
        if expanded:
            emitted.add(node)
            order.append(node)
            continue
        stack.append((node, True))
        for source in reversed(node.all_input_nodes):
            if source in recompute and source not in emitted:
                stack.append((source, False))
