"""A scalar scattered into a constant tensor, rewritten as a pointwise select (for fusing compilers).

Note [Pointwise scatter]
------------------------
The backward of a cross-entropy loss, decomposed as Inductor expects (``nll_loss_backward``),
builds the one-hot gradient of the log-probabilities as ``scatter(full(shape, 0), dim, index, -1)``:
two buffers of the logits' size, the zeros and the scattered copy, live at once next to the
saved log-probabilities: at the loss, where a language model's step peaks. The same values are
``where(index == iota(shape[dim]), -1, 0)``, a pointwise op a fusing compiler inlines into its
consumer, so neither buffer exists. torch.compile's default pipeline does this rewrite on its
joint graph; jointgraph hands Inductor already partitioned graphs, so it does it here, before
planning, and the planner and the simulator see the graph that runs.

Which scatters: ``aten.scatter.value`` of a Python scalar into an ``aten.full`` (strided layout),
with an index whose size is 1 along ``dim`` and equal to the full tensor's elsewhere (each row
receives exactly one value), traced while the backward was (Note [Phases]). The last condition
keeps eager's error for an out-of-range index where user code scatters: a backward formula's
index was read by its forward op (``nll_loss`` checks its targets), a user's is not.
"""

from __future__ import annotations

import torch
import torch.fx
from torch._guards import detect_fake_mode
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..ir.graph_utils import call

aten = torch.ops.aten


def pointwise_scatter(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Replace ``scatter(full(shape, fill), dim, index, value)`` by ``where(index == iota, value, fill)``.

    Expects: a functional joint graph with ``meta["val"]`` on every node. Guarantees: the same
    values, dtype and strides for every rewritten scatter (Note [Pointwise scatter]); a ``full``
    left without users is removed.
    """
    graph = gm.graph
    changed = False
    for node in list(graph.nodes):
        dim = _rewritable_dim(node)
        if dim is not None:
            changed |= _rewrite(graph, node, dim)
    if changed:
        graph.eliminate_dead_code()
        gm.recompile()
    return gm


def _rewritable_dim(node: torch.fx.Node) -> int | None:
    """The scatter's dimension (non-negative) if Note [Pointwise scatter] rewrites it, else None."""
    if node.op != "call_function" or node.target is not aten.scatter.value or node.meta.get("phase") != "backward":
        return None
    base, dim, index, value = node.args
    if not (isinstance(base, torch.fx.Node) and base.op == "call_function" and base.target is aten.full.default
            and isinstance(index, torch.fx.Node) and isinstance(value, (int, float, bool))):
        return None
    fill = base.args[1]
    if base.kwargs.get("layout", torch.strided) is not torch.strided or not isinstance(fill, (int, float, bool)):
        return None
    out, index_val = node.meta.get("val"), index.meta.get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(index_val, torch.Tensor) or index_val.dim() != out.dim():
        return None
    dim = dim % out.dim()
    if all(statically_known_true(index_val.shape[d] == (1 if d == dim else out.shape[d])) for d in range(out.dim())):
        return dim
    return None


# Where a new node came from (phase, source line): the scatter's.
_COPIED_META = ("phase", "stack_trace", "nn_module_stack", "source_fn_stack")


def _rewrite(graph: torch.fx.Graph, scatter: torch.fx.Node, dim: int) -> bool:
    """Insert the select before ``scatter`` and use it instead; False (and no new node) if its
    strides would differ."""
    base, _, index, value = scatter.args
    out = scatter.meta["val"]
    length = base.args[0][dim]   # an int, or the node of a symbolic size
    shape = [1] * out.dim()
    shape[dim] = length
    meta = {key: scatter.meta[key] for key in _COPIED_META if key in scatter.meta}
    like = {"dtype": out.dtype, "device": out.device}
    with graph.inserting_before(scatter), detect_fake_mode([out]):   # the scalars' values are fakes too
        iota = call(graph, torch.ops.prims.iota.default, (length,),
                    {"start": 0, "step": 1, "dtype": torch.int64, "device": out.device, "requires_grad": False}, **meta)
        row = call(graph, aten.view.default, (iota, shape), **meta)
        mask = call(graph, aten.eq.Tensor, (index, row), **meta)
        chosen = call(graph, aten.scalar_tensor.default, (value,), like, **meta)
        fill = call(graph, aten.scalar_tensor.default, (base.args[1],), like, **meta)
        select = call(graph, aten.where.self, (mask, chosen, fill), **meta)
    result = select.meta["val"]
    if result.shape != out.shape or result.stride() != out.stride() or result.dtype != out.dtype:
        for node in (select, fill, chosen, mask, row, iota):
            graph.erase_node(node)
        return False
    scatter.replace_all_uses_with(select)
    graph.erase_node(scatter)
    return True
