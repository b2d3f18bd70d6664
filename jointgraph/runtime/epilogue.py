"""The epilogue of Note [Input mutations] (capture/metadata.py): what the call does to the
caller's tensors after the compiled forward ran. Each step reads a precomputed index list."""

from __future__ import annotations

import collections
import dataclasses
import weakref

import torch

from ..capture.inplace import CREATION, CallerView, creation_of, in_place_on_a_view_error
from ..capture.metadata import replay_views
from ..errors import UnsupportedError
from ..ir.sizes import extent


def apply_metadata_mutations(inputs: list, mutations: tuple) -> None:
    """Give the caller's tensors the geometry the function left them with (before any data copy)."""
    for i, size, stride, offset, replay, recorded in mutations:
        target = inputs[i]
        if replay is not None:   # replayed on the caller's own strides and offset
            with torch.no_grad():
                view = replay_views(target, replay)
            size, stride, offset = view.shape, view.stride(), view.storage_offset()
        if recorded:
            target.as_strided_(size, stride, offset)
        else:
            with torch.no_grad():
                target.as_strided_(size, stride, offset)


def autograd_root(t: torch.Tensor) -> torch.Tensor:
    """``t``'s autograd base, or ``t`` itself when it is no view."""
    return t if t._base is None else t._base


def write_target(t: torch.Tensor, via_view: bool) -> torch.Tensor:
    """What a recorded epilogue write goes into: a fresh view of ``t`` when eager wrote ``t`` only through
    views of it and ``t`` is a view itself (Note [Writes through a view of an input]), else ``t``."""
    return t.view_as(t) if via_view and t._base is not None else t


# Note [Writes through .data between graphs]
# ------------------------------------------
# A write through ``x.data`` moves no version of ``x``, so a backward that recomputes from ``x`` what eager
# kept apart from it (``t1 = a.exp()`` saved as ``a``) cannot tell from ``x._version`` that the values it
# reads are no longer the call's. Where that write is made by a later step of ours (a Dynamo graph after a
# break: ``a.data.t()[:] = ...``, fuzz --semantics12 seed 10104346), its epilogue records it on the storage
# (``_DataWrites``, an attribute of the storage's Python object, which lives as long as the storage): a count
# and the byte ranges of the latest 1,024 writes. The earlier step's backward holds a ``DataWriteMark`` of the
# memory it reads (the saved tensor's own storage, so a ``set_()`` of the input after the call does not move
# it) and refuses by name where a later write reached that memory; writes into other parts of the storage
# (parameters that are views of one flat buffer) do not count. A write through ``.data`` in the user's own
# eager code after the call is not seen (docs/semantics.md, Known gaps).
_DATA_WRITES = "_jointgraph_data_writes"


class _DataWrites:
    """The writes through ``.data`` our steps made into one storage: how many, and the byte ranges of the
    latest ``KEPT`` (an older one counts as reaching everything)."""

    KEPT = 1024
    __slots__ = ("count", "recent")

    def __init__(self):
        self.count = 0
        self.recent: collections.deque = collections.deque(maxlen=self.KEPT)

    def since(self, count: int, start: int, end: int) -> bool:
        """A write after the ``count``-th reached bytes [start, end)."""
        if self.count == count or start == end:
            return False
        if self.count - count > len(self.recent):
            return True
        return any(n > count and lo < end and start < hi for n, lo, hi in self.recent)


def _byte_range(t: torch.Tensor) -> tuple[int, int]:
    size, offset = t.element_size(), t.storage_offset()
    end = extent(t.shape, t.stride(), offset) if t.numel() else offset
    return offset * size, end * size


@dataclasses.dataclass(frozen=True, slots=True)
class DataWriteMark:
    """The writes through ``.data`` into a tensor's memory so far (held weakly: the storage may die first)."""

    storage: weakref.ref
    count: int
    start: int
    end: int

    @classmethod
    def of(cls, t: torch.Tensor) -> DataWriteMark:
        storage = t.untyped_storage()
        writes = getattr(storage, _DATA_WRITES, None)
        return cls(weakref.ref(storage), writes.count if writes is not None else 0, *_byte_range(t))

    def written(self) -> bool:
        storage = self.storage()
        writes = getattr(storage, _DATA_WRITES, None) if storage is not None else None
        return writes is not None and writes.since(self.count, self.start, self.end)


def data_write_count(t: torch.Tensor) -> int:
    writes = getattr(t.untyped_storage(), _DATA_WRITES, None)
    return writes.count if writes is not None else 0


