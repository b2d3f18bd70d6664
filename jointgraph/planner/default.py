"""The "default" partitioner: the forward computes what eager's forward computes.

Forward nodes are the ancestors of the forward outputs (user outputs and new
values of mutated inputs); everything else that the gradients need runs in the
backward. A forward value used by a backward node is saved. Symbolic-size nodes
that do not depend on tangents move to the forward, so that a backward needing
only a tensor's sizes receives the sizes, not the tensor.
"""

from __future__ import annotations

import torch
import torch.fx

from ..ir import Decision, Role
from ..ir.graph import output_node
from ..ir.graph_utils import (
    SavedChoice,
    ancestors,
    checkpoint_policy,
    is_multi_output,
    is_random,
    is_symbolic_scalar,
    tangent_dependent,
)
from ..ir.hook_ops import is_hook_call


def plan_default(graph: torch.fx.Graph) -> list[SavedChoice]:
    """Return the values to save, each with the reason it crosses to the backward."""
    out = output_node(graph)
    roles = out.meta["roles"]
    outputs = list(out.args[0])
    fw_roots = [v for v, r in zip(outputs, roles, strict=True)
                if r in (Role.USER_OUTPUT, Role.MUTATED_INPUT) and isinstance(v, torch.fx.Node)]
    from_tangents = tangent_dependent(graph)
    forward = ancestors(fw_roots)
    forward |= {n for n in graph.nodes if n.op == "placeholder" and n.meta["role"] is not Role.TANGENT}
    # Sizes and forward randomness are computed in the forward (see module docstring).
    extra = [n for n in graph.nodes
             if n.op == "call_function" and n not in from_tangents and n.meta.get("phase") != "backward"
             and (is_symbolic_scalar(n) or is_random(n))]
    forward |= ancestors(extra)
    # A multi-output node is never saved: its (free) getitem users run in the forward instead.
    forward |= {u for n in list(forward) if is_multi_output(n) for u in n.users
                if u.op == "call_function" and u not in from_tangents}
    # Backward nodes count only when a gradient (or a hook that runs) needs them: the joint graph also
    # holds the backward of values no output reaches (fuzz seed 70615: ``t0 = a.sin()`` written, unused).
    grads = [v for v, r in zip(outputs, roles, strict=True) if r in (Role.GRADIENT, Role.BACKWARD_MUTATION)]
    needed = ancestors([*grads, *(n for n in graph.nodes if is_hook_call(n) and not n.users)])
    reasons: dict[torch.fx.Node, str] = {}
    for node in graph.nodes:
        if node not in forward:
            continue
        users = [u for u in node.users if u not in forward and u.op != "output" and u in needed]
        if users:
            reasons[node] = (f"computed in the forward; used by {users[0].name} ({_op_name(users[0])}) "
                             "in the backward")
    saved = _expand_checkpointed(reasons, forward)
    return [SavedChoice(n, Decision.SAVE, saved[n]) for n in graph.nodes if n in saved]


def _expand_checkpointed(reasons: dict, forward: set) -> dict:
    """Replace values a checkpoint region recomputes by the values its recomputation reads.

    Note [Activation checkpointing]: a forward node tagged for recompute is not saved;
    the backward recomputes it from the nearest untagged (or save-tagged) forward values.
    """
    saved: dict = {}
    stack = list(reasons)
    seen: set = set()
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op == "call_function" and checkpoint_policy(node) == "recompute" and not is_random(node) \
                and not any(is_multi_output(a) and checkpoint_policy(a) != "recompute"
                            for a in node.all_input_nodes):
            stack.extend(a for a in node.all_input_nodes if a in forward)
            continue
        saved[node] = reasons.get(node, "read by the recomputation of a checkpointed region")
    return saved


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    return getattr(target, "__name__", str(target)) if node.op == "call_function" else node.op
