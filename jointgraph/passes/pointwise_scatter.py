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
        if _rewritable(node):
            changed |= _rewrite(graph, node)
    if changed:
        graph.eliminate_dead_code()
        gm.recompile()
    return gm


def _rewritable(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target is not aten.scatter.value or node.meta.get("phase") != "backward":
        return False
    base, dim, index, value = node.args
    if not (isinstance(base, torch.fx.Node) and base.op == "call_function" and base.target is aten.full.default
            and isinstance(index, torch.fx.Node) and isinstance(value, (int, float, bool))):
        return False
    fill = base.args[1]
    if base.kwargs.get("layout", torch.strided) is not torch.strided or not isinstance(fill, (int, float, bool)):
        return False
    out, index_val = node.meta.get("val"), index.meta.get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(index_val, torch.Tensor) or index_val.dim() != out.dim():
        return False
    dim = dim % out.dim()
    return all(statically_known_true(index_val.shape[d] == (1 if d == dim else out.shape[d])) for d in range(out.dim()))


def _rewrite(graph: torch.fx.Graph, scatter: torch.fx.Node) -> bool:
    """Insert the select before ``scatter`` and use it instead; False if its strides would differ."""
    base, dim, index, value = scatter.args
    out = scatter.meta["val"]
    dim = dim % out.dim()
    fake_mode = detect_fake_mode([out])
    length = base.args[0][dim]   # an int, or the node of a symbolic size
    shape = [1] * out.dim()
    shape[dim] = length
    steps = [
        (torch.ops.prims.iota.default, (length,),
         {"start": 0, "step": 1, "dtype": torch.int64, "device": out.device, "requires_grad": False}),
        (aten.view.default, (_PREVIOUS, shape), {}),
        (aten.eq.Tensor, (index, _PREVIOUS), {}),
        (aten.scalar_tensor.default, (value,), {"dtype": out.dtype, "device": out.device}),
        (aten.scalar_tensor.default, (base.args[1],), {"dtype": out.dtype, "device": out.device}),
    ]
    with fake_mode:
        vals = _run(steps)
        mask, chosen, fill = vals[2], vals[3], vals[4]
        result = aten.where.self(mask, chosen, fill)
    if result.shape != out.shape or result.stride() != out.stride() or result.dtype != out.dtype:
        return False
    with graph.inserting_before(scatter):
        nodes = _insert(graph, steps, vals, scatter.meta)
        select = graph.call_function(aten.where.self, (nodes[2], nodes[3], nodes[4]))
        _stamp(select, result, scatter.meta)
    scatter.replace_all_uses_with(select)
    graph.erase_node(scatter)
    return True


_PREVIOUS = object()   # in a step's arguments: the previous step's value


def _run(steps: list) -> list:
    """Run ``steps`` (op, args, kwargs) on the fake values of the nodes they name."""
    vals: list = []
    for target, args, kwargs in steps:
        args = tuple(vals[-1] if a is _PREVIOUS else a for a in args)
        vals.append(target(*torch.fx.node.map_arg(args, lambda n: n.meta["val"]), **kwargs))
    return vals


def _insert(graph: torch.fx.Graph, steps: list, vals: list, meta: dict) -> list[torch.fx.Node]:
    nodes: list[torch.fx.Node] = []
    for (target, args, kwargs), val in zip(steps, vals, strict=True):
        node = graph.call_function(target, tuple(nodes[-1] if a is _PREVIOUS else a for a in args), kwargs)
        _stamp(node, val, meta)
        nodes.append(node)
    return nodes


def _stamp(node: torch.fx.Node, val, meta: dict) -> None:
    """The new node's value, and where it came from (phase, source line) as the scatter's."""
    node.meta["val"] = val
    for key in ("phase", "stack_trace", "nn_module_stack", "source_fn_stack"):
        if key in meta:
            node.meta[key] = meta[key]
