"""Expanded inputs written in place: traced as expands of their own memory.

Note [Expanded inputs written in place]
---------------------------------------
An input whose elements share memory through a dimension of stride 0 (``base.expand(3, 4)``)
cannot be written functionally as itself: functionalization gives every element a value of its
own, so a write to ``x[0]`` would not reach ``x[1]``, which is the same memory in eager. The
memory the input covers is a tensor without overlap: the input narrowed to one index along each
stride-0 dimension (its *compact* tensor, a view of the caller's). Such calls run through an inner
compiled function that takes the compact tensor in the input's place and rebuilds the input as
``compact.expand(shape)`` inside, where writes into an expand are applied to what was expanded
(Note [Writes into expanded tensors] in capture/inplace.py): the compact tensor is a mutated input
like any other, written back into the caller's memory by the epilogue, and its gradient flows
into the caller's tensor through the narrow. A returned input is the caller's own object.

The entry is made when tracing on the input itself finds the write (``ExpandedInputWritten``); it
is refused by name, as before, when an expanded input cannot be compacted (other overlaps), and
inside the inner trace when the function changes a rebuilt input's geometry, ``requires_grad`` or
storage (``t_()``, ``requires_grad_()``, ``set_()``), which the caller's tensor would not see.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..capture.context import has_internal_overlap, rebuilt_as_the_callers
from ..capture.inputs import unflattener
from ..errors import UnsupportedError
from .epilogue import RefusedCall


def compact(t: torch.Tensor) -> torch.Tensor:
    """``t`` narrowed to its first index along each dimension of stride 0: the memory it covers."""
    for d, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
        if stride == 0 and size > 1:
            t = t.narrow(d, 0, 1)
    return t


def compactable(t) -> bool:
    """An expanded tensor whose only overlap is its stride-0 dimensions, and no leaf requiring grad (a view made
    one by ``requires_grad_()``): its ``.grad`` holds a gradient per element of the expand, which the gradient of
    its compact tensor would sum (fuzz seed 5400932, through Dynamo)."""
    return isinstance(t, torch.Tensor) and type(t) is torch.Tensor and t.layout == torch.strided \
        and has_internal_overlap(t) and not _behind_an_expanded_leaf(t) \
        and torch._debug_has_internal_overlap(compact(t)) == 0   # 0: no overlap


def _behind_an_expanded_leaf(t: torch.Tensor) -> bool:
    """``t`` requires grad and is an expanded leaf, or a view of one (its history a chain of view nodes ending
    at the accumulator of a leaf whose elements share memory: review of 59c3014, ``x0.unsqueeze(0)``)."""
    if not t.requires_grad:
        return False
    if t.is_leaf:
        return True
    node = t.grad_fn
    for _ in range(64):   # a chain of views, each node one input
        edges = [n for n, _ in node.next_functions if n is not None]
        if len(edges) != 1:
            return False
        node = edges[0]
        variable = getattr(node, "variable", None)   # AccumulateGrad
        if variable is not None:
            return variable.layout == torch.strided and has_internal_overlap(variable)
    return False


def expanded_leaf_refusal(leaves: list) -> UnsupportedError | None:
    """The refusal for an expanded input among ``leaves`` that is a leaf requiring grad, or a view of one (see
    ``compactable``), if any."""
    k = next((k for k, t in enumerate(leaves) if isinstance(t, torch.Tensor) and t.layout == torch.strided
              and has_internal_overlap(t) and _behind_an_expanded_leaf(t)), None)
    if k is None:
        return None
    return UnsupportedError(f"input {k} is an expanded tensor made a leaf that requires grad (requires_grad_() on an "
                            "expand), or a view of one, and an expanded input is written in place: the leaf's .grad "
                            "holds a gradient per element of the expand, which tracing it as an expand of the memory "
                            "it covers would sum",
                            hint="call requires_grad_() on the tensor before expand, pass a .clone(), or pass "
                                 'on_unsupported="eager"')


def expanded_groups(leaves: list) -> tuple[tuple[int, ...], ...]:
    """The positions of the compactable leaves, one group per tensor object (one passed twice is one input)."""
    groups: dict[int, list[int]] = {}
    for k, leaf in enumerate(leaves):
        if compactable(leaf):
            groups.setdefault(id(leaf), []).append(k)
    return tuple(tuple(g) for g in groups.values())


class ExpandedEntry:
    """The entry of calls whose expanded inputs (leaf positions, grouped per tensor object: ``groups``) are
    traced as expands of their compact tensors, through one inner compiled function (Note [Expanded inputs
    written in place])."""

    plans = ()

    def __init__(self, fn: Callable, spec, groups: tuple[tuple[int, ...], ...], make_compiled: Callable,
                 eager: bool = False):
        """``make_compiled`` compiles the inner function refusing what it cannot compile (under
        ``on_unsupported="eager"`` too: run eagerly, the inner function's checks on the rebuilt inputs would
        raise after the function ran); ``eager``: run ``fn`` itself on a refusal, with one warning."""
        self.fn = fn
        self.spec = spec
        self._groups = groups
        self._masked = frozenset(p for g in groups for p in g)
        self._returned: dict[int, int] = {}
        self._inner = make_compiled(_rebuilding(fn, spec, groups, self._returned))
        self._eager = eager
        self._refused = False   # the inner trace refused: the function runs eagerly from then on

    def __call__(self, leaves: list) -> Any:
        leaves = leaves[:self.spec.num_leaves]   # captured tensors are the inner function's to find
        compacts = [compact(leaves[g[0]]) for g in self._groups]
        masked = [None if k in self._masked else leaf for k, leaf in enumerate(leaves)]
        if self._refused:
            args, kwargs = unflattener(self.spec)(leaves)
            return self.fn(*args, **kwargs)
        try:   # a refusal comes before anything ran: at the inner trace, or a per-call check
            result = self._inner(compacts, [tuple(leaves[g[0]].shape) for g in self._groups], masked)
        except UnsupportedError as exc:
            if not self._eager:
                raise
            warnings.warn(f"jointgraph: running {getattr(self.fn, '__name__', self.fn)} eagerly: {exc}", stacklevel=4)
            self._refused = not isinstance(exc, RefusedCall)   # the same inputs' trace would refuse again
            args, kwargs = unflattener(self.spec)(leaves)
            return self.fn(*args, **kwargs)
        if not self._returned:
            return result
        flat, out_spec = pytree.tree_flatten(result)
        for k, position in self._returned.items():
            flat[k] = leaves[position]   # the caller's own tensor, as eager returns it
        return unflattener(out_spec)(flat)


def _rebuilding(fn: Callable, spec, groups: tuple[tuple[int, ...], ...], returned: dict) -> Callable:
    """``fn`` over (compact tensors, their inputs' shapes, the other leaves), each expanded input rebuilt as
    ``compact.expand(shape)`` (once for a tensor passed twice); ``returned`` receives, at trace time, which flat
    outputs are those inputs."""
    positions = tuple(g[0] for g in groups)

    def call(compacts: list, shapes: list, masked: list) -> Any:
        leaves = list(masked)
        rebuilt = {}
        for group, c, shape in zip(groups, compacts, shapes, strict=True):
            x = rebuilt_as_the_callers(lambda c=c, shape=shape: c.expand(shape), c.requires_grad)
            for position in group:
                leaves[position] = x
            rebuilt[id(x)] = group[0]
        before = {p: (leaves[p].shape, leaves[p].stride(), leaves[p].requires_grad) for p in positions}
        args, kwargs = unflattener(spec)(leaves)
        result = fn(*args, **kwargs)
        for p in positions:
            x = leaves[p]
            changed = [what for what, yes in (
                ("its geometry (t_(), unsqueeze_(), ...)", (x.shape, x.stride()) != before[p][:2]),
                ("requires_grad (requires_grad_(), or a write of a value that requires grad)",
                 x.requires_grad != before[p][2]),
                ("its storage (set_(), .data =)", _storage_changed(x))) if yes]
            if changed:
                raise UnsupportedError("an input whose elements share memory (an expanded tensor), written in place, "
                                       f"also has {' and '.join(changed)} changed: not supported (Note [Expanded "
                                       "inputs written in place])",
                                       hint="pass the tensor before expand (or a .clone() of the expanded one), or "
                                            'pass on_unsupported="eager"')
        returned.clear()
        returned.update({k: rebuilt[id(v)] for k, v in enumerate(pytree.tree_leaves(result)) if id(v) in rebuilt})
        return result

    # A cache hit would not trace, and ``returned`` is filled by the trace: never from disk (jointgraph/cache).
    call.__jointgraph_uncacheable__ = "expanded inputs (Note [Expanded inputs written in place]) are found by tracing"
    return call


def _storage_changed(x: torch.Tensor) -> bool:
    elem = getattr(x, "elem", None)
    return elem is not None and torch._functionalize_was_storage_changed(elem)
