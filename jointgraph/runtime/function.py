"""One compiled entry: the autograd.Function around forward/backward, and the call path.

Note [Runtime call path]
------------------------
Everything the call path needs is an index list computed at compile time:
which outputs are user tensors, which inputs were mutated (epilogue ``copy_``),
which outputs need gradients (tangent positions), which inputs receive them.
Saved tensors are stashed on ``ctx`` (not ``save_for_backward``) so the backward
can hand them to the graph in one list that the graph clears as it consumes
them: each saved tensor is freed after its last use. When the autograd engine
keeps the graph (``retain_graph=True``) the stash is kept; otherwise it is
dropped, and a second backward raises as eager does. When ambient
``saved_tensors_hooks`` are active and were not inlined into the graphs (Note [Inlined
saved-tensor hooks] in jointgraph/hooks), saved values go through ``save_for_backward``
so the user's pack/unpack run once per saved tensor, as in eager. Saved tensors that the
user can reach (inputs) record their version and are checked in the backward,
as eager's saved-variable check does; so do user outputs the backward reads (held
weakly: modifying one, or a view of it, in place before the backward raises, as in eager).
Double backward raises (the backward is ``once_differentiable``): a wrong second-order gradient is never returned.
Leaves the function creates are slots the call makes after the aliasing check, extra inputs of the
autograd.Function that receive its gradients (Note [New leaves] in capture/leaves.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.autograd.function import once_differentiable

from ..capture.context import shares_version_counter
from ..capture.inplace import multi_output_view
from ..capture.inputs import unflattener
from ..capture.leaves import make_slot
from ..capture.metadata import (
    MULTI_OUTPUT,
    NO_GRAD_ROOTED,
    NO_GRAD_STALE,
    NO_GRAD_VIEW,
    STALE_VIEW,
    WRITTEN_AFTER,
    replay_views,
)
from ..errors import UnsupportedError, user_source_line
from ..ir.hook_ops import running_hooks
from ..ir.sizes import extent
from .aliasing import check_no_aliasing, refresh_grad_fns
from .epilogue import (
    DataWriteMark,
    apply_metadata_mutations,
    apply_mutations,
    apply_storage_sets,
    autograd_root,
    check_geometry_writes_beside_multi_output_views,
    check_moved_views,
    check_recorded_writes,
    check_stale_views_of_leaf_views,
    check_storage_sets_apart,
    check_view_of_leaf,
    check_views_of_grad_set,
    storage_sources,
    write_target,
)
from .hook_calls import EntryHooks, HookCalls, inputs_needed, register_input_hooks, skipped_hooks

_keep_graph = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", lambda: True)
_top_hooks = torch._C._autograd._top_saved_tensors_default_hooks
_HOOKED = object()  # ctx.stash marker: saved values went through save_for_backward
_set_creation_meta = torch._C._autograd._set_creation_meta
_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", lambda: True)
_MULTI_OUTPUT_NODE = torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE
_FAR_VERSION = 2 ** 30   # a stale view's recorded version, ahead of its counter's: no caller's writes reach it


@dataclasses.dataclass
class EntryLayout:
    """Index lists the call path uses (see Note [Runtime call path])."""

    num_user_tensors: int
    mutated_inputs: tuple[int, ...]
    storage_resizes: tuple[tuple[int, int], ...]  # (input index, final storage bytes)
    backward_mutations: tuple[int, ...]         # Note [Backward mutations] in capture/trace.py
    # (input index, size, stride, storage_offset, view replay or None, recorded by autograd)
    metadata_mutations: tuple[tuple, ...]
    requires_grad_set: tuple[int, ...]          # inputs the function called requires_grad_() on
    mutated_with_grad: tuple[int, ...]          # mutated inputs whose mutation autograd records
    keep_version: tuple[int, ...]               # mutated inputs written only through .data
    version_bumps: tuple[int, ...]              # inputs whose storage saw an in-place op with no new value
    saved_copies: tuple[int, ...]               # saved inputs that are also mutated: saved as copies
    saved_aliases: tuple[int, ...]              # saved inputs whose metadata is mutated: saved as aliases
    num_saved_tensors: int
    num_saved_sizes: int
    tangent_positions: tuple[int, ...]          # among Function outputs (user tensors, then mutated values)
    non_differentiable: tuple[int, ...]         # among Function outputs
    grad_inputs: tuple[bool, ...]               # per graph input: receives a gradient
    # (saved index or -1 where only eager saves it, graph input index, eager saves it, the tangents the
    # backward reads it for or None: Note [Gradients no present tangent reaches])
    saved_input_positions: tuple[tuple[int, int, bool, tuple[int, ...] | None], ...]
    output_plan: tuple[tuple[str, Any], ...]    # per flat user output: ("tensor", k) | ("symbolic", read) | ...
    out_spec: Any
    signature: Any                              # FlatSignature: leaves -> graph inputs
    hooks_inlined: bool = False                 # Note [Inlined saved-tensor hooks] in jointgraph/hooks
    written_with_grad: tuple[int, ...] = ()     # inputs an in-place op autograd records ran on (or on a view)
    written_through_views: tuple[int, ...] = ()  # ... on views of them only: Note [Writes through a view of an input]
    # (mutated input, eager saves it): whose new value our backward reads or eager's saves
    # (Note [Saved mutated inputs])
    saved_mutated: tuple[tuple[int, bool, tuple[int, ...] | None], ...] = ()   # and the tangents it is read for
    # (input, tangents it is read for): Note [Inputs given new data after the call]
    data_read_inputs: tuple[tuple[int, tuple[int, ...] | None], ...] = ()
    watched_views: tuple[tuple[int, tuple[int, ...] | None], ...] = ()   # (flat output, tangents): saved_itself_by
    storage_checked: tuple[int, ...] = ()   # saved slots a .data = after the call makes the backward refuse
    # (input, tangents it is read for) per input an op saved as itself: runtime/aliasing.py's _watch_members
    inputs_saved_itself: tuple[tuple[int, tuple[int, ...] | None], ...] = ()
    early_views: tuple[int, ...] = ()           # input views (flat positions) made before the epilogue
    rebased_early_views: tuple[int, ...] = ()   # ... whose node eager's own write set: read after the epilogue
    set_views: tuple[int, ...] = ()             # ... made after its writes, before it moves inputs (set_)
    # (flat position, input, other inputs written after the view was made): made before the epilogue
    # too when one of the others shares the input's storage in this call (a.copy_(a), a a detach of b)
    early_if_aliased: tuple[tuple[int, int, tuple[int, ...]], ...] = ()
    # (error, user output positions, mutated inputs, multi-output views among the outputs):
    # Note [Errors in the backward]
    backward_error: tuple | None = None
    # (user output, tangents it is read for or None): version-checked in the backward
    # (Note [Version counters of saved outputs])
    outputs_read_by_backward: tuple[tuple[int, tuple[int, ...] | None], ...] = ()
    outputs_only_the_plan_reads: tuple[int, ...] = ()   # Note [Outputs only the plan reads]
    # Note [Which op saved a value] (capture/trace.py): (saved index, user output it is) where the output's op
    # saved it as its own result; and (user output, its saved index or -1, "value" | "both", tangents it is read
    # for or None) for those whose ``.data =`` after the call the backward must see or refuse
    result_outputs: tuple[tuple[int, int], ...] = ()
    data_checked: tuple[tuple[int, int, str, tuple[int, ...] | None], ...] = ()
    # (saved index, sizes, strides) of saved inputs as traced: Note [Saved inputs no present tangent reads]
    saved_geometry: tuple[tuple[int, tuple, tuple], ...] = ()
    new_leaves: tuple = ()                      # Note [New leaves]: a slot made per call, after the inputs
    detach_shared: tuple[int, ...] = ()         # non-differentiable outputs sharing a differentiable one's storage
    # (Function output, input index, size, stride, offset), or (Function output, input index, read) where the
    # geometry is symbolic (read(inputs) gives it per call): Note [Detached aliases written with grad]
    moved_onto_inputs: tuple[tuple, ...] = ()
    no_gradient: tuple[int, ...] = ()           # inputs requiring grad the backward gives none: passed detached
    # Note [Inputs given another storage]: (input, source input or None, view replay or Function output,
    # recorded by autograd, version delta)
    storage_sets: tuple[tuple, ...] = ()
    # Note [Gradients no present tangent reaches]: per graph input, the tangents (positions among
    # tangent_positions) its gradient is computed from, or None; empty when no gradient can be pruned
    grad_tangents: tuple[tuple[int, ...] | None, ...] = ()
    # Function outputs the forward computes (no alias of an input): Note [Outputs that view an intermediate]
    own_outputs: tuple[int, ...] = ()
    distinct_outputs: tuple[tuple[int, int], ...] = ()   # Note [Distinct outputs]
    data_views: tuple[int, ...] = ()            # flat outputs that are views of an input's .data
    counters_of: tuple[tuple[int, int], ...] = ()   # (flat output, input whose version counter it keeps)
    # (flat output, "input" | "output", index): Note [Version counters of outputs]
    counter_shares: tuple[tuple[int, str, int], ...] = ()
    # per graph input, (InputInfo.saved_at, InputInfo.written_at, saved_at per tangent), where the epilogue
    # bumps versions (or empty)
    version_clocks: tuple[tuple[int | None, int | None, tuple[int | None, ...]], ...] = ()
    # (saved input, the other inputs the epilogue copies into, moving their versions, that eager wrote before it
    # saved that input): one sharing its version counter on another storage moves the version eager saved at
    copies_before_saves: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # (input, inputs written before autograd last read it): check_moved_views in runtime/epilogue.py
    read_after_writes: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # (input autograd reads, the inputs written, moving a version, before autograd first read it)
    writes_before_first_reads: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # (input requires_grad_() is called on, inputs whose version moved between the making and a read of a view of it)
    views_read_across_writes: tuple[tuple[int, tuple[int, ...]], ...] = ()
    stale_view_reads: tuple[int, ...] = ()      # InputInfo.stale_view_read: check_stale_views_of_leaf_views
    # (input given new geometry in place, inputs multi-output views were taken of): check_geometry_writes_beside_...
    geometry_writes_beside_multi_views: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # (k, j): flat output k is the object eager returns as output j too (``return t0, t1, t1``; t1 a view)
    same_objects: tuple[tuple[int, int], ...] = ()


def _early_views(layout: EntryLayout, inputs: list) -> tuple[int, ...]:
    """``layout.early_views``, and the views another input written later aliases in this call."""
    def storage(i: int) -> int:
        return inputs[i].untyped_storage().data_ptr()

    def counter(i: int) -> torch.Tensor:   # views share their autograd base's version counter, even when .data
        return autograd_root(inputs[i])    # moved them off its storage (fuzz seed 1503014, through Dynamo)

    aliased = tuple(k for k, i, others in layout.early_if_aliased
                    if storage(i) != 0 and any(storage(j) == storage(i) or counter(j) is counter(i) for j in others))
    return layout.early_views + aliased


class CompiledEntry:
    """A compiled forward (+ backward) and its precomputed call path."""

    def __init__(self, forward: Callable, backward: Callable | None, layout: EntryLayout, plan=None,
                 hooks: EntryHooks | None = None):
        self.forward = forward
        self.backward = backward
        self.layout = layout
        self.plan = plan
        self._input_hooks = hooks.prologue if hooks is not None else ()
        self.function = _make_function(forward, backward, layout, hooks) if backward is not None else None
        self._mutation_check = bool(layout.mutated_inputs)
        # Note [Input mutations]: (input index, output index, record the copy in autograd)
        self._counter_shares = {k: (kind, index) for k, kind, index in layout.counter_shares}
        self._copies = tuple((i, layout.num_user_tensors + k, i in layout.mutated_with_grad, i in layout.keep_version,
                              i in layout.written_through_views) for k, i in enumerate(layout.mutated_inputs))
        self._positions = layout.signature.tensor_leaf_positions
        self._writers_before_reads = tuple(sorted({i for _, written in layout.read_after_writes for i in written}))
        # Inputs whose views are replayed from their geometry before a metadata mutation.
        meta_mutated = {m[0] for m in layout.metadata_mutations}
        self._pre_alias = tuple(sorted({v[1][0] for v in layout.output_plan if v[0] == "input_view"
                                        and v[1][2] is not None and v[1][0] in meta_mutated}))
        self._single_output = layout.out_spec.is_leaf()   # the function returned one tensor
        self._unflatten = unflattener(layout.out_spec)
        self.saved_hooks = None   # the ambient saved_tensors_hooks pair this entry was compiled under

    @property
    def plans(self) -> list:
        """``[plan]``, as ``SubclassEntry.plans`` lists its structures' (``CompiledFunction.plans``)."""
        return [self.plan] if self.plan is not None else []

    @property
    def cacheable(self) -> bool:
        """False when the entry depends on saved-tensor hooks without a stable hash
        (``jointgraph.hooks.cache_hash``): the on-disk cache must skip it."""
        from ..hooks import hook_cache_key

        return self.saved_hooks is None or all(hook_cache_key(h) is not None for h in self.saved_hooks)

    def run_inputs(self, inputs: list) -> list:
        """Run on graph inputs; return the flat user outputs."""
        layout = self.layout
        if layout.requires_grad_set:   # before the aliasing check: a view of the input refuses either way
            check_views_of_grad_set(inputs, layout.requires_grad_set, layout.views_read_across_writes)
        if layout.storage_sets:
            check_storage_sets_apart(inputs, layout.storage_sets)
        if self._mutation_check:
            check_no_aliasing(inputs, layout.mutated_inputs)
            check_recorded_writes(inputs, layout.mutated_with_grad)
        if layout.read_after_writes and torch.is_grad_enabled():
            check_moved_views(inputs, layout.read_after_writes, self._writers_before_reads)
        if layout.geometry_writes_beside_multi_views and torch.is_grad_enabled():
            check_geometry_writes_beside_multi_output_views(inputs, layout.geometry_writes_beside_multi_views)
        if layout.stale_view_reads and torch.is_grad_enabled():
            check_stale_views_of_leaf_views(inputs, layout.stale_view_reads)
        if layout.written_with_grad and torch.is_grad_enabled():
            check_view_of_leaf(inputs, layout.written_with_grad)
        if layout.new_leaves:   # after the aliasing check: a slot may share an input's storage
            inputs = [*inputs, *[make_slot(leaf, inputs) for leaf in layout.new_leaves]]
        for i in layout.requires_grad_set:   # Note [Input mutations]: a prologue, as the user's call did
            inputs[i].requires_grad_()
        if self._input_hooks:
            register_input_hooks(inputs, self._input_hooks)
        # The trace applied the caller's autocast (its casts are nodes of the graph, and regions
        # the function disabled have none): the graph must run as traced, not be cast again.
        if _any_autocast():
            with torch._C._DisableAutocast():
                outs = self._run_graph(inputs)
        else:
            outs = self._run_graph(inputs)
        if layout.storage_resizes:
            for i, nbytes in layout.storage_resizes:   # Note [Storage resize]: before any data copy
                inputs[i].untyped_storage().resize_(nbytes)
        pre = {i: torch.ops.aten.alias(inputs[i]) for i in self._pre_alias} if self._pre_alias else None
        # Views the function took of an input before writing it: made before the epilogue writes, so
        # they are stale views as eager's are (a view made under no_grad then refuses its grad_fn).
        early_views = layout.early_views if not layout.early_if_aliased else _early_views(layout, inputs)
        early = {k: self._view(*layout.output_plan[k], (), outs, inputs, pre, early=True,
                               data=k in layout.data_views)
                 for k in early_views} if early_views else None
        sources = storage_sources(inputs, outs, layout.storage_sets) if layout.storage_sets else None
        sets = layout.storage_sets
        if sources and any(multi_output_view(t) for t in sources):
            sources, sets = _early_storage_sets(inputs, sources, sets, layout.mutated_inputs)
        if layout.metadata_mutations:
            apply_metadata_mutations(inputs, layout.metadata_mutations)
        if self._copies:
            apply_mutations(inputs, outs, self._copies)
        for i in layout.version_bumps:
            torch.autograd.graph.increment_version(inputs[i])
        if layout.set_views:   # views of an input's old storage, taken after the writes into it
            early = early or {}
            early.update((k, self._view(*layout.output_plan[k], (), outs, inputs, pre, early=True,
                                        data=k in layout.data_views)) for k in layout.set_views)
        if sources:
            apply_storage_sets(inputs, sources, sets)
        expecting = None
        if layout.saved_mutated:   # only entries with a backward save anything
            expecting = _expect_versions(outs, inputs, layout.saved_mutated)
        if layout.data_read_inputs:
            _watch_input_storages(outs, inputs, layout.data_read_inputs)
        if layout.moved_onto_inputs:
            _move_onto_inputs(outs, inputs, layout.moved_onto_inputs)
        if layout.backward_error is not None and layout.backward_error[2]:
            before = [t._version for t, *_ in expecting.expected_versions] if expecting is not None else None
            self._raising_inputs(inputs)   # before the views of them are made, as eager's come after the write
            if before:   # its bump is the epilogue's write, not one after the call (fuzz seed 3901993)
                expecting.expected_versions = [(t, v + t._version - b, *rest) for (t, v, *rest), b
                                               in zip(expecting.expected_versions, before, strict=True)]
        flat = []
        shares = self._counter_shares   # Note [Version counters of outputs]
        if shares:
            outs = list(outs)
        for kind, value in layout.output_plan:
            share = shares.get(len(flat)) if shares else None
            if share is not None and kind == "tensor_view" and not (early and len(flat) in early):
                # the base takes the counter, and the view made of it below shares it
                outs[value[0]] = _with_counter_of(_counter_target(share, inputs, flat), outs[value[0]])
                share = None
            if early and len(flat) in early:
                flat.append(early[len(flat)])
            elif kind == "tensor":
                flat.append(outs[value])
            elif kind == "constant":
                flat.append(value)
            elif kind == "input":
                flat.append(inputs[value])
            elif kind == "symbolic":   # a size expression (capture/symbolic.py)
                flat.append(value(inputs))
            else:
                flat.append(self._view(kind, value, flat, outs, inputs, pre, data=len(flat) in layout.data_views))
            if share is not None:
                flat[-1] = _with_counter_of(_counter_target(share, inputs, flat), flat[-1])
        for k, i in layout.counters_of:   # OutputInfo.counter_of: as eager's ``.data =`` left it
            kept = inputs[i].detach()
            kept.data = flat[k]
            flat[k] = kept
        for k, j in layout.same_objects:   # a view is regenerated per output: one object, as eager's (seed 3303383)
            flat[k] = flat[j]
        if layout.watched_views:
            _watch_views(outs, flat, layout.watched_views, layout.output_plan, layout.mutated_with_grad)
        if layout.backward_error is not None:
            flat = self._with_raising_backward(flat, inputs)
        if shares and layout.backward_error is not None:   # the raising node returned copies
            flat = _share_counters(flat, inputs, layout.counter_shares, layout.same_objects)
        if layout.rebased_early_views:
            # eager's view has the node its own recorded write gave it, stale or not: read after the writes, from
            # its base (not from the input it views, which eager leaves stale)
            refresh_grad_fns([flat[k] for k in layout.rebased_early_views])
        return flat

    @staticmethod
    def _view(kind: str, value, flat: list, outs, inputs: list, pre: dict | None, early: bool = False,
              data: bool = False):
        """A view of the caller's tensor ("input_view"), of an earlier output, or of the base the graph
        returned for a view of an intermediate ("tensor_view"), as eager returns it."""
        read = carried = None
        if kind == "symbolic_view":   # its geometry read for this call (capture/symbolic.py)
            kind, index, read, dtype, requires_grad, multi_output = value
            replay = None
        elif kind == "data_view":   # Note [Views with data-dependent geometry] in capture/symbolic.py
            kind, index, carrier, dtype, requires_grad, multi_output = value
            replay, carried = None, outs[carrier].tolist()
        else:
            index, (size, stride, offset, dtype, requires_grad, multi_output), replay = value
        if kind == "output_view":
            base = flat[index]
        elif kind == "tensor_view":
            base = outs[index]
        else:
            base = pre[index] if pre and index in pre else inputs[index]
            if data:   # a view of x.data: a version counter of its own, as eager's
                base = base.data
        if read is not None:
            size, stride, offset = read(inputs, base)
        elif carried is not None:
            rank = (len(carried) - 1) // 2
            size, stride, offset = carried[:rank], carried[rank:2 * rank], carried[-1]
        elif kind in ("output_view", "tensor_view") and replay is None and dtype == base.dtype:
            offset = base.storage_offset() + offset   # relative to the base (api._on_base)
        if base.requires_grad and not requires_grad and not (early and not torch.is_grad_enabled()):
            base = base.detach()   # x.detach(), views under no_grad
        stale = requires_grad and (multi_output in (WRITTEN_AFTER, STALE_VIEW) and torch.is_grad_enabled()
                                   or multi_output == NO_GRAD_STALE and not early)   # under no_grad too (13403240)
        no_grad = multi_output in (NO_GRAD_VIEW, NO_GRAD_STALE, NO_GRAD_ROOTED)   # Note [Views made under no_grad]
        if stale:   # Note [Multi-output views of a written base]: made at a version the counter then leaves and
            # never reaches (version + 1 did, at the caller's next write: the view was fresh again, review of 1e1841a)
            version = base._version
            torch._C._autograd._unsafe_set_version_counter((base,), (version + _FAR_VERSION,))
        try:
            with torch.no_grad() if no_grad else contextlib.nullcontext():
                view = _regenerate_view(base, size, stride, offset, dtype) if replay is None \
                    else replay_views(base, replay)   # replayed: exact whatever the base's real strides
        finally:
            if stale:
                torch._C._autograd._unsafe_set_version_counter((base,), (version,))
        if multi_output in MULTI_OUTPUT and requires_grad and torch.is_grad_enabled():
            _set_creation_meta(view, _MULTI_OUTPUT_NODE)   # unbind / split: in-place raises
        elif multi_output == NO_GRAD_ROOTED and requires_grad and torch.is_grad_enabled():
            view = view.view_as(view)
        return view

    def _run_graph(self, inputs: list):
        if self.function is not None:
            if self.layout.no_gradient:
                inputs = list(inputs)
                for i in self.layout.no_gradient:
                    if inputs[i].requires_grad:
                        inputs[i] = inputs[i].detach()
            return self.function.apply(*inputs)
        with torch.no_grad():   # no differentiable outputs: autograd must not record the graph's ops
            outs = self.forward(*inputs)
            return _distinct(outs, self.layout.distinct_outputs) if self.layout.distinct_outputs else outs

    def _with_raising_backward(self, flat: list, inputs: list) -> list:
        """Note [Errors in the backward]: the outputs eager differentiates, behind a node whose
        backward raises eager's error."""
        error, positions, _, multi_output = self.layout.backward_error
        multi_output = dict(multi_output)
        sources = _raising_sources(inputs)
        if not sources or not torch.is_grad_enabled() or not positions:
            return flat
        # Outputs that are views of one tensor stay views of one tensor: the node returns each
        # distinct base once, and the outputs are taken from it with their own geometry.
        chosen = [flat[k] for k in positions]
        roots = [autograd_root(t) for t in chosen]
        unique = list({id(r): r for r in roots}.values())
        outs = RaisesInBackward.apply(error, len(unique), *sources, *unique)
        outs = _onto_input_storages(unique, outs, inputs)
        _onto_shared_storages(unique, outs, inputs)
        new_root = {id(r): out for r, out in zip(unique, outs, strict=False)}
        by_storage = {_storage(r): (r, out) for r, out in zip(unique, outs, strict=False)}
        flat = list(flat)
        made: dict[int, torch.Tensor] = {}   # one object per object: ``return t, t.t(), t`` (fuzz seed 4403070)
        for k, t in enumerate(flat):   # the chosen outputs, the other views of their bases, their detaches
            if not isinstance(t, torch.Tensor):
                continue
            if id(t) in made:
                flat[k] = made[id(t)]
                continue
            r = autograd_root(t)
            out = new_root.get(id(r))
            if out is None and _storage(t) in by_storage:   # t.detach() of a chosen t: shares its storage
                r, out = by_storage[_storage(t)]
                if not _within(t, r):
                    continue
            if out is None:
                continue
            if t is not r:
                offset = out.storage_offset() + t.storage_offset() - r.storage_offset()
                out = out.as_strided(t.shape, t.stride(), offset)
            flat[k] = out if t.requires_grad or k in positions else out.detach()
            if k in multi_output:   # a chunk() / unbind() output in eager: in-place ops on it raise
                flat[k] = flat[k].view_as(flat[k])
                _set_creation_meta(flat[k], _MULTI_OUTPUT_NODE)
                if multi_output[k]:   # its base written after it was made: reading its grad_fn raises too
                    torch.autograd.graph.increment_version(flat[k])
            made[id(t)] = flat[k]
        return flat

    def _raising_inputs(self, inputs: list) -> None:
        """Note [Errors in the backward]: the mutated inputs take a history whose backward raises, as
        eager's; the write is the epilogue's, so their versions stay as it left them."""
        error, _, mutated, _ = self.layout.backward_error
        sources = _raising_sources(inputs)
        if not sources or not torch.is_grad_enabled():
            return
        outs = RaisesInBackward.apply(error, len(mutated), *sources, *[inputs[i].detach() for i in mutated])
        views = self.layout.written_through_views   # Note [Writes through a view of an input] in epilogue.py
        for i, value in zip(mutated, outs, strict=True):
            target = write_target(inputs[i], i in views)
            if target is not inputs[i]:
                # the version moves: the caller's view must be stale, to take this history when its grad_fn is
                # read (one read since the last bump would otherwise keep the old one; fuzz seed 1100874)
                target.copy_(value)
                continue
            with torch.autograd._unsafe_preserve_version_counter(inputs[i]):
                inputs[i].copy_(value)

    def __call__(self, leaves: list) -> Any:
        flat = self.run_inputs([leaves[p] for p in self._positions])
        if self._single_output:
            return flat[0]
        return self._unflatten(flat)


