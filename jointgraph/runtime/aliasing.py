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
(``x`` and ``x.detach()``) are rebased on a detached base when none of them requires grad: a
write autograd records on one of them gives that input the write's history (taken from the base
after the call), and the other roots are rebuilt detached inside, as eager gives them none.
When those requiring grad share one root (``x[1:]`` and ``x[1:].detach()``, ``x`` requiring grad),
the base is differentiable into that root and the other roots' inputs are rebuilt detached; a
write autograd records on one of those is refused (it would give the root its history).
An output that is one of the caller's tensors is returned as the caller's object; a
tensor passed twice is rebuilt once, so both arguments are one object, as in eager.
What the function does to a view's own metadata (``t_()``, ``unsqueeze_()``,
``as_strided_()``) happens to the rebuilt view inside: it is replayed on the caller's
tensor afterwards from the entry compiled on the aliased inputs (its layout's
``metadata_mutations``; the data was already written through the base in the old
geometry, as in eager). ``requires_grad_()`` on an aliased input is applied to the
caller's tensor afterwards when the call has no differentiable output; otherwise it is
refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..capture.context import AsStridedChainWrite, geometry, rebuilt_as_the_callers, treated_as_inputs
from ..capture.inplace import CREATION, analysis, creation_of, in_place_checks, multi_output_view
from ..capture.inputs import unflattener
from ..capture.leaves import shares_version_counter
from ..capture.metadata import base_written_after
from ..errors import UnsupportedError
from ..ir.sizes import extent
from .epilogue import (
    RefusedCall,
    apply_metadata_mutations,
    data_write_count,
    history_drops_elements,
    lossy_view_refusal,
    made_under_no_grad,
    narrow_data_writes,
)
from .epilogue import autograd_root as _root


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


def base_of(members: list[torch.Tensor], recorded: tuple[bool, ...] = ()) -> torch.Tensor | None:
    """A contiguous 1-D tensor over the whole storage ``members`` share, differentiable
    into their common autograd root (or the one root of those requiring grad, when no write autograd
    records, per member in ``recorded``, is on another root's); None when no such base exists."""
    base = _base_or_why(members, recorded)
    return base if isinstance(base, torch.Tensor) else None


def _base_or_why(members: list[torch.Tensor], recorded: tuple[bool, ...] = ()) -> torch.Tensor | str:
    """``base_of``, or why there is no such base (the refusal's reason)."""
    first = members[0]
    if any(m.dtype != first.dtype or m.device != first.device for m in members):
        return "they differ in dtype or device"
    roots = {id(r): r for r in (_root(m) for m in members)}
    numel = first.untyped_storage().nbytes() // first.element_size()
    if len(roots) == 1:
        root = next(iter(roots.values()))
        if not root.requires_grad and any(m.requires_grad for m in members):
            # a view made a leaf by requires_grad_(): its gradient is its own, not the root's
            return "one is a view made a leaf by requires_grad_(), whose gradient is its own, not their base's"
        if root.requires_grad and not _spans_storage(root, numel):
            return "their autograd base no longer reaches the whole storage (as_strided_() shrank it)"
        return root.as_strided((numel,), (1,), 0)
    if any(m.requires_grad for m in members):
        root = _grad_root(members)
        if root is None:
            return ("those that require grad have no one autograd root requiring grad (a tensor and its detach() "
                    "made a leaf by requires_grad_()): no common storage carries both gradients")
        if any(r and _root(m) is not root for m, r in zip(members, recorded, strict=False)):
            return "a write autograd records is on another autograd root than the one that requires grad"
        if not _spans_storage(root, numel):
            return "their autograd base no longer reaches the whole storage (as_strided_() shrank it)"
        return root.as_strided((numel,), (1,), 0)
    # no autograd view (fuzz seed 1500250: ``base[1:].detach()`` first, ``base.view(-1)`` second): a view over the
    # whole storage of one starting inside it has a backward that cannot place it. It shares the first member's
    # version counter, as the view did (not another root's: fuzz seed 1801900, ``a.set_(b)`` then a write via a)
    return first.detach().as_strided((numel,), (1,), 0).detach()


def _spans_storage(root: torch.Tensor, numel: int) -> bool:
    """``root``'s own geometry reaches its storage's last element: a differentiable view of the whole storage
    taken from it has a backward (fuzz seed 2404028: ``b.as_strided_((2,), (1,))`` on a 6-element ``b``
    shrank it, and the backward of ``b.as_strided((6,), (1,))`` failed to place its gradient)."""
    return root.numel() > 0 and extent(root.shape, root.stride(), root.storage_offset()) >= numel


