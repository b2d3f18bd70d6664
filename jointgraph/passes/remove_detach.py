"""Remove ``aten.detach`` / ``aten.alias`` nodes that autograd left in the joint graph."""

from __future__ import annotations

import torch
import torch.fx

_NO_OPS = (torch.ops.aten.detach.default, torch.ops.aten.alias.default)


def remove_detach(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Replace every detach/alias node by its input.

    Expects: the joint graph, which runs under ``no_grad`` inside the autograd.Function
    (or forward-only with nothing requiring grad), so detach has no effect there.
    Guarantees: same values; fewer nodes; saved values are the real producers.
    """
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in _NO_OPS:
            source = node.args[0]
            node.replace_all_uses_with(source)
            graph.erase_node(node)
    gm.recompile()
    return gm
