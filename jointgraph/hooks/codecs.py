"""Codecs: how a saved value is stored between the forward and the backward.

A ``Codec`` emits its pack nodes into the forward graph and its unpack nodes into
the backward graph (``passes/saved_codecs.py`` decides where). Built-in codecs are
named by ``SavedChoice.codec``: ``"bf16"``, ``"fp8"``, ``"offload"``, and chains such
as ``"bf16+offload"``. User hooks become one codec per saved value (traced on that
value's fake tensor), keyed ``"hooks:<node name>"``.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._guards import detect_fake_mode

from ..ir import Decision
from ..ir.graph_utils import call
from . import ops as _ops  # noqa: F401  (registers torch.ops.jointgraph.*)

Emit = Callable[[torch.fx.Graph, list], list]


@dataclasses.dataclass(frozen=True)
class Codec:
    """Pack: nodes (in the forward) -> stored nodes; unpack: stored nodes (in the backward) -> value.

    Both emitters insert at the graph's current insertion point and give every node a fake
    ``meta["val"]``; offloaded (host) values carry ``meta["offloaded"] = True``.
    """

    name: str
    decision: Decision
    pack: Emit
    unpack: Emit


def _bf16_pack(graph, nodes):
    return [call(graph, torch.ops.jointgraph.pack_bf16.default, (n,)) for n in nodes]


def _fp8_pack(graph, nodes):
    out = []
    for n in nodes:
        pair = call(graph, torch.ops.jointgraph.pack_fp8.default, (n,))
        out += [call(graph, operator.getitem, (pair, 0)), call(graph, operator.getitem, (pair, 1))]
    return out


def _offload_pack(graph, nodes):
    return [call(graph, torch.ops.jointgraph.offload.default, (n,), offloaded=True) for n in nodes]


def _unpacker(kind: str, like: list):
    """The unpack emitter of one built-in stage; ``like`` are the stage's input fake values."""
    def emit(graph, nodes):
        ops = torch.ops.jointgraph
        if kind == "bf16":
            return [call(graph, ops.unpack_bf16.default, (n, v.dtype)) for n, v in zip(nodes, like, strict=True)]
        if kind == "fp8":
            return [call(graph, torch.ops.jointgraph.unpack_fp8.default, (nodes[2 * i], nodes[2 * i + 1], v.dtype))
                    for i, v in enumerate(like)]
        return [call(graph, ops.reload.default, (n, v.device)) for n, v in zip(nodes, like, strict=True)]
    return emit


_PACKERS = {"bf16": _bf16_pack, "fp8": _fp8_pack, "offload": _offload_pack}
BUILTIN_CODECS = ("bf16", "fp8", "offload", "bf16+offload", "fp8+offload")


def codec_decision(name: str | None) -> Decision:
    """How a value stored through the built-in codec ``name`` reaches the backward (None: as is)."""
    if name is None:
        return Decision.SAVE
    return Decision.OFFLOAD if "offload" in name.split("+") else Decision.COMPRESS


def builtin_codec(name: str) -> Codec:
    """The codec named ``name``: stages joined by ``+``, applied left to right when packing."""
    stages = name.split("+")
    if not stages or any(s not in _PACKERS for s in stages) or name not in BUILTIN_CODECS:
        raise ValueError(f"unknown saved-tensor codec {name!r}; allowed: {', '.join(BUILTIN_CODECS)}")

    inputs_of_stage: list[list] = []

    def pack(graph, nodes):
        inputs_of_stage.clear()
        for stage in stages:
            inputs_of_stage.append([n.meta["val"] for n in nodes])
            nodes = _PACKERS[stage](graph, nodes)
        return nodes

    def unpack(graph, nodes):
        for stage, like in reversed(list(zip(stages, inputs_of_stage, strict=True))):
            nodes = _unpacker(stage, like)(graph, nodes)
        return nodes

    return Codec(name, codec_decision(name), pack, unpack)


# ### User hooks


def inline_graph(graph: torch.fx.Graph, gm: torch.fx.GraphModule, args: list) -> list:
    """Copy ``gm``'s nodes into ``graph`` at its insertion point; return its flat outputs."""
    env = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for ph, arg in zip(placeholders, args, strict=True):
        env[ph] = arg
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            return [env[o] if isinstance(o, torch.fx.Node) else o for o in pytree.tree_leaves(node.args[0])]
        if node.op == "get_attr":
            raise NotImplementedError("hook graphs with constants are not inlined")
        env[node] = graph.node_copy(node, lambda n: env[n])
    raise AssertionError("graph without output")


def trace_hooks(pack_hook: Callable, unpack_hook: Callable, val: torch.Tensor, key: str) -> Codec:
    """Trace ``pack_hook`` on ``val`` and ``unpack_hook`` on what it returned; raise if impossible.

    Non-tensor leaves of the packed value (a dtype, a flag) are trace-time constants.
    """
    from torch.fx.experimental.proxy_tensor import make_fx

    spec_box: list = []

    def flat_pack(x):
        leaves, spec = pytree.tree_flatten(pack_hook(x))
        spec_box[:] = [spec, [not isinstance(leaf, torch.Tensor) for leaf in leaves], leaves]
        return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]

    with detect_fake_mode([val]):
        pack_gm = make_fx(flat_pack, tracing_mode="real")(val)
    spec, constant_mask, leaves = spec_box
    constants = [leaf for leaf, c in zip(leaves, constant_mask, strict=True) if c]
    packed_out = [n for n in pack_gm.graph.nodes if n.op == "output"][0]
    packed_vals = [v.meta["val"] for v in pytree.tree_leaves(packed_out.args[0])]

    def flat_unpack(*tensors):
        it_t, it_c = iter(tensors), iter(constants)
        leaves = [next(it_c) if c else next(it_t) for c in constant_mask]
        return unpack_hook(pytree.tree_unflatten(leaves, spec))

    with detect_fake_mode([val]):
        unpack_gm = make_fx(flat_unpack, tracing_mode="real")(*packed_vals)
    for gm in (pack_gm, unpack_gm):
        for node in gm.graph.nodes:
            if isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable:
                raise ValueError(f"hook mutates a tensor in place ({node.target})")
    out = [n for n in unpack_gm.graph.nodes if n.op == "output"][0]
    result = pytree.tree_leaves(out.args[0])
    if len(result) != 1 or not isinstance(result[0], torch.fx.Node):
        raise ValueError("unpack hook must return one tensor")
    rval = result[0].meta.get("val")
    if not isinstance(rval, torch.Tensor) or rval.shape != val.shape or rval.dtype != val.dtype:
        raise ValueError("unpack(pack(x)) must have x's shape and dtype")

    def pack(graph, nodes):
        return inline_graph(graph, pack_gm, nodes)

    def unpack(graph, nodes):
        return inline_graph(graph, unpack_gm, nodes)

    return Codec(key, Decision.SAVE, pack, unpack)
