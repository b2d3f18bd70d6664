"""Ints for sizes that may be symbolic: a backed symbol's hint, and the hint policy for unbacked
(data-dependent) ones (Note [Unbacked sizes] in capture/unbacked.py)."""

from __future__ import annotations

import sympy
import torch
from torch.utils._sympy.numbers import int_oo

UNBACKED_FALLBACK = 8192   # the size assumed for an unbacked symbol with no useful upper bound
# An upper bound at or past this is no bound (``sys.maxsize - 1`` is the tracer's default for a size):
# no tensor dimension reaches it, and products of such bounds would overflow the planners' int64.
_NO_BOUND = 2 ** 40


def size_hint(size) -> int:
    """An int for a size that may be symbolic: its hint when it has one; otherwise each unbacked
    symbol at its upper bound when the ShapeEnv knows one (below 2**40), else UNBACKED_FALLBACK."""
    if not isinstance(size, torch.SymInt):
        return int(size)
    node = size.node
    if node.has_hint():
        return int(node.hint)
    shape_env = node.shape_env
    expr = sympy.sympify(shape_env.replace(node.expr))
    backed = shape_env.backed_var_to_val if hasattr(shape_env, "backed_var_to_val") else shape_env.var_to_val
    values = {s: backed[s] if s in backed else _unbacked_estimate(shape_env, s) for s in expr.free_symbols}
    value = sympy.sympify(expr.xreplace(values))
    return max(int(value), 0) if value.is_number and value.is_finite else UNBACKED_FALLBACK


def _unbacked_estimate(shape_env, symbol) -> int:
    """The symbol's finite upper bound, else UNBACKED_FALLBACK."""
    upper = getattr(shape_env.var_to_range.get(symbol), "upper", None)
    if upper is None or upper in (sympy.oo, int_oo) or not getattr(upper, "is_number", False) \
            or int(upper) >= _NO_BOUND:
        return UNBACKED_FALLBACK
    return max(int(upper), 0)


def is_estimate(value) -> bool:
    """``value`` (a size, or a fake tensor's shape) has a size with no hint: ``size_hint`` applies
    the unbacked policy to it."""
    if isinstance(value, torch.Tensor):
        return any(is_estimate(s) for s in value.shape)
    return isinstance(value, torch.SymInt) and not value.node.has_hint()


def binds_symbols(node) -> bool:
    """The fx node creates unbacked symbols (``meta["unbacked_bindings"]``): re-running it to
    recompute its value would give new ones, so it is never recomputed (Note [Unbacked sizes])."""
    return bool(node.meta.get("unbacked_bindings"))


def extent(size, stride, offset) -> int:
    """Storage elements a geometry reaches, from the storage's start (for a non-empty geometry)."""
    return offset + sum((n - 1) * st for n, st in zip(size, stride, strict=True)) + 1