def _early_storage_sets(inputs: list, sources: list, sets: tuple, mutated: tuple) -> tuple[list, tuple]:
    """Fuzz --semantics12 seed 12002099: ``t0 = a.split(1)[1]; b.set_(t0)``, then a write into ``a``. Eager's
    ``set_`` read the fresh history of the multi-output view; after the epilogue's copy into ``a`` it is stale,
    and autograd's error for it came at the call. Such a recorded ``set_`` of an input the epilogue does not
    write is applied before the copies (the data it then shows is theirs all the same); the others are left."""
    early = [k for k, (entry, source) in enumerate(zip(sets, sources, strict=True))
             if entry[3] and entry[1] is not None and entry[0] not in mutated and multi_output_view(source)]
    if not early:
        return sources, sets
    apply_storage_sets(inputs, [sources[k] for k in early], tuple(sets[k] for k in early))
    rest = [k for k in range(len(sets)) if k not in early]
    return [sources[k] for k in rest], tuple(sets[k] for k in rest)


def _epilogue_bumps(inputs: list, i: int, meta_mutated: frozenset, bumped: frozenset, clocks: tuple,
                    saved_at: int | None, copied: tuple = ()) -> int:
    """How many times the epilogue's as_strided_ / increment_version moves input ``i``'s version counter
    before eager saved it (at ``saved_at``): its own, and those of other inputs sharing its storage in this
    call (a view's counter is its base's). Also the data copies into other inputs written before eager saved
    input ``i`` (``copied``, ``EntryLayout.copies_before_saves``) that share its counter on another storage: an
    autograd view of it, or of its base, given other data by ``.data =`` before the call (``t = base[-1];
    t.data = ...``, then ``t.add_(1); return base * w``). A bump the program made after eager saved input ``i``
    is not counted: eager's backward raises there (``clocks``: Note [When eager saved an input] in
    capture/inplace.py)."""
    if not meta_mutated and not bumped and not copied:
        return 0
    storage = inputs[i].untyped_storage().data_ptr()
    same = sum((j in meta_mutated) + (j in bumped) for j in meta_mutated | bumped
               if (j == i or storage and inputs[j].untyped_storage().data_ptr() == storage)
               and (saved_at is None or clocks[j][1] is None or clocks[j][1] <= saved_at))
    if not copied:
        return same
    root = autograd_root(inputs[i])
    return same + sum(1 for j in copied if autograd_root(inputs[j]) is root
                      and inputs[j].untyped_storage().data_ptr() != storage)


