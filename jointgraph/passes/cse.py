"""Common-subexpression elimination on a functional ATen graph."""

from __future__ import annotations

import torch
import torch.fx

from ..planner.graph_utils import is_random


def cse(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Merge call nodes with the same target and arguments.

    Expects: a functional graph (no mutating ops). Random ops and ops with side
    effects are never merged (two draws are two different values), nor a backward node
    with a forward one (Note [Phases]: a checkpoint's recomputation stays a recomputation).
    Guarantees: same outputs; each distinct pure computation appears once.
    """
    graph = gm.graph
    seen: dict[tuple, torch.fx.Node] = {}
    for node in list(graph.nodes):
        if node.op != "call_function" or is_random(node) or node.is_impure():
            continue
        try:
            key = (node.target, _freeze(node.args), _freeze(node.kwargs), node.meta.get("phase"))
            hash(key)
        except TypeError:
            continue
        previous = seen.get(key)
        if previous is None:
            seen[key] = node
        else:
            node.replace_all_uses_with(previous)
            graph.erase_node(node)
    gm.recompile()
    return gm


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _freeze(v)) for k, v in sorted(value.items())))
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return ("sym", id(value))
    return value
