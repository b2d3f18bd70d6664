"""Small graph queries shared by the partitioners."""

from __future__ import annotations

import dataclasses

import torch
import torch.fx

from ..ir import Decision, Role


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


def aliases_input(node: torch.fx.Node) -> bool:
    """True for a graph input or a chain of view ops of one (its storage is live anyway)."""
    from .rules import is_view

    while node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and is_view(node.target):
        node = node.args[0]
    return node.op == "placeholder"


def is_random(node: torch.fx.Node) -> bool:
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags
