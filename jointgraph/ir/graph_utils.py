"""Small graph queries shared by the partitioners."""

from __future__ import annotations

import dataclasses
import functools
import math
import operator

import torch
import torch.fx

from .graph import _COLLECTIVE_NAMESPACES
from .roles import Decision, Role
from .sizes import size_hint


@dataclasses.dataclass(frozen=True)
class SavedChoice:
    """A joint-graph node whose value the backward receives, and why."""

    node: torch.fx.Node
    decision: Decision
    reason: str
    # How the saved value is stored (passes/saved_codecs.py): "bf16" / "fp8" (Decision.COMPRESS),
    # "offload" (Decision.OFFLOAD), or a user-hook key (jointgraph.hooks); None: stored as is.
    codec: str | None = None


def ancestors(roots, stop=frozenset()) -> set[torch.fx.Node]:
    """All nodes reachable backwards from ``roots``, the roots included; the walk does not go
    past a node in ``stop`` (which is included when reached)."""
    seen: set[torch.fx.Node] = set()
    stack = [r for r in roots if isinstance(r, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node not in stop:
            stack.extend(node.all_input_nodes)
    return seen


def unsaved_inputs(reached: set, stop: set) -> list[torch.fx.Node]:
    """Graph inputs (not tangents) a backward walk reached without their being saved."""
    return [n for n in reached if n.op == "placeholder" and n not in stop and n.meta.get("role") is not Role.TANGENT]


def tangent_dependent(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes whose value depends on a tangent (they can only run in the backward)."""
    dependent: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op == "placeholder":
            if node.meta.get("role") is Role.TANGENT:
                dependent.add(node)
        elif node.op == "call_function" and any(a in dependent for a in node.all_input_nodes):
            dependent.add(node)
    return dependent


def backward_nodes(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """Nodes that run in the backward whatever the plan: tangent-dependent ones and those traced
    while the backward was (Note [Phases])."""
    return tangent_dependent(graph) | {n for n in graph.nodes if n.meta.get("phase") == "backward"}


def is_symbolic_scalar(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))


def checkpoint_policy(node: torch.fx.Node) -> str | None:
    """"recompute" / "save" from a ``meta["recompute"]`` CheckpointPolicy tag, else None.

    See Note [Activation checkpointing] in passes/checkpoint.py.
    """
    policy = node.meta.get("recompute")
    name = getattr(policy, "name", None)
    if name in ("MUST_RECOMPUTE", "PREFER_RECOMPUTE"):
        return "recompute"
    if name in ("MUST_SAVE", "PREFER_SAVE"):
        return "save"
    return None


@functools.cache
def is_view(target: torch._ops.OpOverload) -> bool:
    """The op's output is a view of its first input, per its schema."""
    returns = target._schema.returns
    return bool(returns) and returns[0].alias_info is not None and not returns[0].alias_info.is_write


def shares_storage(target) -> bool:
    """The op's output shares its first input's storage: a view per its schema, or an op that
    shares it without saying so (``aten._unsafe_view``; a collective's ``wait_tensor``, which
    returns the tensor the collective wrote)."""
    return target is torch.ops.aten._unsafe_view.default or _wait_op(target) or (
        isinstance(target, torch._ops.OpOverload) and is_view(target))


def _wait_op(target) -> bool:
    """A collective's ``wait_tensor``."""
    return isinstance(target, torch._ops.OpOverload) and target.namespace in _COLLECTIVE_NAMESPACES \
        and target._opname == "wait_tensor"


def is_pointwise(node: torch.fx.Node) -> bool:
    """An ATen op tagged pointwise (an elementwise kernel a fusing compiler can inline)."""
    target = node.target
    return node.op == "call_function" and isinstance(target, torch._ops.OpOverload) \
        and torch.Tag.pointwise in target.tags


def storage_root(node: torch.fx.Node) -> torch.fx.Node:
    """The node that allocated ``node``'s storage, through chains of storage-sharing ops (the ``getitem``
    of a multi-output view op, ``split`` / ``unbind``, included: fuzz --semantics12 seed 4502068)."""
    while node.op == "call_function" and node.args and isinstance(node.args[0], torch.fx.Node) \
            and _views_of(node.args[0], node):
        node = node.args[0]
    return node


def _views_of(node: torch.fx.Node, user: torch.fx.Node) -> bool:
    """``user`` shares ``node``'s storage by the rule of ``storage_root``."""
    return user.op == "call_function" and bool(user.args) and user.args[0] is node and (
        shares_storage(user.target) or user.target is operator.getitem
        and node.op == "call_function" and shares_storage(node.target))


def users_through_views(node: torch.fx.Node) -> set[torch.fx.Node]:
    """The users of ``node`` and of the views of it (chains of storage-sharing ops, ``storage_root``'s rule)."""
    users, stack, seen = set(), [node], {node}
    while stack:
        for user in stack.pop().users:
            users.add(user)
            if user not in seen and _views_of(user.args[0], user):
                seen.add(user)
                stack.append(user)
    return users


def readers_in(node: torch.fx.Node, region: set) -> list[tuple[torch.fx.Node, bool]]:
    """The users of ``node`` and of its views (``users_through_views``) that lie in ``region`` (the backward), each
    with whether it reads ``node`` through a view taken outside ``region``: in the forward, so eager saved that view,
    a tensor of its own on ``node``'s storage (Note [Which op saved a value] in capture/trace.py)."""
    found, stack, seen = [], [(node, False)], {node}
    while stack:
        current, through = stack.pop()
        for user in current.users:
            if user in region:
                found.append((user, through))
            if user not in seen and _views_of(current, user):
                seen.add(user)
                stack.append((user, through or user not in region))
    return found


def input_index_of(root: torch.fx.Node) -> int | None:
    """The graph input ``root`` (a ``storage_root``) stands for in the user's function: a placeholder's
    own, or the input the trace copied into it (``meta["copy_of_input"]``); None for tangents and others."""
    if root.op == "placeholder":
        return root.meta.get("input_index") if root.meta.get("role") is not Role.TANGENT \
            and isinstance(root.meta.get("val"), torch.Tensor) else None
    return root.meta.get("copy_of_input")


def aliases_input(node: torch.fx.Node) -> bool:
    """True for a graph input or a view of one (its storage is live anyway)."""
    return storage_root(node).op == "placeholder"


def is_multi_output(node: torch.fx.Node) -> bool:
    """The node returns a tuple of values (its ``getitem`` users pick them)."""
    return isinstance(node.meta.get("val"), (tuple, list))


def tensor_bytes(val) -> int:
    """Bytes of a tensor's elements (or of every tensor in a tuple), with size hints."""
    if isinstance(val, torch.Tensor):
        return math.prod(size_hint(s) for s in val.shape) * val.dtype.itemsize
    if isinstance(val, (tuple, list)):
        return sum(tensor_bytes(v) for v in val)
    return 0


def is_random(node: torch.fx.Node) -> bool:
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags



def call(graph: torch.fx.Graph, target, args: tuple, kwargs: dict | None = None, **meta) -> torch.fx.Node:
    """A call node at the graph's insertion point, its fake ``meta["val"]`` computed by running
    ``target`` on the fake values of the nodes in ``args`` (under their fake mode, else the active
    one); ``meta``: more entries of the node's meta."""
    from torch._guards import detect_fake_mode

    kwargs = kwargs or {}
    node = graph.call_function(target, args, kwargs)
    vals = torch.fx.node.map_arg(args, lambda n: n.meta["val"])
    if target is operator.getitem:
        node.meta["val"] = vals[0][vals[1]]
    else:
        with detect_fake_mode([v for v in vals if isinstance(v, torch.Tensor)]):
            node.meta["val"] = target(*vals, **kwargs)
    node.meta.update(meta)
    return node