def _by_save_clock(saved_inputs: tuple, clocks: tuple) -> tuple:
    """``saved_inputs`` with eager's first save of each input, split by the clocks its tangents' outputs saved
    it at (a backward from one output alone runs only the nodes on its paths: fuzz seed 1201955)."""
    entries = []
    for s, i, eager_saves, tangents in saved_inputs:
        if not clocks:
            entries.append((s, i, eager_saves, None, tangents))
            continue
        saved_at, _, by_tangent = clocks[i]
        if tangents is None or not by_tangent:
            entries.append((s, i, eager_saves, saved_at, tangents))
            continue
        groups: dict = {}
        for t in tangents:
            groups.setdefault(by_tangent[t], []).append(t)
        entries += [(s, i, eager_saves, clock, tuple(group)) for clock, group in groups.items()]
    return tuple(entries)


def _expect_versions(outs, inputs: list, saved_mutated: tuple) -> Any:
    """Note [Saved mutated inputs]
    ----------------------------
    Eager saves the mutated input itself where the graph saves its new value, so writing the
    caller's tensor after the call makes eager's backward raise. The versions the inputs have
    after the epilogue are what the backward expects; the step's node (``grad_fn`` of its
    outputs is its ctx) keeps them.

    Which inputs are checked is eager's business, not the plan's: the "default" plan keeps what
    eager keeps, so the inputs whose storage its saved values lie in (``_inputs_eager_saves`` in
    api.py) are the ones eager version-checks, and a write after the call raises eager's
    RuntimeError there, whatever our plan saved (min-cut may have saved a value computed from
    the input instead). An input only our plan saves (to recompute from it, where eager kept a
    value computed from it) cannot be read back once written: that raises UnsupportedError,
    naming ``partitioner="default"``, never a version error eager would not raise. Backward
    nodes no gradient needs (the backward of a value no output reaches) save nothing."""
    node = _node_of(outs)
    if node is not None:
        # a token of each input's version counter, not the input: a written input's grad_fn may lead back to this
        # node, and a strong reference would keep both alive (a review of d8b4394: 40 steps of ``a.add_(w);
        # return a.sin()`` held every step's tensors)
        node.expected_versions = [(_version_token(inputs[i]), inputs[i]._version, eager_saves, tangents)
                                  for i, eager_saves, tangents in saved_mutated]
        # Note [Writes through .data between graphs]: eager's backward reads the input itself, ours a copy
        node.data_write_marks = [(DataWriteMark.of(inputs[i]), tangents)
                                 for i, eager_saves, tangents in saved_mutated if eager_saves]
    return node


