"""Give factory nodes that leave their dtype to the default the dtype they were traced with."""

from __future__ import annotations

import functools

import torch
import torch.fx


@functools.cache
def _follows_default_dtype(op: torch._ops.OpOverload) -> bool:
    """``op`` makes a tensor from no tensor (``full``, ``zeros``, ``arange``, ``randn``, ...) and takes a
    ``dtype`` keyword: left unset, its dtype is the default dtype when it runs."""
    arguments = op._schema.arguments
    return any(a.name == "dtype" and a.kwarg_only for a in arguments) \
        and not any(str(a.type).startswith("Tensor") for a in arguments)


def pin_factory_dtypes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Set ``dtype`` on every factory node that has none.

    Expects: nodes carry ``meta["val"]`` (a fake tensor) where traced.
    Guarantees: same values under the default dtype the graph was traced with (the guards recompile under
    another); a backward run after ``torch.set_default_dtype`` changed since the call, which may recompute
    a factory node, still computes in the traced dtype (fuzz seed 2501722: ``torch.full(...)`` traced under
    float64, recomputed in float32 by the backward, and ``mm`` refused the mix).
    """
    changed = False
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload) \
                or node.kwargs.get("dtype") is not None or not _follows_default_dtype(node.target):
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            node.kwargs = {**node.kwargs, "dtype": val.dtype}
            changed = True
    if changed:
        gm.recompile()
    return gm
