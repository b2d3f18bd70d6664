"""Which graph nodes must run even when nothing reads their result.

Note [Ops that check values]
----------------------------
An index op raises in eager when an index is out of range (``x.index_select(0, i)``,
``x[i]``, ``gather``, ``embedding``), even when the user never reads the result. The
fake tensors the graph is traced with hold no values, so the check cannot happen at trace
time; it happens when the op runs. Dead-code elimination keeps these ops, and the split
puts a forward one without users into the forward graph, as it does with other checks.

The same holds for matrix products of two dtypes (``a @ t`` with ``t`` from an autocast
region): eager's CPU kernels raise, the fake kernels do not, so such a node is kept too.
"""

from __future__ import annotations

import torch
import torch.fx

from .graph import is_collective

_aten = torch.ops.aten

# Functional ops whose kernels check index values (the in-place forms are functionalized away).
_VALUE_CHECKS = frozenset({
    _aten.index_select.default, _aten.index.Tensor, _aten.gather.default, _aten.take.default,
    _aten.embedding.default, _aten.scatter.src, _aten.scatter.value, _aten.scatter.reduce,
    _aten.scatter.value_reduce, _aten.scatter_add.default, _aten.scatter_reduce.two, _aten.index_put.default,
    _aten.index_add.default, _aten.index_copy.default, _aten.index_fill.int_Scalar, _aten.index_fill.int_Tensor,
    _aten.one_hot.default, _aten.bincount.default, _aten.multinomial.default,
})


# Products whose kernels require one dtype, which their fake kernels do not check.
_DTYPE_CHECKS = frozenset({
    _aten.mm.default, _aten.bmm.default, _aten.mv.default, _aten.dot.default, _aten.vdot.default,
    _aten.addmm.default, _aten.addmv.default, _aten.addbmm.default, _aten.baddbmm.default, _aten.addr.default,
})


def checks_values(node: torch.fx.Node) -> bool:
    """``node`` may raise on the values or dtypes of its inputs (Note [Ops that check values])."""
    if node.op != "call_function":
        return False
    if node.target in _DTYPE_CHECKS:
        dtypes = {a.meta["val"].dtype for a in node.args
                  if isinstance(a, torch.fx.Node) and isinstance(a.meta.get("val"), torch.Tensor)}
        return len(dtypes) > 1
    return node.target in _VALUE_CHECKS


def must_run(node: torch.fx.Node) -> bool:
    """Side effects (``Node.is_impure``), collectives (Note [Collectives]) or value checks: never
    removed for lack of users."""
    return node.is_impure() or is_collective(node) or checks_values(node)