def _watch_input_storages(outs, inputs: list, data_read: tuple) -> None:
    """Note [Inputs given new data after the call]
    ---------------------------------------------
    Eager's backward reads some inputs as the tensors themselves (``t1 * a`` saves ``a``, after ``a.add_(3)`` too),
    so ``a.data = ...`` (or ``a.set_(...)``) after the call and before the backward makes it read the new data,
    without a version change; a view eager saved (``a.t()`` for ``mm``) or an op's own result (``a.exp_()``) keeps
    the old (``EagerInPlaceChecks.saved_itself`` tells them apart, in the metadata pass). Where the step's stash
    holds a value of its own instead (a written input's new value, or no saved input at all) such a backward
    raises UnsupportedError rather than read the old data; the storages the inputs have after the epilogue are
    what it expects (held weakly). The same for a returned view the runtime regenerates that an op saved as
    itself (``_watch_views``). Where the stash holds the caller's tensor, its backward reads the new data: that is
    eager's reading for an input eager saved itself and nothing else on its storage (no view, no detach, which the
    functional graph does not tell from the input) from which the plan recomputes nothing eager saved
    (``_inputs_read_as_eager`` in api.py); for the others the backward refuses a replaced storage (``ctx.versions``,
    ``EntryLayout.storage_checked``:
    min-cut recomputing from the input what eager saved, or eager's ``a.detach()`` where the plan saves ``a``)."""
    add_watches(_node_of(outs), [_DataWatch(inputs[i], i, tangents, _input_data_replaced) for i, tangents in data_read])


def _node_of(outs) -> Any:
    """The step's backward node: the ``grad_fn`` of the Function's first output that has one (or None)."""
    return next((t.grad_fn for t in outs if isinstance(t, torch.Tensor) and t.grad_fn is not None), None)