def _grad_root(members: list[torch.Tensor]) -> torch.Tensor | None:
    """The one autograd root of the members that require grad, if it requires grad itself (fuzz seeds 600065,
    600104: ``base[1:]`` and ``base[1:].detach()``); None for several, or a view made a leaf by requires_grad_()."""
    roots = {id(_root(m)): _root(m) for m in members if m.requires_grad}
    root = next(iter(roots.values())) if len(roots) == 1 else None
    return root if root is not None and root.requires_grad and root.storage_offset() == 0 else None


def _other_roots(group: tuple, members: list, recorded: tuple, base: torch.Tensor) -> frozenset[int]:
    """Members of a group of several autograd roots (``x`` and ``x.detach()``) whose root no write autograd
    records reaches, nor the base's (one requiring grad): eager gives them no history from the others' writes,
    so they are rebuilt detached."""
    roots = [id(_root(m)) for m in members]
    written = {r for i, r in zip(group, roots, strict=True) if i in recorded}
    if base.requires_grad:
        written.add(id(_root(base)))
    if len(set(roots)) == 1 or not written:
        return frozenset()
    return frozenset(i for i, r in zip(group, roots, strict=True) if r not in written)


def _refuse_views_made_leaves(group: tuple, members: list, layout, moving: set) -> None:
    """Refuse a call passing a view taken before ``requires_grad_()`` on its root beside an input it aliases
    that the function writes (Dynamo passes such views between graphs: fuzz seeds 4203628, 4204528). Eager's
    view requires grad but has no history (it is a leaf of its own, with its own ``.grad``) until a write
    moves its root's version; rebuilt from the differentiable base, its gradient went into the root. Only
    where a gradient reaches that view (an output computed from it, or a view of it) and autograd first reads it
    before any write in the group moves the version (none does: writes through ``.data``; ``moving``: the inputs
    whose writes move it): read after one, eager's view has regenerated its history into the root, as the
    rebuilt one has (fuzz seed 14830166, through Dynamo: ``t2 = t0.clone()`` before ``a.detach().clamp_()``).
    Views the caller made under no_grad have no history either, and are rebuilt so (``made_under_no_grad``)."""
    if not torch.is_grad_enabled():
        return
    first_read = dict(layout.writes_before_first_reads)   # input -> those written before autograd first read it
    for i, m in zip(group, members, strict=True):
        moved = any(j in moving for j in first_read[i]) if i in first_read else any(j in moving for j in group)
        if not moved and m._base is not None and m.requires_grad and m._base.requires_grad and _leaf_view(m) \
                and not made_under_no_grad(m) \
                and (_gradient_reaches(layout, i) or _views_requiring_grad(layout, {i})):
            raise RefusedCall(
                f"input {i} is a view taken before requires_grad_() on the tensor it views, which shares its "
                "storage with an input the function writes, and a gradient reaches it: eager's view is a leaf of "
                "its own (no history), which the views rebuilt from their common storage cannot follow",
                hint="take the view after requires_grad_(), pass a .clone(), or pass on_unsupported=\"eager\"")


def _refuse_views_made_in_modes(group: tuple, members: list, written: set, layout) -> None:
    """Refuse a call passing a view made under inference_mode beside an input of its storage that the function
    writes before autograd reads the view, or one made under no_grad beside such an input that does not share its
    version counter (``leaf.data``): eager's write leaves that view's version as it was, so reading it after raises
    nothing; rebuilt under no_grad from the common base (Note [Aliased inputs]), the view would count that write
    and raise eager's error for views made under no_grad (review of 7803a49)."""
    read_after = dict(layout.read_after_writes)
    for i, m in zip(group, members, strict=True):
        if m._base is not None and m.requires_grad and torch.is_grad_enabled() \
                and any(j != i and j in written and j in read_after.get(i, ()) for j in group) \
                and creation_of(m) == CREATION.INFERENCE_MODE:
            raise RefusedCall(   # no mode of the trace makes such a view (review of 7803a49)
                f"input {i} is a view made under torch.inference_mode() of a tensor that requires grad, passed beside "
                "an input of its storage that the function writes before reading it: eager refuses that read, which "
                "the views rebuilt from their common storage cannot follow",
                hint='pass a .clone() of it, or pass on_unsupported="eager"')
        if not (made_under_no_grad(m) and m.requires_grad and torch.is_grad_enabled()):
            continue
        for j, other in zip(group, members, strict=True):   # only where autograd reads the view after that write
            if j != i and j in written and j in read_after.get(i, ()) and not shares_version_counter(m, other):
                raise RefusedCall(
                    f"input {i} is a view made under no_grad, and input {j}, which shares its storage but not its "
                    f"version counter (a .data), is written: the inputs rebuilt from their common storage share one "
                    "counter, so the write would move the view's version, which eager's does not",
                    hint='pass a .clone() of one of them, or pass on_unsupported="eager"')


