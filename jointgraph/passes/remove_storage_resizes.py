"""Remove storage-resize calls from the joint graph; the runtime epilogue applies them."""

from __future__ import annotations

import torch
import torch.fx


def _resize_ops() -> tuple:
    inductor = getattr(torch.ops, "inductor", None)
    op = getattr(inductor, "resize_storage_bytes_", None) if inductor is not None else None
    return (op.default,) if op is not None else ()


def remove_storage_resizes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Erase ``inductor.resize_storage_bytes_`` nodes.

    Expects: a joint graph whose capture recorded each input's final storage size
    (Note [Storage resize] in capture/trace.py); the resize nodes have no users.
    Guarantees: a functional graph: a resize up / copy_ / resize down sequence
    leaves only the functional copy, and a net resize is applied by the epilogue.
    """
    ops = _resize_ops()
    if not ops:
        return gm
    changed = False
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in ops and not node.users:
            gm.graph.erase_node(node)
            changed = True
    if changed:
        gm.recompile()
    return gm