def add_watches(node: Any, watches: list) -> None:
    """Give the step's backward ``node`` (if any) more ``_DataWatch``es: its backward refuses where one fires."""
    if node is not None and watches:
        node.watches = [*getattr(node, "watches", ()), *watches]


def step_node(result: Any, inputs: list) -> Any:
    """The compiled step's backward node behind ``result``'s tensors (through the view nodes of the outputs the
    runtime regenerates), never reached through an input's history (``inputs``: an input returned as it is, or a
    view of one, leads to the node of the step that made it), or None."""
    theirs = set()
    for t in inputs:
        try:
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                theirs.add(id(t.grad_fn))
        except RuntimeError:   # a stale multi-output view refuses its grad_fn (fuzz --semantics12 seed 8802812)
            continue
    for t in pytree.tree_leaves(result):
        try:
            node = t.grad_fn if isinstance(t, torch.Tensor) else None
        except RuntimeError:   # a stale multi-output view refusing its grad_fn
            continue
        for _ in range(3):
            if node is None or id(node) in theirs or hasattr(node, "stash"):
                break
            node = next((n for n, _ in node.next_functions if n is not None), None)
        if node is not None and id(node) not in theirs and hasattr(node, "stash"):
            return node
    return None


def _watch_views(outs, flat: list, watched: tuple, plan: tuple, written: tuple) -> None:
    """Note [Inputs given new data after the call]: the same for returned views the runtime regenerates (of an input,
    or of an intermediate's base) that an op saved as themselves: the stash holds the graph's value, not the view.
    A view of an input is held strongly, as eager's saved variable holds it (its history leads to the input, not
    to the step's node: no cycle): one that dies after ``.data =`` (a Dynamo frame's local, fuzz seed 11704458:
    ``t0 = a.t(); t1 = t0.cos(); t0.data = ...``) leaves no storage to compare otherwise, the input's own
    keeping the old one alive. Not one of an input written with grad (``written``), whose history may lead back
    to the step's node."""
    add_watches(_node_of(outs), [_DataWatch(flat[k], k, tangents, _view_data_replaced,
                                            hold=plan[k][0] == "input_view" and plan[k][1][0] not in written)
                                 for k, tangents in watched if isinstance(flat[k], torch.Tensor)])


# Note [Outputs only the plan reads]
# ---------------------------------
# A plan may save a user output (or its base, or a view of it: the user holds that memory anyway) and
# recompute from it what eager saved itself, where eager's backward reads nothing on the output's memory
# (fuzz --semantics12 seed 9001724, through Dynamo: ``t0 = b @ b`` returned, relu's result recomputed from
# it). An in-place write into the output after the call is then no error in eager, and its backward reads
# the values of the call; ours would read the new ones. The runtime keeps a token of each such output's
# version counter (Note [Version counters of saved outputs]); a backward that finds it moved refuses by
# name rather than compute with the written values.


def _output_only_the_plan_reads_written(k: int) -> UnsupportedError:
    return UnsupportedError(
        f"output {k} of the compiled function was modified in place after the call, and the compiled backward "
        "recomputes from its memory what eager saved apart from it: eager's backward reads the values of the "
        "call, ours would read the new ones: not supported", source=user_source_line(),
        hint="modify a clone of the output (out = out.clone()), or run the backward first")


def _member_data_replaced(i: int) -> UnsupportedError:
    return UnsupportedError(
        f"input {i}, which shares its storage with another input the function writes and which an op saved as "
        "itself, was given another storage (.data =, set_()) after the call: eager's backward reads the new data, "
        "the compiled step ran on one base of those inputs and saved the values of the call: not supported",
        source=user_source_line(),
        hint="run the backward before replacing the input's data, or pass distinct tensors (e.g. .clone())")


def _input_data_replaced(i: int) -> UnsupportedError:
    return UnsupportedError(
        f"input {i} was given another storage (.data =, set_()) after the call, and eager's backward reads the input "
        "itself (an op saved it), so it would compute with the new data; the compiled backward saved the values of "
        "the call: not supported",
        source=user_source_line(),
        hint="run the backward before replacing the input's data, or assign to a clone")


# Note [Version counters of outputs]
# ---------------------------------
# Eager's output may share the version counter of an input or of another output without being a view the
# runtime regenerates on it: ``t = x.detach(); t.copy_(y); return t`` (a detached alias written with grad,
# which the graph returns as a value of its own and the runtime moves onto ``x``'s storage), ``t = b[0];
# t.set_(a); return t`` (b's counter, a's storage), views of one intermediate behind the node that raises in
# the backward. A write through such an output after the call moves the other's version in eager, so a backward
# that saved it raises, and a multi-output view's grad_fn can no longer be read. The trace records, per output,
# the first input or earlier output whose counter it shares (``OutputInfo.shares_counter``); where the runtime's
# output does not share it, the output is replaced by a ``detach()`` of that tensor (its counter) set onto the
# output's memory and geometry, which takes the output's history through ``_TakesHistory`` when it requires
# grad. Its version is left as it was: set_() counts as a write.


class _TakesHistory(torch.autograd.Function):
    """``alias`` (a tensor without history, sharing ``value``'s memory) takes ``value``'s history: the gradient
    flowing into ``alias`` is ``value``'s."""

    @staticmethod
    def forward(ctx, alias, value):
        ctx.mark_dirty(alias)
        return alias

    @staticmethod
    def backward(ctx, grad):
        return None, grad


def _share_counters(flat: list, inputs: list, shares: tuple, same_objects: tuple) -> list:
    """Note [Version counters of outputs]."""
    flat = list(flat)
    for k, kind, index in shares:
        flat[k] = _with_counter_of(_counter_target((kind, index), inputs, flat), flat[k])
    for k, j in same_objects:
        flat[k] = flat[j]
    return flat


def _counter_target(share: tuple[str, int], inputs: list, flat: list):
    kind, index = share
    return inputs[index] if kind == "input" else flat[index]


def _with_counter_of(target: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``out``'s memory, geometry and history on a tensor sharing ``target``'s version counter (Note [Version
    counters of outputs]); ``out`` itself where that cannot be made (another dtype, a subclass, no tensor) or is so
    already (``target`` itself)."""
    if out is target or type(out) is not torch.Tensor or type(target) is not torch.Tensor \
            or out.layout != torch.strided or out.dtype != target.dtype or out.device != target.device \
            or target.is_inference() or out.is_inference() or shares_version_counter(target, out):
        return out
    alias = target.detach()
    version = alias._version
    with torch.no_grad():
        alias.set_(out.untyped_storage(), out.storage_offset(), out.shape, out.stride())
    torch._C._autograd._unsafe_set_version_counter((alias,), (version,))
    if out.requires_grad and torch.is_grad_enabled():
        alias = _TakesHistory.apply(alias, out)
        torch._C._autograd._unsafe_set_version_counter((alias,), (version,))
    return alias


def _move_onto_inputs(outs, inputs: list, moved: tuple) -> None:
    """Note [Detached aliases written with grad]
    ----------------------------------------
    ``t = x.detach(); t.copy_(y); return t`` with ``y`` requiring grad: eager's ``t`` shares
    ``x``'s storage, yet requires grad with a history of its own (into ``y``), not ``x``'s; no
    view of ``x`` has that history. The graph returns ``t``'s value as a differentiable output,
    and after the epilogue has written ``x`` the output is moved onto ``x``'s storage with
    ``t``'s geometry (under no_grad, as eager's alias is no view in autograd's sense). The values
    are equal: the epilogue wrote the same ones there. Its version stays what the backward expects
    of it."""
    for k, i, *geometry in moved:   # offset: relative to the input's (metadata._moved_onto_input)
        size, stride, offset = geometry if len(geometry) == 3 else geometry[0](inputs)   # symbolic: read this call's
        _set_keeping_version(outs[k], inputs[i].untyped_storage(), inputs[i].storage_offset() + offset, size, stride)


def _set_keeping_version(out: torch.Tensor, storage, offset: int, size, stride) -> None:
    """``out`` moved onto ``storage`` with that geometry under no_grad, its version counter as it was."""
    version = out._version
    with torch.no_grad():
        out.set_(storage, offset, size, stride)
    torch._C._autograd._unsafe_set_version_counter((out,), (version,))


def _onto_input_storages(roots: list, outs, inputs: list) -> list:
    """Note [Errors in the backward]: the node returns copies; a root that lies in an input's storage
    (an input, a view of one, ``x.detach()`` written with a value that requires grad) is moved back
    onto that storage, as eager's output shares it (writes through the output reach the input), and
    shares that input's version counter, as eager's does (Note [Version counters of outputs])."""
    storages = {}
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.numel() > 0:
            storages.setdefault(_storage(t), t)
    outs = list(outs)
    for k, (r, out) in enumerate(zip(roots, outs, strict=False)):
        if r.numel() > 0 and _storage(r) in storages:
            _set_keeping_version(out, r.untyped_storage(), r.storage_offset(), r.shape, r.stride())
            outs[k] = _with_counter_of(storages[_storage(r)], out)
    return outs


def _onto_shared_storages(roots: list, outs, inputs: list) -> None:
    """Note [Errors in the backward]: roots that share a storage of the function's own (``t0.view(-1), t0``
    where the graph returns both, fuzz seed 703009) are moved onto one copy of that storage, as eager's
    outputs share theirs; those on an input's storage are moved back onto it by ``_onto_input_storages``."""
    inputs_at = {_storage(t) for t in inputs if isinstance(t, torch.Tensor) and t.numel() > 0}
    groups: dict[int, list] = {}
    for r, out in zip(roots, outs, strict=False):
        if r.numel() > 0 and _storage(r) not in inputs_at:
            groups.setdefault(_storage(r), []).append((r, out))
    for group in groups.values():
        if len(group) > 1:
            storage = group[0][0].untyped_storage().clone()   # every root's values, where they lie
            for r, out in group:
                _set_keeping_version(out, storage, r.storage_offset(), r.shape, r.stride())


