"""Per-op recompute rules: may the backward recompute this forward value, and why (not).

One table per concept: ``CHEAP_OPS`` (recomputable beyond what tags say) and
``COMPUTE_HEAVY_OPS`` (never recomputed, but for attention scores). Everything else is decided by ATen tags
and schemas in ``recompute_rule``, in the order of the Notes below.
"""

from __future__ import annotations

import dataclasses
import math
import operator

import torch
import torch.fx

from ..ir.graph import is_collective
from ..ir.graph_utils import aliases_input, is_random, is_symbolic_scalar, is_view, size_hint
from ..ir.sizes import binds_symbols

aten = torch.ops.aten


@dataclasses.dataclass(frozen=True)
class RecomputeRule:
    """Whether a node may be recomputed in the backward, with the reason in the user's terms.
    ``never``: refused whatever recomputing would save (a graph input, a size, a data-dependent,
    random or collective op): the budget planner, which also weighs recomputing what is merely
    costly (Note [Compute-heavy ops are saved]), never overrides it."""

    recomputable: bool
    reason: str
    never: bool = False
    costly: bool = False   # recomputing runs a matrix product: mincut prices it (Note [Recompute allowance])


# Note [Compute-heavy ops are saved]
# ----------------------------------
# Matrix products, convolutions and attention dominate a step's FLOPs; recomputing
# them would repeat most of the forward. Their outputs are saved (or anything that
# needs them downstream is), the way eager autograd does.
COMPUTE_HEAVY_OPS: dict[torch._ops.OpOverloadPacket, str] = {
    aten.mm: "matrix multiply",
    aten.bmm: "batched matrix multiply",
    aten.addmm: "matrix multiply",
    aten.baddbmm: "batched matrix multiply",
    aten.convolution: "convolution",
    aten._scaled_dot_product_flash_attention: "attention",
    aten._scaled_dot_product_flash_attention_for_cpu: "attention",
    aten._scaled_dot_product_efficient_attention: "attention",
    aten._scaled_dot_product_cudnn_attention: "attention",
    aten._flash_attention_forward: "attention",
    aten._efficient_attention_forward: "attention",
}

# Note [Attention scores are recomputed]
# --------------------------------------
# One matrix product is the exception: a batched product of two computed values (neither is a
# graph input or a view of one) whose output is larger than its operands together. That is
# attention's ``q @ k.T``: (batch·heads, seq, seq) from two (batch·heads, seq, head_dim) operands,
# quadratic in the sequence. The backward usually keeps q and k anyway (the product's own gradients
# read them), so recomputing the scores, and the softmax after them, trades 2·head_dim FLOPs per
# element for not keeping a seq×seq tensor per layer, as FlashAttention does. Those FLOPs, and the
# softmax pass that follows, are real time under either graph compiler: mincut admits the
# recomputation only within its time allowance (Note [Recompute allowance] in mincut.py). A product with a
# weight operand (a layer's projection, an expert's matrix) stays saved: recomputing it repeats
# the layer's FLOPs and frees nothing its inputs do not already hold.
EXPANDING_PRODUCTS = (aten.bmm, aten.baddbmm)

# Note [Cheap ops are recomputed]
# -------------------------------
# Pointwise ops (``torch.Tag.pointwise``) and views read their input once and write
# their output once: recomputing them is memory-bound and cheap, and min-cut decides
# whether saving an input beats saving the output. The ops below are equally cheap
# but carry no pointwise tag: row-wise normalizations whose backward needs the
# forward statistics, copies, gathers and tensor factories.
CHEAP_OPS: dict[torch._ops.OpOverloadPacket, str] = {
    aten.native_layer_norm: "normalization (memory-bound)",
    aten._softmax: "softmax (memory-bound)",
    aten._log_softmax: "log-softmax (memory-bound)",
    aten._unsafe_view: "view (reshape of a fresh tensor)",
    aten.clone: "copy",
    aten._to_copy: "dtype/device copy",
    aten.cat: "concatenation",
    aten.embedding: "gather",
    aten.index_select: "gather",
    aten.full: "tensor factory",
    aten.zeros: "tensor factory",
    aten.ones: "tensor factory",
    aten.scalar_tensor: "tensor factory",
    aten.arange: "tensor factory",
}

