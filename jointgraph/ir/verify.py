"""Invariant checks between stages (run in tests and debug mode)."""

from __future__ import annotations

import torch
import torch.fx

from .graph import output_node, output_values
from .roles import Role


def verify(graph: torch.fx.Graph) -> None:
    """Check the IR contract: well-formed, functional, every node typed.

    - ``Graph.lint()`` passes;
    - every placeholder has a ``Role`` and every call node a ``meta["val"]``;
    - the output node has one role per returned value;
    - no call node is an in-place or out= ATen overload (the graph is functional),
      except ops explicitly allowed to mutate (none today).
    """
    graph.lint()
    for node in graph.nodes:
        if node.op == "placeholder":
            if not isinstance(node.meta.get("role"), Role):
                raise AssertionError(f"placeholder {node.name} has no Role")
        elif node.op == "call_function":
            if "val" not in node.meta:
                raise AssertionError(f"node {node.name} ({node.target}) has no meta['val']")
            target = node.target
            if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
                raise AssertionError(f"node {node.name} calls mutating op {target}")
    out = output_node(graph)
    roles = out.meta.get("roles")
    if roles is None or len(roles) != len(output_values(graph)):
        raise AssertionError("output node must carry one Role per returned value")
    if not all(isinstance(r, Role) for r in roles):
        raise AssertionError("output roles must be Role values")