def _refuse_views_moved_off_their_base(group: tuple, members: list) -> None:
    """Refuse a call passing an autograd view that no longer shares its base's storage (``t0.data = y``, Dynamo
    runs it between graphs) beside an input sharing its new storage that the function writes: the synthetic
    base, a view of the autograd root, would read the root's storage, not the one the view shows (fuzz
    --semantics12, review of a70398d: ``y = t0.data * 2; t0.data = y; y.mul_(2); t0.sum()`` summed other values)."""
    one_root = len({id(_root(m)) for m in members}) == 1   # else the base is detached, of the members' storage
    for i, m in zip(group, members, strict=True):
        if m._base is not None and m.untyped_storage().data_ptr() != m._base.untyped_storage().data_ptr() \
                and (one_root or m.requires_grad):
            raise RefusedCall(
                f"input {i} is a view given other data (.data =, set_()) that shares it with another input the "
                "function writes: its autograd base lies in another storage, so the inputs cannot be rebuilt "
                "from one", hint='pass a clone, or pass on_unsupported="eager"')


def _refuse_views_dropping_elements(group: tuple, members: list, layout, written: set) -> None:
    """Fuzz --semantics12 seeds 11600224, 11604809 (``x0 = base[::2].as_strided((3, 3), (3, 1))`` passed beside
    ``base[:-1]``): eager's gradient through such a member follows the history the call gave it, which drops the
    elements outside ``base[::2]``, until a write that moves its version (``written``) makes autograd regenerate
    it on the base; a member rebuilt from the synthetic base always reaches them. Refused where autograd first
    reads the member before any such write into the group (``layout.writes_before_first_reads``)."""
    if not torch.is_grad_enabled():
        return
    before = dict(layout.writes_before_first_reads)
    for i, m in zip(group, members, strict=True):
        if i not in before or any(j in written and j in group for j in before[i]):
            continue   # never read by autograd, or read only after eager regenerated its history
        if m.requires_grad and m._base is not None and history_drops_elements(m):
            raise lossy_view_refusal(
                i, "passed beside another input of its storage, autograd reads it before any write of the "
                "function into that storage moves its version",
                "eager's gradient there follows the history the call gave it, which drops those elements, and "
                "the view rebuilt from the inputs' common storage reaches them")


def _gradient_reaches(layout, i: int) -> bool:
    """The backward of the entry traced on the inputs apart gives graph input ``i`` a gradient."""
    return bool(layout.tangent_positions) and i < len(layout.grad_inputs) and layout.grad_inputs[i] \
        and i not in layout.no_gradient


def _leaf_view(t: torch.Tensor) -> bool:
    try:
        return t.grad_fn is None
    except RuntimeError:   # a stale multi-output view: eager's error is its user's
        return False


def _check_offset_root(group: tuple, members: list, recorded: tuple) -> None:
    """Fuzz seed 61688: one autograd root that starts inside its storage (``t[1:].detach()``), written
    with a value that requires grad. The write's history would go through a view of the root over the
    whole storage, which starts before the root: autograd's backward of that view (as functionalization
    traces it) cannot place it, so the call is refused by name instead of failing in the backward."""
    if not torch.is_grad_enabled() or not any(i in recorded for i in group):
        return
    roots = {id(r): r for r in (_root(m) for m in members)}
    if len(roots) == 1 and next(iter(roots.values())).storage_offset() != 0:
        raise UnsupportedError("inputs sharing the storage of a tensor that starts inside it (a detach() or .data of a "
                               "slice, t[1:].detach()) are written with a value that requires grad; their common "
                               "storage cannot be rebuilt differentiably",
                               hint="pass a .clone() of the slice (or of one of the aliased inputs), or pass "
                                    'on_unsupported="eager"')


def _take_recorded_writes(leaves: list, positions: tuple, groups: tuple, bases: list, recorded: tuple) -> None:
    """Inputs of a group of several autograd roots (``x`` and ``x.detach()``) share a detached base, which
    took the history of a write autograd records: the written input takes it from the base (a copy of
    its own values, its version kept), as eager's write gave it that history and left the other roots'."""
    if not torch.is_grad_enabled():
        return
    for group, base in zip(groups, bases, strict=True):
        members = [leaves[positions[i]] for i in group]
        if len({id(_root(m)) for m in members}) == 1 or not base.requires_grad:
            continue
        for i, m in zip(group, members, strict=True):
            if i in recorded and _root(m) is not _root(base):   # the base's own root took the history itself
                with torch.autograd._unsafe_preserve_version_counter(m):
                    m.copy_(base.as_strided(m.shape, m.stride(), m.storage_offset()))


def refresh_grad_fns(tensors: list) -> None:
    """Regenerate these views' grad_fn, as eager's reads of them did after the write into their storage
    (Note [Writes through a view of an input] in runtime/epilogue.py); until then autograd's in-place check
    would take each for a leaf that requires grad (fuzz seed 1901147)."""
    for t in tensors:
        try:
            _ = t.grad_fn
        except RuntimeError:   # a view made under no_grad whose base was written: eager's error is its user's
            pass