def _regenerate_view(base: torch.Tensor, size, stride, offset, dtype) -> torch.Tensor:
    """A differentiable view of ``base`` with the given geometry, in units of ``dtype``."""
    if dtype == base.dtype:
        return base.as_strided(size, stride, offset)
    if base.is_complex() and dtype == base.real.dtype:      # .real, .imag, view_as_real
        return torch.view_as_real(base).as_strided(size, stride, offset)
    if dtype.is_complex and torch.empty(0, dtype=dtype).real.dtype == base.dtype:   # view_as_complex
        real = base.as_strided((*size, 2), (*(2 * s for s in stride), 1), 2 * offset)
        return torch.view_as_complex(real)
    return base.view(dtype).as_strided(size, stride, offset)   # view(dtype): not differentiable


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _within(t: torch.Tensor, r: torch.Tensor) -> bool:
    """``t``'s elements lie in the storage span ``r``'s copy (same strides) has."""
    if t.numel() == 0:
        return True
    low = t.storage_offset() - r.storage_offset()
    return low >= 0 and extent(t.shape, t.stride(), low) <= extent(r.shape, r.stride(), 0) and \
        all(st >= 0 for st in t.stride())


def _raising_sources(inputs: list) -> list:
    """The inputs requiring grad the node whose backward raises hangs off: not a stale multi-output view
    (an ``unbind`` / ``split`` output whose base was written, which refuses its grad_fn: fuzz seed 500776,
    where Dynamo passed one into the next graph; eager would raise only in the backward). A view whose base
    requires grad is represented by its base: reading the view's ``grad_fn`` would regenerate it, where eager
    leaves it stale (Note [Writes through a view of an input] in runtime/epilogue.py)."""
    sources, seen = [], set()
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.requires_grad:
            if t._base is not None and t._base.requires_grad:
                t = t._base
            if id(t) in seen:
                continue
            try:
                t.grad_fn   # noqa: B018 (autograd checks a view's version here)
            except RuntimeError:
                continue
            seen.add(id(t))
            sources.append(t)
    return sources


class RaisesInBackward(torch.autograd.Function):
    """Note [Errors in the backward]
    -----------------------------
    Eager raises some autograd errors only when the backward runs: a value saved for the
    backward was modified in place afterwards (``y = x * w; w.add_(1); return y``). Tracing
    the backward hits the same error at compile time. The entry is then traced once more with
    each output's backward taken apart (``ErrorProbe`` in capture/trace.py): the outputs (and
    recorded input mutations) whose own backward raises come out of this node, whose backward
    raises the error eager would, with eager's type and message; the others keep the compiled
    backward (``y = x @ w; x.add_(1); return y, w * 2``: only ``y`` raises). When every one
    raises, the entry is compiled without a backward. A call that never runs the backward
    works, as in eager.
    """

    @staticmethod
    def forward(ctx, error, n_outputs, *tensors):
        ctx.error = error
        ctx.set_materialize_grads(False)
        # Copies with the same strides: the caller's views are taken from them by geometry.
        return tuple(torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)
                     for t in tensors[len(tensors) - n_outputs:])

    @staticmethod
    def backward(ctx, *grads):
        if all(g is None for g in grads):
            # reached only through a step node that gave it no gradient (Dynamo passes these outputs on to the
            # next graph, whose node also computes other outputs): eager's node is not on that path (seed 504074)
            return (None,) * len(ctx.needs_input_grad)
        error = ctx.error
        raise type(error)(*error.args)


# Note [Outputs that view an intermediate]
# ---------------------------------------------
# A forward graph may return a view of a tensor it made (the new value of an intermediate written
# through a view of it is a ``transpose`` of the scatter's result). autograd.Function marks such an
# output as a view made inside a custom Function, and so every view the runtime takes of it
# (``t1[1:]`` after ``t1 = t0.t(); t1[1] = 3.0``, fuzz seeds 160443, 160525): writing the user's
# output in place then raises, where eager's is an ordinary view. Those outputs leave the forward
# as ``detach()``es, which share the memory without being views in autograd's sense, and share the
# version counter too, as eager's view shares its base's: ``t3 = t0.unbind(0)[0]; return t3.detach(), t3``
# written through the detach after the call makes reading ``t3.grad_fn`` raise, as eager's (fuzz
# --semantics12 seed 12204874; an ``_unsafe_view`` had a counter of its own).


# Note [Distinct outputs]
# -----------------------
# ``return t.detach(), t``: the functional graph has no detach, so it returns one value twice, and the
# runtime returned one tensor object for both; ``requires_grad_()`` on the first then changed the
# second too (fuzz seed 160160, through Dynamo, whose first graph returns ``t.detach()`` and ``t``).
# The trace knows which user outputs eager returns as one object (``return y, y``:
# ``OutputInfo.same_object``); the others get a tensor of their own sharing the memory. So does a user
# output whose value is also a mutated input's new value (``a.mul_(2); t = a.detach(); t[0] = a.sum();
# return t``): returned as one object, autograd would send ``t``'s gradient through the mutation's history.


# Note [Version counters of saved outputs]
# ----------------------------------------
# Eager's saved output keeps the output's version counter, not the tensor (which would make a cycle
# output -> grad_fn -> output): a write after the call through any alias sharing the counter
# (``t0.detach().mul_(2)``) makes the backward raise even when the output object itself is gone, as
# it is at a Dynamo graph break whose next graph returns only ``t0.detach()`` (fuzz seed 5902826).
# A weak reference to the output, as the runtime held before, lost the check with the output; the
# output itself, or a view of it, would keep its memory alive where the plan recomputes it. The
# runtime keeps the shallow copy the stash holds of an output its op saved (Note [Which op saved a value]),
# and for the others a token: a detached alias moved onto an empty storage (``set_``), which keeps the
# output's version counter and nothing else; ``set_`` counts as a write, so the counter is put back.


def _version_token(t: torch.Tensor) -> torch.Tensor:
    """A tensor sharing ``t``'s version counter but not its memory (Note [Version counters of saved outputs])."""
    token = t.detach()
    if type(token) is not torch.Tensor or token.layout is not torch.strided:   # a subclass's set_ is its own, a
        return token   # sparse tensor has none: keep the alias (it holds the memory until the backward)
    version = t._version
    token.set_()   # no grad to record: a detached tensor
    torch._C._autograd._unsafe_set_version_counter((token,), (version,))
    return token


def _distinct(outs, positions: tuple[tuple[int, int], ...]) -> list:
    outs = list(outs)
    for k, same in positions:
        # a detach: a tensor of its own sharing the memory and the version counter, as eager's ``t.detach()``
        # and ``t`` do (--semantics12 seed 9500302: a write into one moves the other's version)
        outs[k] = outs[k].detach() if same < 0 else outs[same]
    return outs


