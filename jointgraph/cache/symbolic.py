"""Symbolic sizes in the cache: stable symbol names, the key's symbolic form, guards kept and re-checked.

Note [Cached symbolic sizes]
----------------------------
A ShapeEnv names its symbols by its own counters or hashes (``s26``), which mean nothing in
another process. The cache names each symbol after the first graph input size that
introduced it, in input order (``x0_size1``: input 0's size 1; ``x1_stride0``, ``x2_offset``,
``x3`` for a symbolic scalar input), as the seed's PGO fix names symbols from their source.

* **Key.** Each input's sizes, strides and storage offset are written over these names, so
  the key holds the symbolic form: which sizes are symbolic, which are specialized (0 and 1
  are), which are equal (duck sizing gives them one symbol). An isomorphic call in another
  process writes the same form; a changed structure writes another and misses.
* **Entry.** Every symbolic size in the graphs' values is written over the stable names, and
  so are the guards the trace added to the ShapeEnv (``x0_size0 > 3`` from a Python branch on
  a size, ``Eq(x0_size1, x1_size0)`` from a matmul). A size that no input's size determines (a
  data-dependent size) has no stable name: that entry is not stored.
* **Hit.** The inputs are fake-ified as the cold run did (for ``torch.compile``: Dynamo's own
  fakes), the stable names are read off them again, and each stored guard is evaluated on
  this call's sizes: if one fails, the entry is a miss (recompiled and rewritten). Otherwise
  the guards are added to this ShapeEnv, so the entry's own shape guard (and Dynamo's, which
  reads the same ShapeEnv) is the cold run's.
"""

from __future__ import annotations

import sympy
import torch

from ..capture.context import geometry, static
from .fingerprint import Unhashable

_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)


def is_symbolic(values: list) -> bool:
    """Whether any of the graph inputs ``values`` has a symbolic size or is a symbolic scalar."""
    return any(isinstance(v, _SYM) or (isinstance(v, torch.Tensor) and not static(*geometry(v))) for v in values)


def input_sizes(values: list):
    """(stable name, size) for every size of the graph inputs, in input order."""
    for i, v in enumerate(values):
        if isinstance(v, _SYM):
            yield f"x{i}", v
        elif isinstance(v, torch.Tensor):
            for d, s in enumerate(v.shape):
                yield f"x{i}_size{d}", s
            for d, s in enumerate(v.stride()):
                yield f"x{i}_stride{d}", s
            yield f"x{i}_offset", v.storage_offset()


class StableNames:
    """The stable names of the symbols of ``values``' sizes (Note [Cached symbolic sizes])."""

    def __init__(self, values: list):
        self.symbols: dict[str, sympy.Symbol] = {}   # stable name -> this process's symbol
        self._names: dict[sympy.Symbol, sympy.Symbol] = {}   # this process's symbol -> stable symbol
        for name, size in input_sizes(values):
            if isinstance(size, _SYM):
                for symbol in sorted(size.node.expr.free_symbols, key=str):
                    if symbol not in self._names:
                        self._names[symbol] = sympy.Symbol(name, integer=True)
                        self.symbols[name] = symbol

    def rename(self, expr: sympy.Basic) -> sympy.Basic:
        """``expr`` over stable names; Unhashable when a symbol is not an input's size."""
        missing = expr.free_symbols - self._names.keys()
        if missing:
            raise Unhashable(f"the graph has sizes no input size determines ({', '.join(map(str, missing))}; "
                             "data-dependent sizes are not cached)")
        return expr.xreplace(self._names)

    def local(self, expr: sympy.Basic) -> sympy.Basic:
        """``expr`` over stable names back over this process's symbols (``rename``'s inverse)."""
        return expr.xreplace({s: self.symbols[s.name] for s in expr.free_symbols})

    def form(self, values: list) -> list:
        """The symbolic form of the inputs' sizes, for the key."""
        return [(name, str(self.rename(size.node.expr)) if isinstance(size, _SYM) else size)
                for name, size in input_sizes(values)]


def stable_guards(shape_env, start: int, names: StableNames) -> list:
    """The guards added to ``shape_env`` from index ``start`` on, over stable names."""
    if shape_env is None:
        return []
    if getattr(shape_env, "deferred_runtime_asserts", None) and any(shape_env.deferred_runtime_asserts.values()):
        raise Unhashable("the graph has runtime assertions on data-dependent sizes (not cached)")
    return [names.rename(guard.expr) for guard in shape_env.guards[start:]]


def guards_here(guards: list, names: StableNames, shape_env) -> list | None:
    """The stored ``guards`` over this process's symbols, or None when this call's sizes fail one."""
    exprs = []
    for guard in guards:   # over the key's stable names (``StableNames.form``): a hit has them all
        expr = names.local(guard)
        if expr.xreplace(shape_env.backed_var_to_val) is not sympy.true:
            return None
        exprs.append(expr)
    return exprs


def add_guards(exprs: list, shape_env) -> None:
    """Guard on each of ``exprs`` (all true on this call's sizes), as the cold run's trace did."""
    for expr in exprs:
        bool(shape_env.create_symboolnode(expr))


