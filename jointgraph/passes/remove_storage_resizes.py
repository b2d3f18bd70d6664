"""Remove storage-resize calls from the joint graph; the runtime epilogue applies them."""

from __future__ import annotations

import torch
import torch.fx

from ..errors import UnsupportedError


def _resize_ops() -> tuple:
    inductor = getattr(torch.ops, "inductor", None)
    op = getattr(inductor, "resize_storage_bytes_", None) if inductor is not None else None
    return (op.default,) if op is not None else ()


def remove_storage_resizes(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Erase ``inductor.resize_storage_bytes_`` nodes.

    Expects: a joint graph whose capture recorded each input's final storage size
    (Note [Storage resize] in capture/metadata.py); the resize nodes have no users.
    Guarantees: a functional graph: a resize up / copy_ / resize down sequence
    leaves only the functional copy, and a net resize is applied by the epilogue.
    No op left in the graph writes in place into a resized input: its storage is
    still the caller's (possibly 0 bytes) while the graph runs, so such a write is
    refused (``UnsupportedError``) rather than reaching a kernel (Note [fsdp.copy_]).
    """
    ops = _resize_ops()
    if not ops:
        return gm
    resized = set()
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in ops and not node.users:
            resized.add(node.args[0])
            gm.graph.erase_node(node)
    if resized:
        _refuse_writes_into(gm.graph, resized)
        gm.recompile()
    return gm


def _refuse_writes_into(graph: torch.fx.Graph, resized: set) -> None:
    for node in graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None or not schema.is_mutable:
            continue
        for arg, value in zip(schema.arguments, node.args, strict=False):
            if arg.alias_info is not None and arg.alias_info.is_write and value in resized:
                raise UnsupportedError(
                    f"{node.target} writes in place into an input whose storage the function resizes; "
                    "functionalization did not turn the write into a new value, so it would run on the "
                    "caller's storage before the resize", hint='write with copy_() under torch.no_grad(), '
                    'or pass on_unsupported="eager"')