def _expected_versions_holder(result: Any) -> Any:
    """The compiled step's backward node among ``result``'s outputs, if it checks versions of inputs it wrote
    (Note [Saved mutated inputs] in runtime/function.py)."""
    for t in pytree.tree_leaves(result):
        try:
            node = t.grad_fn if isinstance(t, torch.Tensor) else None
        except RuntimeError:   # a view made under no_grad whose base was written: eager's error is for its user
            continue           # (fuzz --semantics12 seed 110251), and the step's node is not behind it
        if node is not None and hasattr(node, "expected_versions"):
            return node
    return None


def _watch_members(result: Any, leaves: list, members: list) -> None:
    """Note [Inputs given new data after the call] in runtime/function.py: the inner step's saved inputs are the
    synthetic bases (or views rebuilt from them), not the caller's tensors, so its backward cannot read what a
    ``.data =`` after the call gives a caller's tensor an op saved itself (``members``: (input, tensor)): such a
    backward refuses by name (fuzz --semantics12 seed 8202667: ``b.sin()`` saved ``b``, passed
    with its view ``a``, then ``b.data = ...``)."""
    from .function import _DataWatch, _member_data_replaced, add_watches, step_node  # function.py imports this module

    node = step_node(result, leaves)
    if node is not None and getattr(node, "stash", None) is not None:
        # the outer layout's tangents are not the inner step's (fuzz seed 9202968, through Dynamo: an IndexError
        # in the backward): checked whichever gradients came
        add_watches(node, [_DataWatch(m, i, None, _member_data_replaced) for i, m in members])


def _saved_by_eager(layout) -> dict[int, tuple | None]:
    """The inputs whose version eager's backward checks (Note [Saved mutated inputs] in runtime/function.py), by
    the layout of the entry traced on distinct inputs, each with the tangents of the outputs whose backward reads
    it (None: any)."""
    found = {i: tangents for i, eager_saves, tangents in layout.saved_mutated if eager_saves}
    found.update((i, tangents) for _, i, eager_saves, tangents in layout.saved_input_positions if eager_saves)
    return found


def _check_empty_members(result: Any, leaves: list, layout, members: list) -> None:
    """An empty member eager saved (``b.sin()`` of ``b = base[2:]``, passed beside ``base[:1]`` and written) is an
    empty view of the synthetic base in the inner step, which saves nothing of it: its version, shared with the
    caller's base, is checked as it is after the call, as eager's saved one would be (fuzz --semantics12 seed
    10301516: ``b.detach().mul_(2)`` after the call, then the backward), where a gradient of an output whose
    backward reads it came. ``members``: (tensor, the outer layout's tangents reading it). Both steps number
    their outputs' tangents from the user's tensors first."""
    from .function import _version_token, step_node  # function.py imports this module

    node = step_node(result, leaves) if members else None
    inner = getattr(getattr(node, "_forward_cls", None), "tangent_positions", None)
    if node is None or getattr(node, "stash", None) is None or inner is None:
        return
    outer = layout.tangent_positions

    def mapped(tangents: tuple | None) -> tuple | None:
        if tangents is None or any(outer[t] >= layout.num_user_tensors or outer[t] not in inner for t in tangents):
            return None
        return tuple(inner.index(outer[t]) for t in tangents)

    # one read for a written input's gradient (or for any) has no tangent of the inner step to follow: left
    # unchecked (the empty values read are none), where checking it always would raise in backwards eager's does
    # not run it
    checks = [(_version_token(m), m._version, True, tangents) for m, read_by in members
              if (tangents := mapped(read_by)) is not None]   # a token: no reference cycle through m's grad_fn
    if checks:
        node.expected_versions = [*getattr(node, "expected_versions", ()), *checks]


def _expected_versions(result: Any) -> list:
    node = _expected_versions_holder(result)
    return list(node.expected_versions) if node is not None else []


def _views_requiring_grad(layout, members: set) -> bool:
    """An output is a view of one of ``members`` that requires grad after the call: its gradient
    would go to the caller's tensor, whose requires_grad_() the synthetic base does not carry."""
    return any(kind == "input_view" and value[0] in members and value[1][4] for kind, value in layout.output_plan)