def narrow_data_writes(base: torch.Tensor, since: int, members: list) -> None:
    """The writes through ``.data`` after the ``since``-th into ``base``'s storage were a synthetic base's (Note
    [Aliased inputs]), which spans every member: record them as writes of the members written instead."""
    writes = getattr(base.untyped_storage(), _DATA_WRITES, None)
    if writes is None or writes.count == since or not members or writes.count - since > len(writes.recent):
        return
    while writes.recent and writes.recent[-1][0] > since:
        writes.recent.pop()
    writes.count = since
    for m in members:
        count_data_write(m)


def count_data_write(t: torch.Tensor) -> None:
    storage = t.untyped_storage()
    writes = getattr(storage, _DATA_WRITES, None)
    if writes is None:
        writes = _DataWrites()
        setattr(storage, _DATA_WRITES, writes)
    writes.count += 1
    writes.recent.append((writes.count, *_byte_range(t)))


def apply_mutations(inputs: list, outs, copies: tuple) -> None:
    """Copy new values into the caller's tensors: ``copies`` holds (input, output, recorded by
    autograd, written only through ``.data``, written only through views of it).

    Note [Writes through a view of an input]
    ----------------------------------------
    Eager's ``a.t().add_(y)`` (``y`` requiring grad) on an input ``a`` that is a view of ``base`` gives
    ``base`` the write's history; ``a``'s own ``grad_fn`` is regenerated only when read, and until then
    autograd's in-place check takes ``a`` for a leaf that requires grad (``a.mul_(2)`` right after the
    call raises; fuzz seed 900889). A recorded write that eager made only through views of the input is
    copied through a view of it too, so the caller's tensor is left as eager leaves it."""
    for i, k, recorded, keep_version, via_view in copies:
        if recorded:   # autograd records it, as it recorded eager's in-place op
            write_target(inputs[i], via_view).copy_(outs[k])
        elif keep_version:   # written through x.data, which counts its own versions
            with torch.no_grad(), torch.autograd._unsafe_preserve_version_counter(inputs[i]):
                inputs[i].copy_(outs[k])
            count_data_write(inputs[i])
        else:
            with torch.no_grad():
                inputs[i].copy_(outs[k])


# The autograd node of ``as_strided_()`` on a view (fuzz --semantics12 seed 4300868, through Dynamo, which runs the
# as_strided_() between graphs): its backward maps onto the view's elements before the op.
_IN_PLACE_AS_STRIDED = "AsStridedBackward1"


def check_recorded_writes(inputs: list, with_grad: tuple) -> None:
    """Before the graph runs, for the inputs written with autograd recording it: eager's error for a
    leaf that requires grad; then the refusal of an input that is an autograd view of another input
    (or shares its autograd base) without sharing its storage, as after ``a.set_(t)``: eager's write
    through the view rewrites the base's history, which the graph, reading the base's old history,
    cannot follow (eager's error comes first, whichever input it is on)."""
    apart = None
    for i in with_grad:
        t = inputs[i]
        if t.is_leaf and t.requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if t._base is not None and t.requires_grad and torch.is_grad_enabled() \
                and type(t.grad_fn).__name__ == _IN_PLACE_AS_STRIDED:
            raise RefusedCall(
                f"input {i} is a view whose geometry as_strided_() changed before the call, and the function writes "
                "it with autograd recording the write: eager sends the gradient of the written elements to its base, "
                "which the view's own history (onto its old elements) does not reach",
                hint='call as_strided_() inside the compiled function, or pass on_unsupported="eager"')
        if t._base is not None and t.requires_grad and torch.is_grad_enabled() and history_drops_elements(t):
            raise lossy_view_refusal(i, "the function writes it with autograd recording the write")
        if apart is None and t._base is not None:
            apart = _apart_from_base(inputs, i)
    if apart is not None:
        raise apart


def _apart_from_base(inputs: list, i: int) -> UnsupportedError | None:
    """The refusal for input ``i``, an autograd view, when an input ``j`` that is its autograd base (or a view of
    it) is in another storage, or when ``i`` itself no longer shares its base's storage (a view made outside,
    then ``.data =``; fuzz seed 803934); else None."""
    base = inputs[i]._base
    storage = inputs[i].untyped_storage().data_ptr()
    for j, t in enumerate(inputs):
        if j != i and isinstance(t, torch.Tensor) and (t is base or t._base is base) \
                and t.untyped_storage().data_ptr() != storage:
            return UnsupportedError(
                f"input {i} is written in place and is a view of input {j} in autograd, but no longer shares "
                "its storage (set_() of the base, or .data assigned): eager's autograd rewrites the base's "
                "history through the view, which a compiled graph cannot follow",
                hint='pass a clone of the view, or pass on_unsupported="eager"')
    if storage != base.untyped_storage().data_ptr():
        return RefusedCall(
            f"input {i} is written in place with autograd recording it, and is a view in autograd of a "
            "tensor whose storage it no longer shares (.data assigned, or set_()): eager's write rewrites the "
            "base's history with the view's new geometry, which a compiled graph cannot follow",
            hint='pass a clone of the view, or pass on_unsupported="eager"')
    return None


