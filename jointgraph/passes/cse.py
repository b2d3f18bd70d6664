"""Common-subexpression elimination on a functional ATen graph."""

from __future__ import annotations

import math

import torch
import torch.fx
from torch.fx.immutable_collections import immutable_list

from ..ir.graph import is_collective
from ..ir.graph_utils import is_random, storage_root

_Node = torch.fx.Node
_LISTS = (tuple, list, immutable_list)
_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)


def cse(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Merge call nodes with the same target and arguments.

    Expects: a functional graph (no mutating ops). Random ops, collectives and ops with side
    effects are never merged (two draws are two different values), nor a backward node
    with a forward one (Note [Phases]: a checkpoint's recomputation stays a recomputation).
    Scalars match by type and value: ``add(x, 1)`` is not ``add(x, 1.0)`` (an integer
    tensor gives different dtypes), nor ``mul(x, 0.0)`` ``mul(x, -0.0)``.
    Guarantees: same outputs; each distinct pure computation appears once, except that a node the
    graph returns (or returns views of) is never merged with another.
    """
    graph = gm.graph
    # Two graph outputs stay two tensors: eager returns distinct objects for ``a * 3, a * 3``, and
    # gradients of two inputs must not share a buffer (AccumulateGrad may keep it as ``.grad``).
    out = next(n for n in reversed(graph.nodes) if n.op == "output")
    # Through views too: ``a.reshape(-1), a.contiguous()`` of an expanded ``a`` are two copies.
    returned = {storage_root(n) for n in out.args[0] if isinstance(n, torch.fx.Node)}
    seen: dict[tuple, torch.fx.Node] = {}
    impure: dict = {}   # per target: impurity of an OpOverload depends on the op alone
    for node in list(graph.nodes):
        if node.op != "call_function" or _impure(node, impure):
            continue
        try:
            key = (node.target, _freeze(node.args), _freeze(node.kwargs), node.meta.get("phase"))
            hash(key)
        except TypeError:
            continue
        previous = seen.get(key)
        if previous is None:
            seen[key] = node
        elif node in returned or previous in returned:
            # nor a returned one with one that is not: the caller may write the returned tensor in place after the
            # call, which eager's other tensor never sees, while the backward may read that one (fuzz --semantics12
            # seed 13001286: ``t0 = a.tanh(); t1 = a.tanh()``, ``t0`` returned and written: eager's backward through
            # ``t1``, which saved its own result, does not raise)
            continue
        else:
            # the merged node runs where either ran (Note [Tangents that reach a node] in capture/trace.py)
            reached = node.meta.get("reached_from")
            if reached is not None:
                previous.meta["reached_from"] = tuple(sorted({*previous.meta.get("reached_from", ()), *reached}))
            node.replace_all_uses_with(previous)
            graph.erase_node(node)
    gm.recompile()
    return gm


def _impure(node: torch.fx.Node, cache: dict) -> bool:
    """Random, a collective (Note [Collectives]) or side-effecting (``Node.is_impure``), cached per
    OpOverload target."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return is_random(node) or node.is_impure()
    result = cache.get(target)
    if result is None:
        result = cache[target] = is_random(node) or is_collective(node) or node.is_impure()
    return result


def _freeze(value):
    """A hashable key for an argument; equal keys mean interchangeable arguments."""
    kind = type(value)
    if kind is _Node or kind is str or value is None:
        return value
    if kind in _LISTS:
        return (kind.__name__, tuple([_freeze(v) for v in value]))
    if kind is int or kind is bool:
        return (kind, value)
    if kind is float:
        return (float, value, math.copysign(1.0, value))
    if kind is dict or isinstance(value, dict):
        return ("dict", tuple((k, _freeze(v)) for k, v in sorted(value.items())))
    if isinstance(value, (list, tuple)):   # subclasses (e.g. immutable_list, torch.Size)
        return (type(value).__name__, tuple([_freeze(v) for v in value]))
    if isinstance(value, _SYM):
        return ("sym", id(value))
    return value