def _views_of_bases(fn: Callable, spec, views: tuple, duplicates: tuple, returned: dict,
                    refreshed: set, viewed: dict, detached_bases: frozenset = frozenset(),
                    no_grad_views: frozenset = frozenset()) -> Callable:
    """``fn`` over (bases, other leaves): each view leaf rebuilt from its base, a repeated leaf
    (``duplicates``: (position, first position)) as the same object. ``returned`` receives, at
    trace time, which flat outputs are those rebuilt leaves themselves; ``refreshed``, the positions
    of the leaves whose grad_fn eager regenerated after a recorded write into their storage
    (Note [Writes through a view of an input] in runtime/epilogue.py): the caller's must be too;
    ``viewed``, which flat outputs are views taken from a rebuilt leaf (after any write into it, not through a
    detach()), or its detach() itself: (its position, whether a detach()). ``detached_bases``: the groups whose
    base is no view of a caller's tensor (several autograd roots, none requiring grad)."""
    group_of = {position: group for position, _, _, _, group, *_ in views}
    detached_members = {position for position, _, _, _, _, detached, _ in views if detached}

    def call(bases: list, masked: list) -> Any:
        leaves = list(masked)
        rebuilt = {}
        for position, size, stride, offset, group, detached, _ in views:
            base = bases[group]   # offsets are the base's own: a fake base need not keep the real one's
            leaves[position] = rebuilt_as_the_callers(   # one the caller made under no_grad is made so
                lambda base=base, size=size, stride=stride, offset=offset:
                base.as_strided(size, stride, base.storage_offset() + offset),
                base.requires_grad and position not in no_grad_views, position in no_grad_views)
            if detached:   # another autograd root than the written one's: the write's history is not its
                leaves[position] = leaves[position].detach()
            rebuilt[id(leaves[position])] = position
        for position, first in duplicates:
            leaves[position] = leaves[first]
        args, kwargs = unflattener(spec)(leaves)
        checks = analysis()
        if checks is not None:
            checks.watch([leaves[position] for position, *_ in views])
        roots = [leaves[position] for position, *rest in views if rest[-1] and not rest[-2]]
        if roots and (every := in_place_checks()) is not None:   # also in the joint trace
            every.stand_for_roots(roots)
        with treated_as_inputs([leaves[position] for position, *_ in views]):
            result = fn(*args, **kwargs)
        flat = pytree.tree_leaves(result)
        returned.clear()
        returned.update({k: rebuilt[id(v)] for k, v in enumerate(flat) if id(v) in rebuilt})
        if checks is not None:
            refreshed.clear()
            refreshed.update(position for position, *_ in views if checks.refreshed(leaves[position]))
        if checks is not None and checks.analyze:
            viewed.clear()
            positions = {id(leaves[position]): position for position, *_ in views}
            for k, v in enumerate(flat):
                source = checks.viewed_from(v) if isinstance(v, torch.Tensor) and k not in returned else None
                if source is not None and source[1] and id(source[0]) in positions \
                        and geometry(v) == geometry(source[0]):
                    # the member's detach() itself: eager's shares the caller's tensor's version counter, not the
                    # synthetic base's (fuzz --semantics12 seed 14961224, through Dynamo: ``b.set_(t0)`` at a
                    # graph break, then ``b[0] = t0.sum(); return b.detach()``)
                    viewed[k] = (positions[id(source[0])], True)
                    continue
                # a view made before a write into its storage is stale in eager (its grad_fn is regenerated),
                # and another taken through detach() is no view of the caller's tensor: both kept as they are
                if source is None or id(source[0]) not in positions or source[1]:
                    continue
                if not checks.written_since_made(v):
                    viewed[k] = (positions[id(source[0])], False)
                elif group_of[positions[id(source[0])]] in detached_bases \
                        or positions[id(source[0])] in detached_members and not source[0].requires_grad:
                    # also a member of another root rebuilt detached beside one that requires grad (fuzz
                    # --semantics12 seed 9001758: ``t0 = b.split(1)[1]; a.mul_(b)``, then b.requires_grad_()
                    # at a graph break)
                    raise UnsupportedError(
                        f"output {k} is a view of input {positions[id(source[0])]} taken before a write into the "
                        "storage it shares with other inputs of another autograd root (that input requiring no "
                        "grad): eager's "
                        "view stays a view of the caller's tensor (a later requires_grad_() on it reaches the view), "
                        "which a view of their rebuilt common storage cannot follow (fuzz seed 5600480, through "
                        "Dynamo)", hint='return a .clone() of the view, pass a .clone() of one of the aliased inputs, '
                                        'or pass on_unsupported="eager"')
        return result

    # A cache hit would not trace, and ``returned`` is filled by the trace: never from disk (jointgraph/cache).
    call.__jointgraph_uncacheable__ = "synthetic bases of aliased inputs (Note [Aliased inputs]) are found by tracing"

    return call