def check_moved_views(inputs: list, read_after_writes: tuple, writers: tuple) -> None:
    """Under grad mode, refuse a call where an input autograd read after the function wrote inputs (``(input,
    inputs written before)``) is an autograd view no longer sharing its base's storage (``.data`` assigned, or
    ``set_()``, before the call) and shares its version counter with one of those: eager's read regenerated
    the view's history from its new geometry on its base (fuzz seed 2400292, across a Dynamo graph break:
    ``t1 = a.t(); t1.data = ...; a.detach()[-1].add_(3.0); t1.sum()`` sends ``t1``'s gradient into the base's
    first elements), while the graph links its old history. ``writers``: every input of ``read_after_writes``'
    second members; only a root that requires grad gives such a view a history to regenerate, so a call whose
    writes are all on other roots (buffers, say) returns before looking at the readers."""
    if not any(autograd_root(inputs[i]).requires_grad for i in writers):
        return
    for j, written in read_after_writes:
        t = inputs[j]
        if t._base is None or not t.requires_grad:
            continue
        if creation_of(t) != CREATION.DEFAULT and any(autograd_root(inputs[i]) is t._base for i in written):
            # made under no_grad or inference_mode, or by unbind / split (also a view of such a view): autograd
            # refuses to regenerate its history after the write, where eager reads it (review of 7803a49)
            raise RuntimeError(in_place_on_a_view_error(CallerView.of(t),
                                                        "its base or another view of its base has been"))
        if t.grad_fn is None and t._base.requires_grad:
            _refuse_view_older_than_its_base_requires_grad(inputs, j, written)
            continue
        if t.untyped_storage().data_ptr() == t._base.untyped_storage().data_ptr():
            if any(autograd_root(inputs[i]) is t._base for i in written) and history_drops_elements(t):
                raise lossy_view_refusal(j, "autograd reads it after the function writes its storage")
            continue
        for i in written:
            if autograd_root(inputs[i]) is t._base:
                after = "the function writes it" if i == j else \
                    f"the function writes input {i}, which shares its version counter"
                raise RefusedCall(
                    f"input {j} is a view in autograd of a tensor whose storage it no longer shares (.data "
                    f"assigned, or set_()), and autograd reads it or a view of it after {after}: eager "
                    "regenerates the view's history from its new geometry at that read, which a compiled graph "
                    "cannot follow", hint='pass a clone of the view, or pass on_unsupported="eager"')


def made_under_no_grad(t: torch.Tensor) -> bool:
    """``t`` is a view the caller made under no_grad."""
    return t._base is not None and creation_of(t) == CREATION.NO_GRAD_MODE


def _refuse_view_older_than_its_base_requires_grad(inputs: list, j: int, written: tuple) -> None:
    """Input ``j`` is a view taken before its base's ``requires_grad_()`` (``t0 = a[1:]; a.requires_grad_()``):
    it requires grad through its base yet has no history (no grad_fn, and no accumulator of its own, so a read
    of it sends its gradient nowhere). A write into its storage makes eager regenerate its history at the next
    read, so autograd's reads after the function wrote it (or an input sharing its version counter) send their
    gradient into the base, the reads before it nowhere (fuzz seed 7203776, across a Dynamo graph break: ``a``'s
    ``requires_grad_()`` in eager, then ``t0.detach().mul_(t0); t0.sum()``): the graph, one node whose inputs
    are linked at the call, cannot follow that. (A view the caller made under no_grad has no history either:
    ``check_moved_views`` raises eager's error for reading it after the write first.)"""
    for i in written:
        if autograd_root(inputs[i]) is inputs[j]._base:
            raise RefusedCall(
                f"input {j} is a view taken before its base's requires_grad_(), and autograd reads it after "
                f"the function writes {'it' if i == j else f'input {i}, which shares its version counter'}: eager "
                "gives the view a history only at that read, which a compiled graph cannot follow",
                hint="call requires_grad_() before taking the view (or pass a clone of it), or pass "
                     'on_unsupported="eager"')


