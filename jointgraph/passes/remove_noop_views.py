"""Remove view nodes whose result has their input's exact geometry (``view(copy, [4])`` of a [4] tensor)."""

from __future__ import annotations

import torch
import torch.fx

from ..ir import Role
from ..ir.graph import output_node, placeholders

_VIEWS = (torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default, torch.ops.aten.reshape.default,
          torch.ops.aten.as_strided.default, torch.ops.aten.expand.default)


def _geometry(node) -> tuple | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return None
    geometry = (*val.shape, *val.stride(), val.storage_offset())
    return (val.dtype, geometry) if all(isinstance(v, int) for v in geometry) else None


def remove_noop_views(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Replace a view of a computed value that keeps its size, strides, offset and dtype by the value.

    Functionalization rebuilds a tensor written through a view of itself as a view of the write's
    result (``t1 = t0.view(-1); t1.copy_(x)`` leaves ``t0`` as ``view(copy, [4])``). Returned from the
    step's autograd.Function, such a view counts as one made inside a custom Function, which autograd
    forbids modifying in place, where eager's ``t0`` can be.

    A graph with no backward runs as it is, no autograd.Function: there a returned view is kept, so that it
    stays a sibling of the other views of its base, as eager's (``t0.view(-1), t0.split(1)[1]``: the second is
    no view of the first; fuzz --semantics12 seed 14961020, a call under no_grad through Dynamo, which then
    made the first a leaf and the second required grad with it).

    Expects: a functional joint graph with ``meta["val"]`` on its nodes. Guarantees: the same values;
    views of graph inputs are kept (an output that is an input is the caller's tensor).
    """
    graph = gm.graph
    changed = False
    backward = any(n.meta.get("role") is Role.TANGENT for n in placeholders(graph))
    returned = set() if backward else set(output_node(graph).all_input_nodes)
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _VIEWS or node in returned:
            continue
        source = node.args[0]
        if not isinstance(source, torch.fx.Node) or source.op != "call_function":
            continue
        geometry = _geometry(node)
        if geometry is not None and geometry == _geometry(source):
            node.replace_all_uses_with(source)
            graph.erase_node(node)
            changed = True
    if changed:
        gm.recompile()
    return gm