def _multi_output_view_used_after_write(group: tuple, members: list, recorded: tuple, layout,
                                        moving: set) -> bool:
    """A member is a multi-output view (``unbind`` / ``chunk`` / ``split``, with grad) that the function writes with
    autograd recording it, or that autograd reads after the function wrote another member in any way (the entry
    traced on the inputs apart knows when: ``read_after_writes``); eager raises there."""
    read_after = dict(layout.read_after_writes)
    # any write moves the version the view checks (not one through .data, which counts its own)
    written = set(recorded) | moving
    for i, m in zip(group, members, strict=True):
        if multi_output_view(m) and (i in recorded or any(w in written and w in group for w in read_after.get(i, ()))):
            return True
    return False


def _counters_apart(leaves: list, positions: tuple, groups: tuple, written: set) -> list:
    """(tensor, version) of each member of ``groups`` the function does not write whose version counter no
    written member of its group shares (probed)."""
    kept = []
    for group in groups:
        writers = [leaves[positions[i]] for i in group if i in written]
        if not writers:
            continue
        for i in group:
            t = leaves[positions[i]]
            if i not in written and not t.is_inference() and not any(shares_version_counter(w, t) for w in writers):
                kept.append((t, t._version))
    return kept


def _restore_versions(result: Any, kept: list) -> None:
    """Set those members' versions back; the step's expected versions of them move by as much."""
    node = _expected_versions_holder(result)
    for t, version in kept:
        delta = t._version - version
        if not delta:
            continue
        moved = [u for u, *_ in node.expected_versions if u is t or shares_version_counter(t, u)] if node else []
        torch._C._autograd._unsafe_set_version_counter((t,), (version,))
        if moved:   # the rebuilt views the step saved share the counter set back
            node.expected_versions = [(u, v - delta if any(u is m for m in moved) else v, *rest)
                                      for u, v, *rest in node.expected_versions]


def _fresh_multi_output_views(result: Any) -> tuple[int, ...]:
    """The positions among ``result``'s leaves of multi-output views (``unbind``, with grad) that autograd
    still reads, i.e. whose base nothing wrote after they were made."""
    return tuple(k for k, t in enumerate(pytree.tree_leaves(result))
                 if isinstance(t, torch.Tensor) and multi_output_view(t) and not base_written_after(t))


def _remade_if_stale(result: Any, fresh: tuple[int, ...]) -> Any:
    """``result`` with the multi-output views at ``fresh`` made again where the caller-side replay of an
    in-place metadata op (``transpose_()``, which moves the version the views share) made them stale: eager's
    op came before the function took them (fuzz --semantics12 seed 4302566), so its views read fine."""
    flat, spec = pytree.tree_flatten(result)
    remade: dict[int, torch.Tensor] = {}   # one object per object
    for k in fresh:
        t = flat[k]
        if base_written_after(t):
            if id(t) not in remade:
                view = t._base.as_strided(t.shape, t.stride(), t.storage_offset())
                torch._C._autograd._set_creation_meta(view, torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE)
                remade[id(t)] = view
            flat[k] = remade[id(t)]
    return unflattener(spec)(flat) if remade else result


def _view_of_caller(out: torch.Tensor, leaf: torch.Tensor, detached: bool = False) -> torch.Tensor:
    """``out``, a view the function took of an aliased input and returned, as a view of the caller's
    tensor ``leaf`` rather than of the synthetic base, as eager's: a later ``leaf.requires_grad_()``
    then reaches it (fuzz seed 3604254, through Dynamo). ``detached``: ``out`` is the input's ``detach()``,
    remade as the caller's tensor's, whose version counter it shares. Only where neither requires grad (no
    history to keep) and ``out`` still lies on ``leaf``'s storage in its dtype."""
    if out.requires_grad or leaf.requires_grad or out.dtype != leaf.dtype \
            or out.untyped_storage().data_ptr() != leaf.untyped_storage().data_ptr():
        return out
    if detached:
        return leaf.detach() if geometry(out) == geometry(leaf) else out
    return leaf.as_strided(out.shape, out.stride(), out.storage_offset())