def check_stale_views_of_leaf_views(inputs: list, stale_reads: tuple) -> None:
    """Under grad mode, refuse a call where an input that autograd read through a view the function took of it
    before writing their storage is itself a view made a leaf (``base.t().requires_grad_()``, ``base`` not
    requiring grad): eager regenerates that stale view's history from ``base``, and its gradient is lost (fuzz
    seed 2402418: ``t1 = a[:, 1:]``, ``t1.square_()`` under no_grad, ``t1.sum()`` gives ``a`` no gradient),
    while the graph differentiates into the input."""
    for i in stale_reads:
        t = inputs[i]
        if t._base is not None and t.is_leaf and t.requires_grad and not t._base.requires_grad:
            raise RefusedCall(
                f"input {i} is a view made a leaf that requires grad (requires_grad_() on a view of a tensor that "
                "does not), and autograd reads a view the function took of it after a write into their storage: "
                "eager regenerates that view's history from the base, which does not require grad, and its "
                "gradient is lost, which a compiled graph cannot follow",
                hint='pass a tensor that is no view (e.g. x.clone().requires_grad_()), or pass on_unsupported="eager"')


def check_geometry_writes_beside_multi_output_views(inputs: list, pairs: tuple) -> None:
    """Under grad mode, refuse a call where an input the function gives new geometry in place (``t_()``,
    ``unsqueeze_()``: a version bump of its storage) shares its storage with another input the function took
    multi-output views of (``chunk``, ``split``, ``unbind``): eager refuses those views' use after the bump, and
    the graph, traced with the inputs apart, does not see it (fuzz --semantics12 seed 3100272)."""
    for i, viewed in pairs:
        storage = inputs[i].untyped_storage().data_ptr()
        if storage and any(inputs[j].untyped_storage().data_ptr() == storage for j in viewed):
            raise RefusedCall(
                f"input {i} is given new geometry in place (t_(), unsqueeze_(), ...) and shares its storage with an "
                "input the function took chunk() / split() / unbind() views of: eager refuses those views' use "
                "after the version bump, which the graph, traced on the inputs apart, cannot follow",
                hint='pass distinct tensors (e.g. .clone()), or pass on_unsupported="eager"')


def check_view_of_leaf(inputs: list, written: tuple) -> None:
    """Eager's error for an in-place op autograd records (``t_()`` included) on a view of a leaf
    that requires grad: the caller's input, or a view the function took of it. Raised before the
    graph runs, as eager raises before its op runs (also before the graph's own errors: an index out of range in
    ``x[[7]] = v``, fuzz --semantics12 seed 15000191). A view a multi-output op made, or one made under no_grad,
    gets eager's error for those instead (autograd checks them first); where the write went through a view of
    the input (``x[0].add_(1)``) eager's names that view's node, this one the input's."""
    for i in written:
        t = inputs[i]
        base = t._base
        if base is not None and base.is_leaf and base.requires_grad and t.requires_grad:
            raise RuntimeError(in_place_on_a_view_error(CallerView.of(t)))


_AS_STRIDED_NODES = (torch._C._functions.AsStridedBackward0, torch._C._functions.AsStridedBackward1)


def history_drops_elements(t: torch.Tensor) -> bool:
    """Whether ``t``'s view history (its backward nodes down to its base's) holds an ``as_strided()`` of
    a view, and sends a gradient of ones on fewer elements of the base than ``t`` has (fuzz seed 11103840:
    ``b = base[::2]; b.as_strided_((2,), (1,))`` reaches ``base[1]``, which ``base[::2]``'s backward
    drops). Eager regenerates such a view's history as ``as_strided()`` of the base once its version moves,
    and that history drops nothing. Walks the chain only when it holds an ``as_strided()`` node."""
    base = t._base
    chain, node = [], t.grad_fn
    while node is not None and node is not base.grad_fn and len(chain) < 64:
        if getattr(node, "variable", None) is base:   # the base's AccumulateGrad: a leaf base
            break
        chain.append(node)
        nexts = [n for n, _ in node.next_functions if n is not None]
        node = nexts[0] if len(nexts) == 1 else None
    if node is None or not any(isinstance(n, _AS_STRIDED_NODES) for n in chain[:-1]):
        return False   # no as_strided() of a view (an as_strided() straight on the base drops nothing)
    # counted in double precision (a bf16 sum of 301 ones is 300); a real view of a complex base counts each
    # complex element's two parts
    wide = torch.complex128 if t.is_complex() else torch.float64
    try:
        with torch.no_grad():
            grad = torch.ones(t.shape, dtype=wide, device=t.device)
            for n in chain:
                grad = n(grad)
                grad = grad[0] if isinstance(grad, tuple) else grad
    except (RuntimeError, TypeError):   # a node taking several gradients (unbind(), split()): eager's own error
        return False                    # for such a view comes first
    reached = torch.view_as_real(grad).sum() if grad.is_complex() and not t.is_complex() else grad.sum()
    return bool(reached != t.numel())


