"""Which saved values a lossy codec (bf16, fp8) may store: the backward's comparisons.

Note [Compared saved values]
----------------------------
Some backward formulas compare a saved value instead of computing with it: ``amax``'s
backward builds its mask with ``eq(amax_out, x)``, relu's ``threshold_backward`` tests
``out <= 0``, ``hardtanh_backward`` tests ``-1 < x < 1``. Rounding either operand
breaks the comparison: a bf16 ``amax`` equals no fp32 element, the mask is all false
and the gradient is 0/0 = NaN. So, per saved value, the backward's needs are found by
typed analysis of the joint graph, walking the backward nodes from the outputs up:

- a backward op that turns a floating input into a bool or integer output (a
  comparison, ``argmax``, a cast to int) needs that input EXACT, or only its SIGN when
  it compares against the scalar 0 (``gt(x, 0)``);
- ops that compare inside a floating output are listed in ``_RULES`` (``threshold_backward``,
  ``sgn``, ...), one rule per op and argument;
- any other floating op passes its own need on to its floating inputs (``eq(view(amax), x)``
  needs ``amax`` exact through the view).

``SavedTensorPolicy.codec_for`` then stores an EXACT value uncompressed (offload, which is
exact, is still allowed) and a SIGN value uncompressed unless the codec keeps every sign
and zero: fp8 packing stores a value too small for e4m3fn as its smallest one with the same
sign (hooks/ops.py), bf16 from fp32 has fp32's exponent range (only fp32 denormals below
2^-133 round to zero); bf16 from fp64 does not. Values compared only in the forward are not
affected: the forward sees exact values.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable

import torch
import torch.fx

from ..ir.graph_utils import backward_nodes

aten = torch.ops.aten


class Exactness(enum.IntEnum):
    """What the backward needs of a saved value's bits."""

    ANY = 0     # rounding is fine
    SIGN = 1    # its sign and zero-ness (relu's mask)
    EXACT = 2   # every bit (amax's mask compares it with another value)


@dataclasses.dataclass(frozen=True)
class Need:
    exactness: Exactness
    because: str   # the backward op that compares it, for the user


Rule = Callable[[torch.fx.Node, int], "Exactness | None"]   # (consumer, argument position) -> need, None: default


def _against_scalar(scalar_position: int, compared: int = 0) -> Rule:
    """The op compares argument ``compared`` with the scalar at ``scalar_position``."""
    def rule(node: torch.fx.Node, position: int) -> Exactness | None:
        if position != compared:
            return None
        return Exactness.SIGN if node.args[scalar_position] == 0 else Exactness.EXACT
    return rule


def _argument(position_compared: int, need: Exactness) -> Rule:
    return lambda node, position: need if position == position_compared else None


_VALUE_FREE = frozenset({aten.zeros_like.default, aten.ones_like.default, aten.empty_like.default,
                         aten.full_like.default, aten.new_zeros.default, aten.new_ones.default,
                         aten.new_empty.default, aten.new_full.default, aten.sym_size.int, aten.sym_numel.default,
                         aten.sym_stride.int, aten.sym_storage_offset.default})

_RULES: dict[torch._ops.OpOverload, Rule] = {
    **{op: _against_scalar(1) for op in (aten.eq.Scalar, aten.ne.Scalar, aten.lt.Scalar, aten.le.Scalar,
                                         aten.gt.Scalar, aten.ge.Scalar)},
    aten.sgn.default: _argument(0, Exactness.SIGN),
    aten.sign.default: _argument(0, Exactness.SIGN),
    aten.signbit.default: _argument(0, Exactness.SIGN),
    aten.threshold_backward.default: _against_scalar(2, compared=1),        # relu: out <= threshold
    aten.leaky_relu_backward.default: _argument(1, Exactness.SIGN),         # self > 0
    aten.elu_backward.default: _argument(5, Exactness.SIGN),                # self_or_result <= 0
    aten.hardtanh_backward.default: _argument(1, Exactness.EXACT),          # min_val < self < max_val
    aten.softplus_backward.default: _argument(1, Exactness.EXACT),          # self * beta > threshold
    aten.hardswish_backward.default: _argument(1, Exactness.EXACT),         # -3 < self < 3
    aten.hardsigmoid_backward.default: _argument(1, Exactness.EXACT),
}
_RULES.update({op: (lambda node, position: None) for op in _VALUE_FREE})   # reads no values


def saved_value_needs(graph: torch.fx.Graph) -> dict[torch.fx.Node, Need]:
    """Per node the backward compares (directly or through floating ops), what it needs of its bits.

    Expects a joint graph with ``meta["val"]`` and phases; nodes not in the result need ANY.
    """
    backward = backward_nodes(graph)
    needs: dict[torch.fx.Node, Need] = {}
    for node in reversed(graph.nodes):
        if node in backward:
            _propagate(node, needs)
    return needs


def _propagate(node: torch.fx.Node, needs: dict) -> None:
    """Pass ``node``'s need (and its own comparisons) on to its floating inputs."""
    if node.op != "call_function":
        return
    rule = _RULES.get(node.target)
    own = needs.get(node)
    discrete = _has_discrete_output(node)
    arguments = [(position, a) for position, arg in enumerate(node.args)
                 for a in (arg if isinstance(arg, (list, tuple)) else (arg,))]
    arguments += [(None, a) for a in node.kwargs.values() if isinstance(a, torch.fx.Node)]
    for position, arg in arguments:
        if not isinstance(arg, torch.fx.Node) or not _is_floating(arg):
            continue
        need = rule(node, position) if rule is not None else None
        if need is None and rule is None and discrete:
            need = Exactness.EXACT
        found = Need(need, str(node.target)) if need else None
        if node.target not in _VALUE_FREE and own is not None and (found is None or own.exactness > found.exactness):
            found = own
        previous = needs.get(arg)
        if found is not None and (previous is None or found.exactness > previous.exactness):
            needs[arg] = found


def _is_floating(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and (val.is_floating_point() or val.is_complex())


def _has_discrete_output(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    vals = val if isinstance(val, (tuple, list)) else (val,)
    return any(isinstance(v, torch.Tensor) and not (v.is_floating_point() or v.is_complex()) for v in vals)