# Note [Reductions that shrink are saved]
# ---------------------------------------
# A reduction whose output is much smaller than its input (``sum``/``mean``/``amax``
# over a large dimension) is saved: recomputing it would keep the large input alive
# or recompute it, both worse than storing the small result. A reduction that
# shrinks by less than ``REDUCTION_RATIO`` is treated like a pointwise op.
REDUCTION_RATIO = 4

# Note [Random ops are not recomputed]
# ------------------------------------
# An op tagged ``nondeterministic_seeded`` (dropout, rand_like, bernoulli) would draw
# fresh randomness if recomputed, silently changing the gradients. Inside checkpoint
# regions the recomputation replays the forward's RNG state (Note [Activation
# checkpointing] in passes/checkpoint.py); the partitioners themselves never choose
# to recompute a random op: its value (often a small mask) is saved.

# Note [Data-dependent ops are not recomputed]
# --------------------------------------------
# A node that binds an unbacked symbol (``nonzero``, ``masked_select``, ``.item()``) is saved:
# its sizes reach the backward as saved values, never by running the op again.

# Note [Unknown ops are saved]
# ----------------------------
# An op no rule above covers is not recomputed: saving is always correct, while
# recomputing an op of unknown cost could repeat an expensive kernel.


def recompute_rule(node: torch.fx.Node) -> RecomputeRule:
    """The recompute rule for a forward call node (see the Notes in this module)."""
    if node.op != "call_function":
        return RecomputeRule(False, "graph input, already live", never=True)
    target = node.target
    if target is operator.getitem:   # free, unless it is a size: never for the budget planner then
        return RecomputeRule(True, "tuple element (free)", never=is_symbolic_scalar(node) or binds_symbols(node))
    if is_symbolic_scalar(node):
        return RecomputeRule(False, "sizes are computed in the forward", never=True)
    if binds_symbols(node):
        return RecomputeRule(False, "data-dependent size: recomputing would run the op again "
                                    "(Note [Unbacked sizes] in capture/unbacked.py)", never=True)
    if is_random(node):
        return RecomputeRule(False, "random op: recomputing would draw fresh randomness", never=True)
    if is_collective(node):
        return RecomputeRule(False, "collective: recomputing would communicate again (Note [Collectives])",
                             never=True)
    if not isinstance(target, torch._ops.OpOverload):
        return RecomputeRule(False, f"no recompute rule for {target}")
    packet = target.overloadpacket
    if packet in EXPANDING_PRODUCTS and _expands(node):
        return RecomputeRule(True, "attention scores: a batched product larger than its operands, "
                                   "recomputed from them (Note [Attention scores are recomputed])", costly=True)
    if packet in COMPUTE_HEAVY_OPS:
        return RecomputeRule(False, f"{packet.__name__} ({COMPUTE_HEAVY_OPS[packet]}) is not recomputable")
    if packet in CHEAP_OPS:
        return RecomputeRule(True, CHEAP_OPS[packet])
    if is_view(target):
        return RecomputeRule(True, "view")
    tags = target.tags
    if torch.Tag.pointwise in tags:
        return RecomputeRule(True, "pointwise")
    if torch.Tag.reduction in tags:
        if _shrink(node) >= REDUCTION_RATIO:
            return RecomputeRule(False, f"{packet.__name__} reduces its input {_shrink(node):.0f}x")
        return RecomputeRule(True, "reduction over a small dimension")
    return RecomputeRule(False, f"no recompute rule for {packet.__name__}")


def _expands(node: torch.fx.Node) -> bool:
    """A product of two computed values whose output has more elements than both together."""
    operands = [a for a in node.args[-2:] if isinstance(a, torch.fx.Node)]
    vals = [a.meta.get("val") for a in operands]
    out = node.meta.get("val")
    if len(operands) != 2 or any(aliases_input(a) for a in operands) \
            or not all(isinstance(v, torch.Tensor) for v in (*vals, out)):
        return False
    return _numel(out) > sum(_numel(v) for v in vals)


def _shrink(node: torch.fx.Node) -> float:
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node):
        return 1.0
    inp, out = source.meta.get("val"), node.meta.get("val")
    if not isinstance(inp, torch.Tensor) or not isinstance(out, torch.Tensor):
        return 1.0
    return _numel(inp) / max(_numel(out), 1)


def _numel(t: torch.Tensor) -> int:
    return math.prod(size_hint(s) for s in t.shape)