def lossy_view_refusal(i: int, after: str, why: str = "") -> UnsupportedError:
    why = why or ("eager then follows the view's history regenerated as as_strided() of its base, whose gradient "
                  "reaches those elements too (the history the call was given does not), which a compiled graph "
                  "cannot follow")
    return RefusedCall(
        f"input {i} is an as_strided() view of a view that reaches elements outside it, and {after}: {why}",
        hint='take as_strided() of the base itself, or pass a clone of the view, or pass on_unsupported="eager"')


class RefusedCall(UnsupportedError):
    """Refused before anything ran: with ``on_unsupported="eager"`` the call runs the function eagerly."""


def check_views_of_grad_set(inputs: list, requires_grad_set: tuple, across: tuple = ()) -> None:
    """Refuse a call passing a view of an input the function calls ``requires_grad_()`` on: in eager
    the view requires grad from then on (values computed from it do, an in-place op on it raises),
    while the graph was traced with it as an input that does not. Also one sharing its storage with an input
    whose version the function moves (``t_()``, of it or of a view of it) between the making and a read of a
    view of the first (``across``; fuzz seed 4602338: ``b.requires_grad_(); t0 = b.unsqueeze(0); c.t_()``,
    then ``t0`` read, ``c`` aliasing ``b``): eager regenerates that view's history at the read, which the
    inputs traced apart do not."""
    for i, writers in across:
        storage = inputs[i].untyped_storage().data_ptr()
        for j in writers:
            if storage and inputs[j].untyped_storage().data_ptr() == storage:
                raise RefusedCall(
                    f"requires_grad_() on input {i} of the compiled function, a view of which is read after the "
                    f"function moves the version of input {j}, which shares its storage (t_(), transpose_(), ...): "
                    "eager regenerates that view's history at the read, which the compiled graph does not trace",
                    hint="call requires_grad_() before calling the compiled function, pass distinct tensors "
                         '(e.g. .clone()), or pass on_unsupported="eager"')
    for i in requires_grad_set:
        for j, t in enumerate(inputs):
            if isinstance(t, torch.Tensor) and t._base is inputs[i] and not t.requires_grad:
                raise RefusedCall(
                    f"requires_grad_() on input {i} of the compiled function, while input {j} is a view of it: "
                    "eager's view then requires grad too (and an in-place op on it raises), which the compiled "
                    "graph does not trace", hint="call requires_grad_() before calling the compiled function, "
                    'pass a view of another tensor (e.g. .clone()), or pass on_unsupported="eager"')


def check_storage_sets_apart(inputs: list, sets: tuple) -> None:
    """Note [Inputs given another storage]: an input given another storage must not share its own with
    another input (the graph does not write its old storage, which the other would show)."""
    for i, *_ in sets:
        storage = inputs[i].untyped_storage().data_ptr()
        if storage and any(j != i and isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == storage
                           for j, t in enumerate(inputs)):
            raise RefusedCall(f"input {i} is given another storage (set_(), .data =) and shares its own with "
                              "another input: not supported", hint='pass separate tensors, or pass '
                              'on_unsupported="eager"')


def storage_sources(inputs: list, outs, sets: tuple) -> list:
    """What each input of ``sets`` is set onto: a view of another input, taken with the view ops
    functionalization recorded before any epilogue step changes that input's geometry (differentiable
    where autograd records the ``set_``), or a Function output."""
    sources = []
    for _, j, source, recorded, _ in sets:
        if j is None:
            sources.append(outs[source])
            continue
        with torch.set_grad_enabled(recorded):
            sources.append(replay_views(inputs[j], source))
    return sources


def apply_storage_sets(inputs: list, sources: list, sets: tuple) -> None:
    """Set each input onto its new storage, its version moved as the function moved it; with grad mode
    on where autograd recorded the function's ``set_`` (eager's history, whose backward raises)."""
    for (i, _, _, recorded, delta), source in zip(sets, sources, strict=True):
        target = inputs[i]
        version = target._version
        with torch.set_grad_enabled(recorded):
            target.set_(source)
        torch._C._autograd._unsafe_set_version_counter((target,), (version + delta,))
