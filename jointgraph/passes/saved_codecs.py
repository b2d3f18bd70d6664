"""Store saved values packed: compressed (bf16 / fp8), offloaded to host, or through user hooks."""

from __future__ import annotations

import dataclasses

import torch
import torch.fx

from ..hooks.codecs import Codec, builtin_codec
from ..ir import Decision, Role, SavedValue
from ..ir.graph import output_node
from ..ir.graph_utils import SavedChoice, is_symbolic_scalar, tensor_bytes
from ..split import SplitGraphs


def apply_saved_codecs(graphs: SplitGraphs, choices: list[SavedChoice],
                       codecs: dict[str, Codec] | None = None) -> SplitGraphs:
    """Pack each saved tensor whose choice names a codec; unpack it in the backward.

    Expects: ``graphs`` from ``split(joint, choices)`` with the same ``choices`` (so the
    forward's ``Role.SAVED_TENSOR`` outputs and the backward's ``Role.SAVED_TENSOR``
    placeholders follow the order of the tensor choices). ``choice.codec`` is a built-in
    codec name (``hooks.codecs.BUILTIN_CODECS``) or a key of ``codecs``.
    Guarantees: the pack nodes sit right after the value's last forward use and the
    forward returns the packed tensor(s) in its place (a saved slot may become several:
    fp8 stores the tensor and its scale); the unpack nodes sit right before the first
    backward use; every new node has a fake ``meta["val"]``; ``graphs.saved`` shows the
    stored dtype and bytes (host copies: 0 device bytes).

    Example (fp8)::

        forward:  relu = relu(addmm); mm = mm(relu, w2)
                  pack_fp8 = jointgraph.pack_fp8(relu); q = pack_fp8[0]; scale = pack_fp8[1]
                  return (mm, q, scale)         # was (mm, relu)
        backward: relu = jointgraph.unpack_fp8(q, scale, torch.float32); ...
    """
    tensor_choices = [c for c in choices if not is_symbolic_scalar(c.node)]
    if not any(c.codec for c in tensor_choices) or graphs.backward is None:
        return graphs
    fw, bw = graphs.forward.graph, graphs.backward.graph
    fw_out = output_node(fw)
    fw_values, fw_roles = list(fw_out.args[0]), list(fw_out.meta["roles"])
    saved_at = [i for i, r in enumerate(fw_roles) if r is Role.SAVED_TENSOR]
    bw_phs = [n for n in bw.nodes if n.op == "placeholder" and n.meta.get("role") is Role.SAVED_TENSOR]
    saved_by_name = {s.name: k for k, s in enumerate(graphs.saved)}
    # Positions of the original nodes, computed once (the loop only reads original users).
    fw_position = {n: i for i, n in enumerate(fw.nodes)}.__getitem__
    bw_position = {n: i for i, n in enumerate(bw.nodes)}.__getitem__
    packed_slots: dict[int, list] = {}
    for k, choice in enumerate(tensor_choices):
        if not choice.codec:
            continue
        codec = (codecs or {}).get(choice.codec) or builtin_codec(choice.codec)
        value = fw_values[saved_at[k]]
        with fw.inserting_before(_last_forward_use(value, fw_out, fw_position).next):   # emission order
            packed = codec.pack(fw, [value])
        packed_slots[k] = packed
        ph = bw_phs[k]
        with bw.inserting_before(ph):
            new_phs = [_placeholder_like(bw, ph, p, j) for j, p in enumerate(packed)]
        first_use = min(ph.users, key=bw_position, default=None)
        if first_use is not None:
            with bw.inserting_before(first_use):
                (unpacked,) = codec.unpack(bw, new_phs)
            ph.replace_all_uses_with(unpacked)
        bw.erase_node(ph)
        index = saved_by_name.get(choice.node.name)
        if index is not None:
            graphs.saved[index] = _stored(graphs.saved[index], packed, codec)
    saved_values = []
    for k in range(len(saved_at)):
        saved_values += packed_slots.get(k, [fw_values[saved_at[k]]])
    first, last = saved_at[0], saved_at[-1] + 1
    fw_out.args = (tuple(fw_values[:first] + saved_values + fw_values[last:]),)
    fw_out.meta["roles"] = fw_roles[:first] + [Role.SAVED_TENSOR] * len(saved_values) + fw_roles[last:]
    graphs.num_saved_tensors = len(saved_values)
    graphs.forward.recompile()
    graphs.backward.recompile()
    return graphs


def _last_forward_use(value: torch.fx.Node, out: torch.fx.Node, position) -> torch.fx.Node:
    users = [u for u in value.users if u is not out]
    if users:
        return max(users, key=position)
    if value.op == "placeholder":   # after every placeholder
        return [n for n in value.graph.nodes if n.op == "placeholder"][-1]
    return value


def _placeholder_like(graph: torch.fx.Graph, old: torch.fx.Node, packed: torch.fx.Node, j: int) -> torch.fx.Node:
    ph = graph.placeholder(f"{old.name}_packed_{j}")
    ph.meta.update({k: v for k, v in packed.meta.items() if k in ("val", "offloaded", "tensor_meta")})
    ph.meta["role"] = Role.SAVED_TENSOR
    return ph


def _stored(saved: SavedValue, packed: list, codec: Codec) -> SavedValue:
    vals = [p.meta["val"] for p in packed]
    nbytes = sum(0 if p.meta.get("offloaded") else tensor_bytes(v) for p, v in zip(packed, vals, strict=True))
    if saved.nbytes == 0:    # an input (or a view of one): live anyway
        nbytes = 0
    stored = ", ".join(str(v.dtype).replace("torch.", "") for v in vals)
    where = "host" if codec.decision is Decision.OFFLOAD else "device"
    reason = f"{saved.reason}; stored by {codec.name} as {stored} on the {where} ({saved.nbytes:,} bytes unpacked)"
    return dataclasses.replace(saved, dtype=vals[0].dtype, nbytes=nbytes, reason=reason,
                               decision=codec.decision if codec.decision is not Decision.SAVE else saved.decision)


__all__ = ["apply_saved_codecs"]