def _raised_while_tracing(exc: BaseException) -> bool:
    """The exception came from a fake kernel while the entry was traced, not from running it."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(("proxy_tensor.py", "fake_tensor.py")):
            return True
        tb = tb.tb_next
    return False


class SyntheticBases:
    """Runs calls whose inputs alias through an inner compiled function over synthetic bases,
    one per alias geometry (Note [Aliased inputs])."""

    def __init__(self, fn: Callable, make_compiled: Callable[[Callable], Callable]):
        self.fn = fn
        self.make_compiled = make_compiled
        self._inner: dict[tuple, tuple[Callable, dict]] = {}

    def __call__(self, leaves: list, spec, layout, aliased: AliasedInputs) -> Any:
        """Run ``leaves`` through bases; ``layout``: the EntryLayout compiled for the aliased inputs."""
        positions = layout.signature.tensor_leaf_positions
        members_of = {i for group in aliased.groups for i in group}
        requires_grad_set = [i for i in layout.requires_grad_set if i in members_of]
        # outputs behind the node that raises eager's backward error depend on it too (fuzz seed 702738)
        differentiable = layout.tangent_positions or layout.backward_error is not None and layout.backward_error[1]
        if requires_grad_set and (differentiable or _views_requiring_grad(layout, members_of)):
            raise UnsupportedError("requires_grad_() on an input that shares storage with another mutated input, "
                                   "when an output depends on it or is a view of it, is not supported",
                                   hint='call requires_grad_() before the compiled function, pass distinct '
                                   'tensors, or pass on_unsupported="eager"')
        # writes autograd records: also those behind the node that raises eager's backward error (fuzz seed
        # 501666, ``t1 = t0 @ a; a.mul_(t0)``), which give the written input a history all the same
        recorded = layout.mutated_with_grad + (layout.backward_error[2] if layout.backward_error is not None else ())
        # the inputs whose writes move their version (not those through .data, which counts its own), and those
        # whose version moves with no new data (``b.copy_(b)``: fuzz seed 5601060, through Dynamo after a.set_(b))
        written = set(layout.mutated_inputs) - set(layout.keep_version) | set(layout.version_bumps)
        bases, views = [], []
        for group in aliased.groups:
            members = [leaves[positions[i]] for i in group]
            # fuzz --semantics12 seed 3902590 (Dynamo passes an unbind() output into its next graph)
            if torch.is_grad_enabled() \
                    and _multi_output_view_used_after_write(group, members, recorded, layout, written):
                raise RefusedCall(
                    "an input that is a chunk() / split() / unbind() view shares storage with an input the function "
                    "writes, and is used after the write: eager refuses that use, which the views rebuilt from "
                    "their common storage cannot follow",
                    hint='pass distinct tensors (e.g. .clone()), or pass on_unsupported="eager"')
            _refuse_views_made_leaves(group, members, layout, written)
            _refuse_views_moved_off_their_base(group, members)
            _refuse_views_dropping_elements(group, members, layout, written)
            _refuse_views_made_in_modes(group, members, written, layout)
            base = _base_or_why(members, tuple(i in recorded for i in group))
            if isinstance(base, str):   # a refusal, which no caller answers with synthetic bases again (an
                # ExpandedEntry's outer call: seed 1201873); saying why (fuzz seed 18602, through Dynamo)
                raise UnsupportedError(f"{aliased.what}, and no synthetic base can stand for them: {base}",
                                       hint=aliased.hint) from aliased
            detached = _other_roots(group, members, recorded, base)
            _check_offset_root(group, members, recorded)
            views += [(positions[i], tuple(m.shape), tuple(m.stride()), m.storage_offset() - base.storage_offset(),
                       len(bases), i in detached, m._base is None) for i, m in zip(group, members, strict=True)]
            bases.append(base)
        duplicates = tuple(sorted((p, positions[i]) for p, i in layout.signature.duplicate_of.items()
                                  if i in members_of))
        detached_bases = frozenset(g for g, b in enumerate(bases) if b._base is None)
        # members the caller made under no_grad are rebuilt so (review of c8e2fba: eager's error for reading one
        # under grad mode after a write through another)
        no_grad_views = frozenset(positions[i] for i in members_of if made_under_no_grad(leaves[positions[i]]))
        key = (tuple(views), duplicates, spec, detached_bases, no_grad_views)
        found = self._inner.get(key)
        if found is None:
            returned: dict[int, int] = {}
            refreshed: set[int] = set()
            viewed: dict[int, int] = {}
            inner_fn = _views_of_bases(self.fn, spec, tuple(views), duplicates, returned, refreshed, viewed,
                                       detached_bases, no_grad_views)
            found = self._inner[key] = (self.make_compiled(inner_fn), returned, refreshed, viewed)
        inner, returned, refreshed, viewed = found
        masked = list(leaves)
        for position, *_ in views:
            masked[position] = None
        for position, _ in duplicates:
            masked[position] = None
        metadata = tuple(m for m in layout.metadata_mutations if m[0] in members_of)
        # Eager's t_() bumped the version before the views f returns were made: with autograd off,
        # a view made after it is not stale (with autograd on, the caller's t_() is recorded instead).
        unrecorded = tuple(m[0] for m in metadata if not m[-1])
        if unrecorded:
            for i in unrecorded:
                torch.autograd.graph.increment_version(leaves[positions[i]])
            bases = [base_of([leaves[positions[i]] for i in group], tuple(i in recorded for i in group))
                     for group in aliased.groups]   # not stale
        # members written in eager whose version counter is not the base's (``a.set_(b)`` passed with ``b``:
        # a storage, two counters; fuzz seed 901124): their counters move too
        versions = {i: leaves[positions[i]]._version for group in aliased.groups for i in group
                    if i in written and not leaves[positions[i]].is_inference()}
        # members eager does not write whose counter no written member shares (``b.set_(a)`` then a write through
        # ``b``: fuzz --semantics12 seed 4900546): the write through the base moves theirs, eager's leaves them
        kept = _counters_apart(leaves, positions, aliased.groups, written)
        through_data = [leaves[positions[i]] for i in layout.keep_version if i in members_of]
        marks = [data_write_count(b) for b in bases] if through_data else None
        try:
            result = inner(bases, masked)
        except AsStridedChainWrite as exc:
            plain = [i for i in members_of if made_under_no_grad(leaves[positions[i]])
                     and not leaves[positions[i]].requires_grad]
            if not plain:
                raise
            # review of 7803a49: the write autograd records through a rebuilt view, beside a view made under no_grad
            # of a tensor that does not require grad, fails in functionalization; the refusal said as_strided,
            # which the caller did not write
            raise RefusedCall(
                f"input {plain[0]} is a view made under no_grad of a tensor that does not require grad, passed beside "
                "an input of its storage that the function writes with autograd recording it: eager refuses any use "
                "of the view after that write (its history cannot be regenerated), which the views rebuilt from "
                "their common storage cannot follow",
                hint='take the view outside no_grad, or pass a .clone() of it, or pass on_unsupported="eager"') from exc
        except RuntimeError as exc:
            if not metadata or type(exc) is not RuntimeError or not _raised_while_tracing(exc):
                raise
            # Functionalization replays a rebuilt view's t_() / transpose_() wrongly for a write
            # through a view of it (a fake kernel sees the old geometry): not the user's error.
            raise UnsupportedError("an input that shares storage with another mutated input has its metadata "
                                   "changed (t_(), transpose_(), unsqueeze_(), ...) and is then written through a "
                                   f"view; this cannot be traced on their common storage ({str(exc).splitlines()[0]})",
                                   hint="pass distinct tensors (e.g. .clone()), use the out-of-place op "
                                        '(x = x.t()), or pass on_unsupported="eager"') from exc
        if through_data:   # the inner step wrote the bases: the members written are what a backward checks
            for base, count in zip(bases, marks, strict=True):
                narrow_data_writes(base, count, [m for m in through_data if m.untyped_storage() is
                                                 base.untyped_storage()])
        for i, version in versions.items():
            if leaves[positions[i]]._version == version:
                torch.autograd.graph.increment_version(leaves[positions[i]])
        if kept:
            _restore_versions(result, kept)
        if metadata:   # the rebuilt views' t_() / as_strided_(), on the caller's tensors (versions bumped above)
            expected = _expected_versions(result)
            before = [t._version for t, *_ in expected]
            fresh = _fresh_multi_output_views(result)
            with contextlib.ExitStack() as stack:
                for i in unrecorded:
                    stack.enter_context(torch.autograd._unsafe_preserve_version_counter(leaves[positions[i]]))
                # a recorded t_() on a view whose base the call wrote with grad: eager's op read its regenerated
                # grad_fn, stale until read it passes for a leaf (fuzz --semantics12 seed 7100966)
                refresh_grad_fns([leaves[positions[m[0]]] for m in metadata if m[-1]])
                apply_metadata_mutations([leaves[p] for p in positions], metadata)
            if expected:   # eager's recorded t_() came before the op that saved the input: its bump is expected
                _expected_versions_holder(result).expected_versions = [
                    (t, v + t._version - b, *rest) for (t, v, *rest), b in zip(expected, before, strict=True)]
            if fresh:
                result = _remade_if_stale(result, fresh)
        _take_recorded_writes(leaves, positions, aliased.groups, bases, recorded)
        if layout.inputs_saved_itself:
            _watch_members(result, leaves, [(i, leaves[positions[i]]) for i, _ in layout.inputs_saved_itself
                                            if i in members_of])
        empty = [i for i in members_of if leaves[positions[i]].numel() == 0]
        if empty:
            saved = _saved_by_eager(layout)
            _check_empty_members(result, leaves, layout, [(leaves[positions[i]], saved[i]) for i in empty
                                                          if i in saved])
        for i in requires_grad_set:
            leaves[positions[i]].requires_grad_()
        if refreshed and torch.is_grad_enabled():
            refresh_grad_fns([leaves[p] for p in refreshed])
        if not returned and not viewed:
            return result
        flat, out_spec = pytree.tree_flatten(result)
        for k, position in returned.items():
            flat[k] = leaves[position]   # the caller's own tensor, as eager returns it
        remade: dict[int, torch.Tensor] = {}   # one object per object: ``return t, t`` stays one
        for k, (position, detached) in viewed.items():
            flat[k] = remade.setdefault(id(flat[k]), _view_of_caller(flat[k], leaves[position], detached))
        return unflattener(out_spec)(flat)   # a torch.Size stays one