# Note [Gradients no present tangent reaches]
# ------------------------------------------
# One autograd node stands for the whole step, where eager has a node per op. When the backward
# runs from some outputs only (``b.sum().backward()`` after ``t0 = f(a, b)`` wrote ``b``), eager
# never visits the ops that lead only to the other outputs; our node is called with None for
# their gradients. A gradient computed only from absent tangents is zero: returning zeros would
# make the engine run the nodes behind that input (whose saved values may have been modified:
# a version error eager does not raise, fuzz seed 150108) and give a leaf a zero ``.grad`` where
# eager leaves None. ``EntryLayout.grad_tangents`` (from the backward graph, ``gradient_tangents``)
# says which tangents each gradient is computed from, or reaches along autograd's graph carrying a gradient (Note
# [Tangents that reach a node] in capture/trace.py: a backward reading no gradient, an empty view's, still leads on);
# gradients no present one reaches are returned as None. The
# engine still calls the nodes behind them, with no gradient at all (it schedules by the graph,
# not by what flowed): a step node called so returns None at once, without its version checks.


def _recomputed_from_written_input(s: int | None, now: int, expected: int, moved: bool = False,
                                   through_data: bool = False) -> UnsupportedError:
    """Note [Saved mutated inputs]: the plan saved an input (``s``: its saved index; None: the new value
    the function wrote) to recompute from it in the backward where eager kept a value computed from
    it; an in-place write after the call (or ``moved``: ``.data =`` or ``set_()``) destroyed it."""
    which = f"saved input {s}" if s is not None else "an input the function wrote"
    what = "given another storage after the call (.data =, set_())" if moved else \
        "written through .data after the call, by a later compiled graph (Note [Writes through .data between " \
        "graphs])" if through_data else \
        f"modified in place after the call (version {now}, expected {expected}: a write, or an in-place view " \
        "op such as unsqueeze_())"
    return UnsupportedError(
        f"an input the plan recomputes from in the backward ({which}) was {what}; "
        "eager kept a copy of it, a view of it or a value computed from it instead, and the plan cannot tell its "
        "old contents are intact",
        source=user_source_line(),
        hint="run the backward before the in-place op, or modify a clone of the input; "
             'partitioner="default" keeps what eager keeps, except a copy eager made of an input')


def _written_input_written_through_data() -> UnsupportedError:
    """Note [Writes through .data between graphs]: eager's backward reads an input the function wrote as the
    tensor itself; ours reads a copy of the value the call left, and a later graph wrote the input's memory."""
    return UnsupportedError(
        "an input the compiled function wrote, which eager's backward reads as it is, was written through .data "
        "after the call by a later compiled graph (Note [Writes through .data between graphs]): eager's backward "
        "reads the new values, ours keeps the values the call left",
        source=user_source_line(),
        hint="run the backward before writing through .data, or write under torch.no_grad() instead")


def _view_data_replaced(k: int) -> UnsupportedError:
    return UnsupportedError(
        f"output {k} of the compiled function, a view or alias an op saved as itself, was given another storage "
        "after the call (.data =, set_()): eager's backward reads its new data, the compiled backward the values of "
        "the call: not supported", source=user_source_line(),
        hint="assign .data after the backward, or write the new values in place under torch.no_grad()")


class _DataWatch:
    """Notes [Which op saved a value], [Inputs given new data after the call]: whether output (or input) ``k`` was
    given another storage (``.data =``, ``set_()``) after the call; ``error(k)`` is the refusal the backward raises
    then, where one of ``tangents`` (None: any) came. Held weakly (a strong reference would make a cycle output ->
    grad_fn -> ctx -> output); when the tensor dies first (a Dynamo frame's local, fuzz seed 3603614), its weak
    reference's callback, which runs before the tensor lets go of its storage, records whether that storage was
    still the one it had."""

    __slots__ = ("output", "storage", "k", "tangents", "error", "moved", "held")

    def __init__(self, output: torch.Tensor, k: int, tangents: tuple[int, ...] | None,
                 error: Callable[[int], UnsupportedError], hold: bool = False):
        self.storage = weakref.ref(output.untyped_storage())
        self.output = weakref.ref(output, self._died)
        self.k, self.tangents, self.error, self.moved = k, tangents, error, False
        self.held = output if hold else None   # _watch_views: a view of an input, as eager's saved variable

    def fires(self, present: list) -> bool:
        return (self.tangents is None or any(present[t] for t in self.tangents)) and self.replaced()

    def _died(self, _ref) -> None:
        self.moved = self.storage() is None

    def replaced(self) -> bool:
        output = self.output()
        return self.moved if output is None else output.untyped_storage() is not self.storage()


def _data_replaced(k: int) -> UnsupportedError:
    """Note [Which op saved a value]: output ``k`` was given other memory after the call, and the backward reads it."""
    return UnsupportedError(
        f"output {k} of the compiled function was given another storage after the call (.data =, set_()) and "
        "the backward reads it: eager's backward reads the new value where an op kept it as an argument and the "
        "old one where an op kept it as its own result or kept a view of it; the plan keeps one value for both",
        source=user_source_line(),
        hint="assign .data after the backward, or write the new values in place under torch.no_grad()")


# Note [Saved inputs no present tangent reads]
# ---------------------------------------------
# A backward run from some outputs only skips the version checks of saved inputs read only for the others'
# gradients (eager never runs their nodes), but our one graph still computes those gradients, from zeros,
# and drops them. A saved input an in-place view op changed after the call (``b.transpose_(0, 1)`` at a
# Dynamo graph break, fuzz seed 6004284) no longer has the geometry the graph was traced with: the graph
# raised a size mismatch where eager raises nothing. Such a value is replaced by zeros of its traced
# geometry: what it computes is dropped anyway.


def _stand_in(stash: list, s: int, size: tuple, stride: tuple) -> list:
    value = stash[s]
    if tuple(value.shape) == size and tuple(value.stride()) == stride:
        return stash
    stash = list(stash)
    stash[s] = torch.empty_strided(size, stride, dtype=value.dtype, device=value.device).zero_()
    return stash


def _zeros_for_absent(grads: tuple, positions: tuple, like: list) -> list:
    """``grads`` with zeros where autograd passed None (what it does itself by default)."""
    grads = list(grads)
    for i, (shape, dtype, device) in zip(positions, like, strict=True):
        if grads[i] is None:
            grads[i] = torch.zeros(shape, dtype=dtype, device=device)
    return grads


