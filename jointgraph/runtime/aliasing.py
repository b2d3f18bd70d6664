"""Inputs that share storage, one of them mutated: one synthetic base per storage.

Note [Aliased inputs]
---------------------
Functionalization traces each graph input as its own tensor, so a write through
one input never reaches another input that shares its storage. A compiled entry
therefore checks, only when it mutates inputs, whether its tensor inputs share
storage (``check_no_aliasing``: one ``data_ptr`` per input). If they do, the call
is re-routed: every storage shared by several inputs, one of them mutated, becomes
one graph input, a *synthetic base* covering the whole storage as a contiguous 1-D
tensor (``base_of``); the compiled function rebuilds each caller's view from it
with ``as_strided`` and its real size, stride and storage offset, so a write
through any view lands in the base and every other view sees it, as in eager.
The base is a differentiable view of the views' common autograd root, so
gradients reach the root; inputs that share storage but not an autograd root
(``x`` and ``x.detach()``) can be rebased only when none of them requires grad.
An output that is one of the caller's tensors is returned as the caller's object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..errors import UnsupportedError


class AliasedInputs(UnsupportedError):
    """Inputs share storage and one of them is mutated: this entry cannot run them.

    ``groups`` lists the graph inputs sharing each storage; the caller re-runs the call
    through one synthetic base per group (Note [Aliased inputs]).
    """

    def __init__(self, groups: tuple[tuple[int, ...], ...]):
        self.groups = groups
        super().__init__(f"inputs {', '.join(map(str, groups[0]))} share storage and one of them is mutated "
                         "in place", hint='pass distinct tensors (e.g. .clone()), or on_unsupported="eager"')


def check_no_aliasing(inputs: list, mutated: tuple[int, ...]) -> None:
    by_storage: dict[int, list[int]] = {}
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor):
            key = t.untyped_storage().data_ptr()
            if key != 0:
                by_storage.setdefault(key, []).append(i)
    groups = tuple(tuple(g) for g in by_storage.values() if len(g) > 1 and any(i in mutated for i in g))
    if groups:
        raise AliasedInputs(groups)


def base_of(members: list[torch.Tensor]) -> torch.Tensor | None:
    """A contiguous 1-D tensor over the whole storage ``members`` share, differentiable
    into their common autograd root; None when no such base exists."""
    first = members[0]
    if any(m.dtype != first.dtype or m.device != first.device for m in members):
        return None
    roots = {id(r): r for r in (m if m._base is None else m._base for m in members)}
    numel = first.untyped_storage().nbytes() // first.element_size()
    if len(roots) == 1:
        root = next(iter(roots.values()))
        return root.as_strided((numel,), (1,), 0)
    if any(m.requires_grad for m in members):
        return None
    return first.detach().as_strided((numel,), (1,), 0)


def _views_of_bases(fn: Callable, spec, views: tuple, returned: dict) -> Callable:
    """``fn`` over (bases, other leaves): each view leaf rebuilt from its base. ``returned``
    receives, at trace time, which flat outputs are those rebuilt leaves themselves."""
    def call(bases: list, masked: list) -> Any:
        leaves = list(masked)
        rebuilt = {}
        for position, size, stride, offset, group in views:
            leaves[position] = bases[group].as_strided(size, stride, offset)
            rebuilt[id(leaves[position])] = position
        args, kwargs = pytree.tree_unflatten(leaves, spec)
        result = fn(*args, **kwargs)
        flat = pytree.tree_leaves(result)
        returned.clear()
        returned.update({k: rebuilt[id(v)] for k, v in enumerate(flat) if id(v) in rebuilt})
        return result

    return call


class SyntheticBases:
    """Runs calls whose inputs alias through an inner compiled function over synthetic bases,
    one per alias geometry (Note [Aliased inputs])."""

    def __init__(self, fn: Callable, make_compiled: Callable[[Callable], Callable]):
        self.fn = fn
        self.make_compiled = make_compiled
        self._inner: dict[tuple, tuple[Callable, dict]] = {}

    def __call__(self, leaves: list, spec, positions: tuple[int, ...], aliased: AliasedInputs) -> Any:
        bases, views = [], []
        for group in aliased.groups:
            members = [leaves[positions[i]] for i in group]
            base = base_of(members)
            if base is None:
                raise aliased
            views += [(positions[i], tuple(m.shape), tuple(m.stride()), m.storage_offset(), len(bases))
                      for i, m in zip(group, members, strict=True)]
            bases.append(base)
        key = (tuple(views), spec)
        found = self._inner.get(key)
        if found is None:
            returned: dict[int, int] = {}
            found = self._inner[key] = (self.make_compiled(_views_of_bases(self.fn, spec, tuple(views), returned)),
                                        returned)
        inner, returned = found
        masked = list(leaves)
        for position, *_ in views:
            masked[position] = None
        result = inner(bases, masked)
        if not returned:
            return result
        flat, out_spec = pytree.tree_flatten(result)
        for k, position in returned.items():
            flat[k] = leaves[position]   # the caller's own tensor, as eager returns it
        return pytree.tree_unflatten(flat, out_spec)