def _make_function(forward: Callable, backward: Callable, layout: EntryLayout, hooks: EntryHooks | None) -> type:
    n_user = layout.num_user_tensors
    n_fw_outs = n_user + len(layout.mutated_inputs)
    n_saved = layout.num_saved_tensors
    tangent_positions = layout.tangent_positions
    non_diff = layout.non_differentiable
    grad_mask = layout.grad_inputs
    # (saved index, input, eager saves it, eager's first save of it, the tangents it is read for): one entry per
    # group of tangents whose outputs eager saved it for at one clock (Note [When eager saved an input])
    saved_inputs = _by_save_clock(layout.saved_input_positions, layout.version_clocks)
    read_outputs = layout.outputs_read_by_backward
    plan_read_outputs = layout.outputs_only_the_plan_reads
    geometry = {s: (size, stride) for s, size, stride in layout.saved_geometry}
    result_outputs = layout.result_outputs
    storage_checked = frozenset(layout.storage_checked)   # Note [Inputs given new data after the call]
    data_checked = layout.data_checked
    saved_copies = layout.saved_copies
    saved_aliases = layout.saved_aliases
    bw_mutated = layout.backward_mutations
    n_grads = len(grad_mask)
    hooks_inlined = layout.hooks_inlined
    meta_mutated = frozenset(m[0] for m in layout.metadata_mutations)
    bumped = frozenset(layout.version_bumps)   # the epilogue's increment_version is not the user's write after
    clocks = layout.version_clocks
    copies_before = dict(layout.copies_before_saves)
    moved = {m[0]: m[-1] for m in layout.storage_sets}   # ... nor its set_ (Note [Inputs given another storage])
    detach_shared = layout.detach_shared
    reach = hooks.reach if hooks is not None else ()   # Note [Hooks eager does not reach]
    edges = hooks.edges if hooks is not None else ()
    grad_tangents = layout.grad_tangents
    own_outputs = layout.own_outputs
    distinct_outputs = layout.distinct_outputs
    absent_grads = bool(tangent_positions)   # autograd passes None for outputs no gradient flows into

    class CompiledStep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            outs = forward(*inputs)
            if any(outs[k]._base is not None for k in own_outputs):   # Note [Outputs that view an intermediate]
                outs = [t.detach() if k in own_outputs and t._base is not None else t
                        for k, t in enumerate(outs)]
            if distinct_outputs:
                outs = _distinct(outs, distinct_outputs)
            saved = outs[n_fw_outs:n_fw_outs + n_saved]
            if saved_copies or saved_aliases:
                saved = list(saved)
                for s in saved_copies:
                    if saved[s].untyped_storage().nbytes():   # a freed (zero-size) storage has no value
                        saved[s] = saved[s].clone()
                for s in saved_aliases:
                    saved[s] = torch.ops.aten.alias(saved[s])
            hooked = not hooks_inlined and _top_hooks(False) is not None
            holders = {}   # outputs whose shallow copy the stash keeps: it shares their version counter
            if result_outputs and not hooked:   # Note [Which op saved a value]: an op's own result is kept as a
                saved = list(saved)             # shallow copy (save_for_backward does so itself for an output)
                for s, k in result_outputs:
                    if saved[s] is outs[k]:
                        saved[s] = holders[k] = saved[s].detach()
            if data_checked:
                ctx.watches = [_DataWatch(outs[k], k, tangents, _data_replaced)
                               for k, s, style, tangents in data_checked
                               if style == "both" or hooked or s < 0 or saved[s] is not outs[k]]
            if hooked:
                # Ambient saved_tensors_hooks: let autograd pack/unpack each saved value, as eager does.
                ctx.save_for_backward(*saved)
                ctx.stash = _HOOKED
            else:
                ctx.stash = list(saved)
            ctx.sizes = list(outs[n_fw_outs + n_saved:])
            if saved_inputs:   # the epilogue's own as_strided_ (a metadata mutation) is not the user's write
                ctx.versions = [(s, inputs[i], inputs[i]._version + moved.get(i, 0)
                                 + _epilogue_bumps(inputs, i, meta_mutated, bumped, clocks, saved_at,
                                                   copies_before.get(i, ())),
                                 eager_saves,
                                 tangents,
                                 weakref.ref(inputs[i].untyped_storage()) if s in storage_checked and i not in moved
                                 else None,
                                 DataWriteMark.of(saved[s]) if s in storage_checked and s >= 0 else None)
                                for s, i, eager_saves, saved_at, tangents in saved_inputs]
            if read_outputs or plan_read_outputs:   # Notes [Version counters of saved outputs], [Outputs only the
                # plan reads]: (counter, version, tangents, None | the output eager's backward reads nothing of)
                ctx.output_versions = [(holders[k] if k in holders else _version_token(outs[k]), outs[k]._version,
                                        tangents, None) for k, tangents in read_outputs] + \
                    [(_version_token(outs[k]), outs[k]._version, None, k) for k in plan_read_outputs]
            if bw_mutated:
                ctx.bw_targets = [inputs[i] for i in bw_mutated]
            if non_diff:
                if detach_shared:   # EntryLayout.detach_shared: marking must not take the others' gradient
                    outs = list(outs)
                    for i in detach_shared:
                        outs[i] = outs[i].detach()
                ctx.mark_non_differentiable(*[outs[i] for i in non_diff])
            if absent_grads:   # absent gradients stay None: what eager would not reach is skipped
                ctx.set_materialize_grads(False)
                if len(tangent_positions) > 1:   # with one, it is present or the backward returns at once
                    ctx.tangent_like = [(outs[i].shape, outs[i].dtype, outs[i].device) for i in tangent_positions]
            return tuple(outs[:n_fw_outs])

        @staticmethod
        @once_differentiable
        def backward(ctx, *grads):
            present = [grads[i] is not None for i in tangent_positions]
            if absent_grads and not any(present):
                return (None,) * n_grads   # reached only through another output of ours: eager never runs it
            stash = ctx.stash
            if stash is _HOOKED:
                stash = list(ctx.saved_tensors)
            elif stash is None:
                raise RuntimeError(
                    "Trying to backward through the graph a second time (or directly access saved tensors "
                    "after they have already been freed). Specify retain_graph=True if you need to backward "
                    "through the graph a second time.")
            if saved_inputs:
                for s, tensor, version, eager_saves, tangents, storage, writes in ctx.versions:
                    if tangents is not None and not any(present[t] for t in tangents):
                        if s in geometry:   # eager's node never runs (a .data = moves no version)
                            stash = _stand_in(stash, s, *geometry[s])
                        continue
                    if tensor._version != version and not eager_saves:
                        raise _recomputed_from_written_input(s, tensor._version, version)
                    if storage is not None and tensor.untyped_storage() is not storage():   # .data =, set_()
                        raise _recomputed_from_written_input(s, tensor._version, version, moved=True)
                    if writes is not None and writes.written():   # a later step's write through .data
                        raise _recomputed_from_written_input(s, tensor._version, version, through_data=True)
                    if tensor._version != version:
                        which = f"saved input {s}" if s >= 0 else "an input eager saves"
                        raise RuntimeError(
                            "one of the variables needed for gradient computation has been modified by an "
                            f"inplace operation: {which} is at version {tensor._version}; expected "
                            f"version {version} instead.")
            for tensor, version, eager_saves, tangents in getattr(ctx, "expected_versions", ()):
                if tangents is not None and not any(present[t] for t in tangents):
                    continue   # read only for gradients that did not come (fuzz seed 503064)
                if tensor._version != version and not eager_saves:
                    raise _recomputed_from_written_input(None, tensor._version, version)
                if tensor._version != version:
                    raise RuntimeError(
                        "one of the variables needed for gradient computation has been modified by an inplace "
                        f"operation: an input the compiled function wrote is at version {tensor._version}; "
                        f"expected version {version} instead.")
            for mark, tangents in getattr(ctx, "data_write_marks", ()):
                if (tangents is None or any(present[t] for t in tangents)) and mark.written():
                    raise _written_input_written_through_data()
            for tensor, version, tangents, plan_only in getattr(ctx, "output_versions", ()):
                if tangents is not None and not any(present[t] for t in tangents):
                    continue   # read only for gradients that did not come: eager's node never runs
                if tensor._version != version and plan_only is not None:
                    raise _output_only_the_plan_reads_written(plan_only)
                if tensor._version != version:   # as eager's saved-variable check: eager's backward reads it
                    raise RuntimeError(
                        "one of the variables needed for gradient computation has been modified by an "
                        f"inplace operation: an output of the compiled function is at version "
                        f"{tensor._version}; expected version {version} instead.")
            for watch in getattr(ctx, "watches", ()):   # Notes [Which op saved a value], [Inputs given new data ...]
                if watch.fires(present):   # read only for gradients that came: eager's node ran
                    raise watch.error(watch.k)
            if not _keep_graph():
                ctx.output_versions = ()   # a holder shares the memory of a saved value: freed with it
                if ctx.stash is not _HOOKED:
                    ctx.stash = None
            args = [*ctx.sizes, *stash]
            del stash
            if absent_grads and not all(present):
                grads = _zeros_for_absent(grads, tangent_positions, ctx.tangent_like)
            for i in tangent_positions:
                g = grads[i]
                args.append(g if g.is_contiguous() else g.contiguous())
            del grads
            if reach:
                calls = HookCalls(hooks.fns, skipped_hooks(reach, present, inputs_needed(ctx.next_functions, edges)))
                with running_hooks(calls):
                    result = backward(args)
            else:
                result = backward(args)
            if bw_mutated:
                with torch.no_grad():
                    for target, value in zip(ctx.bw_targets, result[n_grads:], strict=True):
                        target.copy_(value)
                result = result[:n_grads]
            if grad_tangents:
                result = [None if deps is not None and not any(present[t] for t in deps) else g
                          for g, deps in zip(result, grad_tangents, strict=True)]
            return tuple(g if need else None for g, need in zip(result, grad_mask, strict=True))

    CompiledStep.tangent_positions = tangent_positions   # its node's (_forward_cls): aliasing._check_empty_members
    return CompiledStep
