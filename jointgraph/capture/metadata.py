"""What a function does to its inputs and what its outputs are: the metadata pass.

Note [Input mutations]
----------------------
A first, untraced run of the function on functional fakes (``collect_metadata``)
records, per input:

* whether its data was mutated, and whether autograd recorded the mutation. A
  mutation is recorded when the input's ``grad_fn`` changed during the call
  (``x.mul_(w)`` under grad mode); it is hidden when it happened under ``no_grad``,
  through ``x.detach()`` or ``x.data``. A recorded mutation's new value is a
  differentiable output and the epilogue's ``copy_`` runs with grad mode on, so the
  caller's tensor takes the mutation's history (an input that did not require grad
  and was written with a value that does, ``x.add_(y)``, now requires grad, as in
  eager); a hidden one is copied under ``no_grad`` (the optimizer / EMA pattern on a
  leaf parameter).
* metadata mutations (``t_()``, ``unsqueeze_()``, ``as_strided_()``): the sequence of
  view ops from the input to its final geometry is recorded and replayed on the
  caller's tensor (view replay), which is exact whatever the caller's strides and
  offset; ``as_strided_`` then gives the caller's tensor that geometry, recorded by
  autograd when the input requires grad.
* ``requires_grad_()`` on an input: the runtime sets it on the caller's tensor before
  the forward runs (a prologue), and the input gets a gradient.
* storage resizes (Note [Storage resize]) and storage swaps (``set_``).

Outputs that alias an input are returned as views of the caller's tensor. Their view
ops are replayed from the input, not re-derived from the functional tensor's
strides: after a data mutation those are the strides of the new value, not of the
caller's storage (a transposed input's column would come back as a row).

Note [Storage resize]
---------------------
FSDP2 frees a parameter's storage (``resize_storage_bytes_(p, 0)``) after use and
re-allocates and fills it (resize to full, then ``copy_``) before the next use.
Functionalization records the resize; a resized-up input's new value is the
``copy_`` that fills it. An input whose storage functionalization saw resized and
whose final size differs from its initial size records that size (only 0 or the full
size are legal), which the epilogue applies with ``untyped_storage().resize_``
before copying data in; an input whose storage ends at zero bytes gets no data copy;
a resize up, use, and back down is no net mutation at all. An input that requires grad
(FSDP2's unsharded parameters are leaves) is resized the same way; its fill runs under
``no_grad``, a mutation hidden from autograd, so its gradient is the use's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import torch
import torch._C._functionalization as functionalization
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._sympy.symbol import SymT, symbol_is_type

from ..errors import UnsupportedError
from ..ir import InputInfo, OutputInfo, Role
from ..ir.sizes import extent
from .context import (
    OLD_STORAGE,
    JointFunctionalMode,
    ModeSwitches,
    clone_as_is,
    from_fun,
    geometry,
    grad_context,
    has_internal_overlap,
    static,
    to_fun_input,
    translate_errors,
)
from .fallbacks import MetaFallbacks
from .generators import GeneratorArgs, rng_state_as_effects
from .hooks_inside import HooksInside, HookTable
from .inplace import (
    NO_LEAF_VIEWS,
    VIEW_OF_LEAF,
    VIEW_OF_MODIFIED_BASE,
    CallerView,
    EagerInPlaceChecks,
    ExpandedInputWritten,
    ViewOfLeafWritten,
    recorded_write_after_set_onto_an_input,
    windows_overlap,
)
from .inputs import moved_off_base
from .leaves import LeafSlots, shares_version_counter
from .symbolic import geometry_carriers
from .unbacked import fresh_symbols_ignored


@dataclasses.dataclass
class TraceMetadata:
    """What the untraced metadata pass learned about inputs and outputs."""

    inputs: list[InputInfo]
    outputs: list[OutputInfo]
    tangent_examples: list[torch.Tensor]   # fake tensors, one per differentiable output
    as_views: frozenset[int] = frozenset()  # inputs the function is given as views (_outputs_after_requires_grad)
    uncloned: frozenset[int] = frozenset()  # non-leaf expanded inputs given as they are, not copied


# eager's errors for an in-place op on a view whose base requires grad: where the input is the caller's view of a
# tensor that does not, they are the trace's own (the functional input is a base of its own)
_VIEW_ERRORS = (VIEW_OF_LEAF, "is the output of a function that returns multiple views",
                "A view was created in no_grad mode")


def collect_metadata(flat_fn: LeafSlots, fake_args: list, roles: tuple[Role, ...], fake_mode,
                     *, with_backward: bool, non_leaf: frozenset[int] = frozenset(),
                     as_views: frozenset[int] = frozenset(), uncloned: frozenset[int] = frozenset(),
                     leaf_views: Mapping[int, CallerView] = NO_LEAF_VIEWS,
                     plain_views: frozenset[int] = frozenset()) -> TraceMetadata:
    """Run ``flat_fn`` once on functional fakes; record mutations, aliasing and grad-requiring outputs.

    Inputs in ``non_leaf`` (the caller's tensor requires grad and is not a leaf) are
    cloned first, so an in-place op on them is legal, as it is in eager. Inputs in
    ``as_views`` are passed as views (see ``_outputs_after_requires_grad``). Inputs in ``leaf_views`` are
    the caller's views of a leaf that requires grad (``api.views_of_leaves``). ``flat_fn`` is the
    user's function with its slots for new leaves (Note [New leaves]), if it has any.
    """
    try:
        return _collect(flat_fn, fake_args, roles, fake_mode, with_backward=with_backward, non_leaf=non_leaf,
                        as_views=as_views, uncloned=uncloned, leaf_views=leaf_views, plain_views=plain_views)
    except RuntimeError as exc:
        # An expanded input is traced on a dense copy (a copy cannot overlap) unless the first run finds it
        # unwritten (see ``overlapping`` in _collect); an error from the copy's layout (``a.transpose_(0, 1)``,
        # then ``(a + 2).view(-1)``: eager's result is contiguous, the copy's not; fuzz seed 1300707) is
        # eager's only if the input itself raises it too. A write into it takes Note [Expanded inputs
        # written in place] either way.
        expanded = frozenset(i for i in non_leaf if with_backward and has_internal_overlap(fake_args[i])) - uncloned
        views_refused = any(m in str(exc) for m in _VIEW_ERRORS)
        # not a refusal (an expanded input written raises ExpandedInputWritten, which the caller answers with
        # Note [Expanded inputs written in place]: fuzz seeds 1403730, 1404817)
        if expanded and not views_refused and not isinstance(exc, UnsupportedError):
            return collect_metadata(flat_fn, fake_args, roles, fake_mode, with_backward=with_backward,
                                    non_leaf=non_leaf, as_views=as_views, uncloned=uncloned | expanded,
                                    leaf_views=leaf_views, plain_views=plain_views)
        views = frozenset(i for i, a in enumerate(fake_args) if isinstance(a, torch.Tensor) and a._base is not None
                          and not a.requires_grad) - as_views
        if not views_refused or not views or not (with_backward or isinstance(exc, ViewOfLeafWritten)):
            if isinstance(exc, ViewOfLeafWritten):
                raise RuntimeError(str(exc)) from None   # eager's error, as eager raises it
            raise
        found, message = getattr(exc, "after_a_recorded_write", None), str(exc)
    # ``x.requires_grad_()`` on an input that is the caller's view, then an in-place op on a view of
    # ``x`` taken before: in eager that view hangs off the caller's base, which does not require grad
    # (fuzz seed 1502347: ``t0 = a.unbind(0)[0]; a.requires_grad_(); t0.clamp_(...)``, eager's multi-output
    # view error on a base of its own).
    try:
        return collect_metadata(flat_fn, fake_args, roles, fake_mode, with_backward=with_backward,
                                non_leaf=non_leaf, as_views=as_views | views, uncloned=uncloned,
                                leaf_views=leaf_views, plain_views=plain_views)
    except RuntimeError as again:
        # the same error on the inputs passed as views, where the trace does not see them as inputs: the
        # positions of the first run stay for compiled.aliased_leaf_refusal (fuzz seed 10203944)
        if found is not None and getattr(again, "after_a_recorded_write", None) is None and str(again) == message:
            again.after_a_recorded_write = found
        raise


def _collect(flat_fn: LeafSlots, fake_args: list, roles: tuple[Role, ...], fake_mode, *, with_backward: bool,
             non_leaf: frozenset[int], as_views: frozenset[int], uncloned: frozenset[int],
             leaf_views: Mapping[int, CallerView], plain_views: frozenset[int]) -> TraceMetadata:
    # Note [Unbacked sizes]: the graph is not kept, so neither are the symbols the pass allocates.
    with translate_errors(), rng_state_as_effects(), fake_mode, fresh_symbols_ignored(fake_mode):
        with (functional := JointFunctionalMode()):
            f_args = [to_fun_input(a, leaf=i not in non_leaf) for i, a in enumerate(fake_args)]
            storage_bytes = storage_sizes(fake_args)
            checks = EagerInPlaceChecks()
            call_args = [clone_as_is(a) if i in non_leaf and with_backward and i not in uncloned
                         else a.view_as(a) if i in as_views else a
                         for i, a in enumerate(f_args)]
            tensors = [a for a in call_args if isinstance(a, torch.Tensor)]
            checks.track(tensors)
            checks.mark_copies([call_args[i] for i in non_leaf if with_backward and i not in uncloned])
            checks.mark_expanded_inputs([call_args[i] for i, a in enumerate(fake_args) if isinstance(a, torch.Tensor)
                                         and has_internal_overlap(a) and i not in uncloned])
            # not on a dense copy of an expanded input, whose views are no views in eager (reshape copies: fuzz
            # seed 802164); the runtime raises eager's error for those (check_view_of_leaf)
            checks.mark_leaf_views([(call_args[i], leaf_views[i]) for i in leaf_views if with_backward and not (
                i in non_leaf and i not in uncloned and has_internal_overlap(fake_args[i]))])
            checks.mark_plain_views([call_args[i] for i in plain_views if not has_internal_overlap(fake_args[i])])
            # Before the call: an input given another's storage (set_, .data =) shows that storage after
            input_storages = {StorageWeakRef(f.untyped_storage()): i for i, f in enumerate(call_args)
                              if isinstance(f, torch.Tensor)}
            with grad_context(with_backward), (switch := ModeSwitches()), MetaFallbacks(), checks, \
                    checks.saves(), HooksInside(call_args, HookTable()), GeneratorArgs():
                grad_fns = [a.grad_fn if isinstance(a, torch.Tensor) else None for a in call_args]
                writes = [_write_count(a) for a in call_args]   # clone_as_is writes its copy once
                versions = [_version(a) for a in call_args]
                flat_fn.caller_inputs(f_args)
                try:
                    flat_outs = flat_fn(*call_args)
                except Exception as exc:
                    checks.refuse_stale_views(exc)
                    raise
            switch.check([*flat_outs, *call_args], functional.inference_views)   # Note [Grad mode switched on inside]
            for t in (*tensors, *flat_outs):
                if isinstance(t, torch.Tensor):
                    checks.check_storage_kept(t)
            inputs = [_input_info(f, a, role, g, w)
                      for f, a, role, g, w in zip(call_args, fake_args, roles, grad_fns, writes, strict=True)]
            inputs = _storage_resizes(inputs, call_args, fake_args, storage_bytes)
            _check_views_before_requires_grad(inputs, call_args, fake_args, checks)
            inputs = [_eager_counters(info, a, version, checks)
                      for info, a, version in zip(inputs, call_args, versions, strict=True)]
            inputs = _new_storages(inputs, call_args, fake_args, versions, grad_fns, input_storages,
                                   with_backward, non_leaf, checks)
            _check_written_geometry(inputs, fake_args)   # after: a moved input's geometry is its new storage's
            outputs, tangents = [], []
            # Read before anything asks for a grad_fn (see _STALE_VIEW_OF_NON_GRAD_BASE).
            required = [isinstance(out, torch.Tensor) and out.requires_grad for out in flat_outs]
            for out, out_required in zip(flat_outs, required, strict=True):
                info = _view_of_moved_input(out, call_args, inputs, flat_fn)   # Note [Inputs given another storage]
                if info is not None:
                    outputs.append(info)
                    continue
                if isinstance(out, torch.Tensor) and out_required and torch._functionalize_was_storage_changed(
                        out.elem) and not any(out is f for f in call_args) \
                        and flat_fn.slot_of_view(out) is None:   # an input, a new leaf: not regenerated
                    raise UnsupportedError("set_() (or .data =) on a tensor that requires grad and that the function "
                                           "returns (or a view of it) is not supported: the runtime regenerates it "
                                           "on the storage it aliases, without its autograd history",
                                           hint='return a new tensor instead, or pass on_unsupported="eager"')
                info = _output_view_info(out, flat_outs, outputs, with_backward) or \
                    _output_info(out, call_args, input_storages, with_backward, flat_fn)
                if info.kind == "input_view" and with_backward and out_required and not info.requires_grad:
                    info = _required(info)
                # only an autograd view goes stale: a detach() or a tensor set_() onto the input is no view in eager,
                # and one made under no_grad does not require grad (--semantics12 seed 10700702: t0.set_(b), then a
                # write into b, under no_grad)
                if info.kind == "input_view" and out._base is not None and checks.stale_view(out):
                    info = dataclasses.replace(info, made_before_write=True, rebased=checks.rebased(out))
                elif info.kind == "input_view" and _moved(inputs, info.input_index):   # a view of its old storage
                    info = dataclasses.replace(info, made_before_set=True)   # (fuzz seed 904401)
                elif info.kind == "input_view" and info.input_index < len(call_args):
                    info = _written_after(info, out, call_args, checks)
                elif info.kind == "tensor" and info.view_meta is not None and info.view_meta[4] \
                        and info.view_meta[5] is False and checks.stale_when_returned(out):
                    info = dataclasses.replace(info, view_meta=(*info.view_meta[:5], STALE_VIEW))
                if info.kind == "input_view" and info.view_replay is None and info.input_index < len(call_args) \
                        and not info.made_before_set:
                    info = _in_callers_frame(info, call_args[info.input_index], fake_args[info.input_index])
                outputs.append(info)
            outputs = _views_of_later_outputs(flat_outs, outputs, with_backward)
            for out, info in zip(flat_outs, outputs, strict=True):
                if info.kind == "tensor" and info.requires_grad:
                    plain = from_fun(returned(out, info))
                    tangents.append((plain.shape, plain.dtype, plain.device))
            outputs = [dataclasses.replace(info, same_object=next(j for j in range(k) if flat_outs[j] is out))
                       if isinstance(out, torch.Tensor) and any(out is o for o in flat_outs[:k]) else info
                       for k, (out, info) in enumerate(zip(flat_outs, outputs, strict=True))]
            # fuzz seed 200574: a view of x.data written after the call must not bump x's version; nor a tensor
            # made inside and set_() onto an input's storage, whose counter is its own (fuzz seed 12500178)
            outputs = [dataclasses.replace(info, via_data=True)
                       if info.kind == "input_view" and isinstance(out, torch.Tensor)
                       and (checks.via_data(out) or flat_fn.slot_of_view(out) is None
                            and _counter_of_its_own(out, call_args, info.input_index)) else info
                       for out, info in zip(flat_outs, outputs, strict=True)]
            outputs = [_view_of_returned_alias(k, out, info, flat_outs, outputs)
                       for k, (out, info) in enumerate(zip(flat_outs, outputs, strict=True))]
            checks.settle_saves(flat_outs, call_args)   # Note [When eager saved an input] in capture/inplace.py
            for out in flat_outs:
                checks.refuse_view_made_leaf(out)
                checks.refuse_unrecorded_history(out)
            outputs = [_counter_and_saves(info, out, checks, call_args)
                       for out, info in zip(flat_outs, outputs, strict=True)]
            outputs = _counters_shared(outputs, flat_outs, call_args)
            for k, a in enumerate(call_args):
                if isinstance(a, torch.Tensor):
                    first, by_output, by_new_value = checks.saved_at(a)
                    inputs[k] = dataclasses.replace(inputs[k], saved_at=first, saved_at_by_output=by_output,
                                                    saved_at_by_new_value=by_new_value,
                                                    saved_with_kept_counter=checks.saved_with_kept_counter(a),
                                                    saved_itself=checks.saved_itself(a),
                                                    saved_otherwise=checks.saved_otherwise(a),
                                                    saved_on_clone=checks.saved_on_clone(a))
        # Tangents are plain fakes: made outside FunctionalTensorMode.
        tangents = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype, device in tangents]
    overlapping = frozenset(i for i in non_leaf if with_backward and has_internal_overlap(fake_args[i])
                            and not inputs[i].mutates_data) - uncloned
    if overlapping:
        # An expanded input's copy is dense (a copy cannot overlap), so ops that view or copy by
        # strides (reshape, contiguous, flatten) viewed it where eager copies: an input the function
        # does not write needs no copy (the joint trace takes an alias where it changes the input's
        # metadata), and a second run classifies its outputs on the input itself.
        return collect_metadata(flat_fn, fake_args, roles, fake_mode, with_backward=with_backward, non_leaf=non_leaf,
                                as_views=as_views, uncloned=uncloned | overlapping, leaf_views=leaf_views,
                                plain_views=plain_views)
    views = frozenset(i for i, info in enumerate(inputs) if info.requires_grad_set and fake_args[i]._base is not None)
    if views and not as_views and with_backward:
        return _outputs_after_requires_grad(flat_fn, fake_args, roles, fake_mode, inputs, non_leaf, views, uncloned)
    outputs += geometry_carriers(outputs, fake_args)   # Note [Views with data-dependent geometry]
    outputs += [OutputInfo(kind="tensor", new_value_of=i) for i, info in enumerate(inputs)
                if info.new_storage is not None and info.new_storage[0] == "value"]
    return TraceMetadata(inputs, outputs, tangents, as_views, uncloned)


def _outputs_after_requires_grad(flat_fn: LeafSlots, fake_args, roles, fake_mode, inputs, non_leaf, views,
                                 uncloned) -> TraceMetadata:
    """``x.requires_grad_()`` inside the function on an input that is a view of another tensor (the
    caller's ``base[1:3]``): in eager, views of ``x`` taken before the call hang off the caller's base,
    which does not require grad, so values computed from them do not either. The functional input
    is a base of its own, whose views would follow it; a second run passes such inputs as views,
    for the outputs' ``requires_grad`` (the first run's input analysis stands)."""
    again = collect_metadata(flat_fn, fake_args, roles, fake_mode, with_backward=True, non_leaf=non_leaf,
                             as_views=views, uncloned=uncloned)
    return dataclasses.replace(again, inputs=inputs)


def storage_sizes(fake_args: list) -> list:
    return [a.untyped_storage().nbytes() if isinstance(a, torch.Tensor) else None for a in fake_args]


def restore_storage_bytes(fake_args: list, storage_bytes: list) -> None:
    """Undo the storage resizes a trace applied to the fake inputs themselves."""
    for a, nbytes in zip(fake_args, storage_bytes, strict=True):
        if nbytes is not None and a.untyped_storage().nbytes() != nbytes:
            a.untyped_storage().resize_(nbytes)


def _storage_resizes(infos: list[InputInfo], call_args: list, fake_args: list, before: list) -> list[InputInfo]:
    """Record each resized input's final storage size (Note [Storage resize])."""
    result = []
    for info, f, fake, nbytes in zip(infos, call_args, fake_args, before, strict=True):
        final = _final_storage_bytes(f, fake, nbytes)
        if final is None:
            result.append(info)
            continue
        if final == nbytes:
            # Resized up and back down: no net change; a zero-size input keeps no data.
            result.append(dataclasses.replace(info, mutates_data=info.mutates_data and final > 0))
            continue
        full = _full_storage_bytes(fake)
        if final not in (0, full):
            raise UnsupportedError(
                f"resize_storage_bytes_ leaves an input's storage at {final} bytes; only 0 (free) or its full "
                f"size ({full} bytes) can be compiled", hint='resize to 0 or full size, or on_unsupported="eager"')
        result.append(dataclasses.replace(info, storage_bytes=final, mutates_data=info.mutates_data and final > 0))
    restore_storage_bytes(fake_args, before)
    return result


def _final_storage_bytes(f, fake, before: int | None) -> int | None:
    """The input's storage size after the call if the function resized it, else None.

    A resize applies to the tensor functionalization holds for the input at that point:
    the fake input itself until a data mutation replaces it, the new value after. A new
    value's own storage is only as large as the value, so its size says nothing unless it
    was freed; the fake input's storage says whether it was resized before any write.
    """
    if before is None:
        return None
    value = from_fun(f)
    if value.numel() > 0 and value.untyped_storage().nbytes() == 0:
        return 0   # freed at the end (possibly after being re-allocated and used)
    now = fake.untyped_storage().nbytes()
    return now if now != before else None


def _full_storage_bytes(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    return int(extent(*geometry(t))) * t.element_size()


def _eager_counters(info: InputInfo, f_arg, version: int | None, checks: EagerInPlaceChecks) -> InputInfo:
    """What eager's version counter and in-place checks record for the caller's tensor."""
    if not isinstance(f_arg, torch.Tensor):
        return info
    if info.mutation_recorded and checks.written_via_set_with_grad(f_arg):
        raise recorded_write_after_set_onto_an_input()
    return dataclasses.replace(
        info,
        written_at=checks.written_at(f_arg),   # Note [When eager saved an input] in capture/inplace.py
        first_written_at=checks.first_written_at(f_arg),
        grad_read_at=checks.grad_read_at(f_arg),
        grad_first_read_at=checks.grad_first_read_at(f_arg),
        view_reads=checks.view_reads(f_arg),
        stale_view_read=checks.stale_view_read(f_arg),
        multi_output_viewed=checks.multi_output_viewed(f_arg),
        # .data counts its own versions; a write through a view given other data by .data = does not (the view
        # keeps the input's counter: fuzz seed 8904356), which only _version sees
        mutated_via_data=info.mutates_data and checks.only_via_data(f_arg) and _version(f_arg) == version,
        # an in-place op with no new value (t_() of a view), or set_() on a detach(), which only _version sees
        version_bumped=not info.mutates_data and info.new_metadata is None
        and (checks.written(f_arg) or _version(f_arg) != version),
        written_with_grad=checks.written_with_grad(f_arg),
        written_through_views=checks.written_through_views_with_grad(f_arg))


def _version(t) -> int | None:
    """``t._version``; None for a non-tensor or an inference tensor (which counts no versions)."""
    return t._version if isinstance(t, torch.Tensor) and not t.is_inference() else None


def _write_count(t) -> int | None:
    if not isinstance(t, torch.Tensor):
        return None
    torch._sync(t)
    return torch._functionalize_mutation_counter(t.elem)


def _new_storages(infos: list[InputInfo], call_args: list, fake_args: list, versions: list, grad_fns: list,
                  storages: dict, with_backward: bool, non_leaf: frozenset[int],
                  checks: EagerInPlaceChecks) -> list[InputInfo]:
    """Note [Inputs given another storage]
    -----------------------------------
    ``x.set_(y)`` and ``x.data = y`` (traced as a ``set_``, Note [Assigning .data] in capture/inplace.py)
    leave the caller's ``x`` on another storage, with another geometry. Where that storage is another
    input's (``x.set_(y)``, ``x.set_(y[1:])``), the runtime sets the caller's ``x`` onto the caller's
    ``y`` with the view ops functionalization recorded from ``y`` to ``x``'s new value; where it is
    a tensor made inside (``x.data = x.data * 2``), the graph returns that value as an extra output
    (``OutputInfo.new_value_of``, no user output) and the runtime sets ``x`` onto it. The ``set_``
    runs after the data copies of the other inputs (``y`` written through ``x`` afterwards), under
    ``no_grad``, or with grad mode on where autograd recorded the function's ``set_`` onto another
    input (eager's history, whose backward raises); ``x``'s version then moves as far as the
    function moved it (``set_`` moves it, ``.data =`` does not). ``x``'s old storage, written before
    the first ``set_`` (an alias of it is kept then: ``OLD_STORAGE``), is ``x``'s data mutation,
    copied into the caller's ``x`` before it moves. A moved input the backward reads is saved as an
    alias of its old storage. Outputs taken from ``x`` after it moved are regenerated from it; views
    taken before are made before the epilogue, on the old storage.

    Refused: a recorded ``set_`` onto a tensor made inside; a recorded write before the ``set_`` (or
    one with ``x``'s geometry changed); a new shape for an input that receives a gradient; an input
    that requires grad in an entry with a backward (seeds 100199, 100292: gradients of what was computed
    from its old value, and the history of its detach() written with grad, were lost); an input
    that requires grad and is no leaf (a view is differentiated through its base's geometry); ``set_``
    onto the input's own storage, or onto an input itself moved or with its metadata changed; and
    (at the call) an input that shares its storage with another input."""
    result = []
    for i, (info, f) in enumerate(zip(infos, call_args, strict=True)):
        if not (isinstance(f, torch.Tensor) and torch._functionalize_was_storage_changed(f.elem)):
            result.append(info)
            continue
        recorded = with_backward and f.grad_fn is not grad_fns[i]   # requires_grad_() alone is the prologue's
        old = getattr(f, OLD_STORAGE, None)
        if old is not None and has_internal_overlap(fake_args[i]):   # fuzz seed 210664
            raise UnsupportedError("an input whose elements share memory (an expanded tensor, stride 0) is written in "
                                   "place before it is given another storage (set_(), .data =); its old storage's "
                                   "new value cannot be expressed functionally",
                                   hint="pass the tensor before expand (or a .clone() of the expanded one), or pass "
                                        'on_unsupported="eager"')
        if old is not None and (f.grad_fn is not grad_fns[i] or tuple(old.shape) != tuple(fake_args[i].shape)
                                or tuple(old.stride()) != tuple(fake_args[i].stride())):   # transpose_() (802082)
            raise UnsupportedError(f"input {i} is written in place, with autograd recording it or with its "
                                   "geometry changed, and then given another storage (set_(), .data =): not "
                                   "supported", hint='write after the set_(), or pass on_unsupported="eager"')
        if (info.requires_grad or info.requires_grad_set) and with_backward \
                and tuple(f.shape) != tuple(fake_args[i].shape):
            raise UnsupportedError(f"input {i} requires grad and is given a storage of another shape (set_(), "
                                   ".data =): its gradient would have the new shape",
                                   hint='keep the shape, or pass on_unsupported="eager"')
        if with_backward and i in non_leaf:
            raise UnsupportedError(f"input {i} requires grad, is no leaf, and is given another storage (set_(), "
                                   ".data =): autograd differentiates it (a view: and its views) through its "
                                   "history's geometry (fuzz seed 91688)",
                                   hint='pass a leaf or a clone, or pass on_unsupported="eager"')
        if with_backward and (info.requires_grad or info.requires_grad_set and checks.was_read_before_set(f)):
            # Fuzz seeds 100199, 100292: the gradient of what was computed from the old value, and the history
            # of a detach() of the moved leaf written with a value that requires grad, were lost (also for a leaf
            # made by requires_grad_() inside, read before the move: fuzz seed 1801073).
            raise UnsupportedError(f"input {i} requires grad and is given another storage (set_(), .data =) in a "
                                   "function with a backward: not supported yet",
                                   hint='assign .data outside the compiled function (the optimizer pattern), '
                                        'or pass on_unsupported="eager"')
        j = storages.get(StorageWeakRef(f.untyped_storage()))
        if j is not None:
            new_storage = (*_onto_input(i, f, j, call_args), recorded)
        elif recorded:
            raise UnsupportedError(f"set_() of input {i} onto a tensor made inside the function, under grad mode with "
                                   "a tensor that requires grad, is not supported: eager records a history for it "
                                   "whose backward raises (the derivative for set_ is not implemented)",
                                   hint='call set_() under torch.no_grad(), or pass on_unsupported="eager"')
        else:
            new_storage = ("value",)
        # The old storage's value (written before the set_) is the input's data mutation, copied first.
        result.append(dataclasses.replace(
            info, new_storage=new_storage, version_delta=_version(f) - versions[i] - (old is not None),   # the copy
            mutates_data=old is not None,
            mutation_hidden_from_autograd=old is not None, new_metadata=None, mutated_via_data=False,
            version_bumped=False, storage_bytes=None))
    moved = {i for i, info in enumerate(result) if info.new_storage is not None}
    for i, info in enumerate(result):
        if info.new_storage is not None and info.new_storage[0] == "input" and info.new_storage[1] in moved:
            raise UnsupportedError(f"input {i} is set_() onto the storage of input {info.new_storage[1]}, which is "
                                   "itself given another storage: not supported",
                                   hint='pass on_unsupported="eager"')
    return result


def _counters_shared(infos: list[OutputInfo], flat_outs: list, call_args: list) -> list[OutputInfo]:
    """``OutputInfo.shares_counter`` per output: the first input, else earlier output, sharing its version counter
    in the trace (probed), left None where the runtime's construction shares it already."""
    result = []
    for k, (info, out) in enumerate(zip(infos, flat_outs, strict=True)):
        if not isinstance(out, torch.Tensor) or info.kind == "constant" or info.same_object is not None \
                or out.is_inference():
            result.append(info)
            continue
        i = _input_sharing_counter(out, call_args)
        found = None if i is None else ("input", i)
        if found is None:
            found = next((("output", j) for j in range(k) if isinstance(flat_outs[j], torch.Tensor)
                          and flat_outs[j] is not out and shares_version_counter(flat_outs[j], out)), None)
        # a view of an earlier output sharing its counter is regenerated on that output, which takes the counter
        # eager's has first (review of 5714ffe: ``t = x.detach(); t.copy_(y); return t, t[0]``)
        by_construction = found is None or info.kind == "input" \
            or info.kind == "input_view" and not info.via_data and found == ("input", info.input_index) \
            or info.kind == "output_view" and info.input_index < k \
            and shares_version_counter(flat_outs[info.input_index], out)   # (a later one's is made before it)
        result.append(info if by_construction else dataclasses.replace(info, shares_counter=found))
    return result


def _counter_of_its_own(out: torch.Tensor, call_args: list, index: int) -> bool:
    """``out``, regenerated from input ``index``'s storage, shares no input's version counter: a tensor made inside
    and ``set_()`` onto the input's storage (``t = a.exp(); t.set_(a); return t``), which eager's writes through
    ``out`` after the call do not count as the input's. Not a view of a leaf made inside (its slot's)."""
    if index >= len(call_args) or out.is_inference() or any(isinstance(a, torch.Tensor) and a.is_inference()
                                                            for a in call_args):
        return False   # inference tensors have no counter to probe (review of 5714ffe: a call under inference_mode)
    return _input_sharing_counter(out, call_args) is None


def _input_sharing_counter(out: torch.Tensor, call_args: list) -> int | None:
    """The first input (other than ``out`` itself) whose version counter ``out`` shares in the trace (probed)."""
    return next((i for i, a in enumerate(call_args)
                 if isinstance(a, torch.Tensor) and a is not out and shares_version_counter(a, out)), None)


def _view_of_moved_input(out, call_args: list, inputs: list[InputInfo], flat_fn: LeafSlots) -> OutputInfo | None:
    """An output taken from an input after it was given another storage (``x.data = y; return x.detach()``,
    ``x[0]``): eager's shares ``x``'s storage and version counter, so it is regenerated from the caller's
    ``x`` after the epilogue moved it, with the view ops from ``x``'s new value. Not a view of a leaf made
    inside (``x.detach().requires_grad_()``, fuzz seed 91041): that is its slot's (Note [New leaves])."""
    if not isinstance(out, torch.Tensor) or any(out is f for f in call_args) \
            or flat_fn.slot_of_view(out) is not None:
        return None
    for i, (info, f) in enumerate(zip(inputs, call_args, strict=False)):
        if info.new_storage is None or StorageWeakRef(out.untyped_storage()) != StorageWeakRef(f.untyped_storage()) \
                or not shares_version_counter(f, out):
            continue
        replay = _replay_from(out, f)
        if replay is None:
            raise UnsupportedError(f"an output taken from input {i} after it was given another storage (set_(), "
                                   ".data =) cannot be replayed on it (symbolic sizes, or the input's geometry "
                                   "changed in place after the view was taken)",
                                   hint='pass dynamic=False, or on_unsupported="eager"')
        requires_grad = bool(out.requires_grad)
        return OutputInfo(kind="input_view", requires_grad=requires_grad, input_index=i,
                          view_meta=_view_meta(out, requires_grad), view_replay=replay)
    return None


def _moved(inputs: list[InputInfo], i: int) -> bool:
    """Input ``i`` (not a new leaf's slot) was given another storage (Note [Inputs given another storage])."""
    return i < len(inputs) and inputs[i].new_storage is not None


def _onto_input(i: int, f, j: int, call_args: list) -> tuple:
    """("input", j, the view ops from input ``j`` to input ``i``'s new value)."""
    source = call_args[j]
    if j == i or source.elem is f.elem:
        raise UnsupportedError(f"set_() of input {i} onto its own storage is not supported",
                               hint='use a view (x = x[1:]), or pass on_unsupported="eager"')
    replay = _replay_from(f, source)
    if replay is None or torch._functionalize_has_metadata_mutation(source.elem):
        raise UnsupportedError(f"input {i} is set_() onto the storage of input {j} with a geometry that cannot be "
                               "replayed on the caller's tensor (symbolic sizes, or a metadata mutation of "
                               f"input {j})", hint='pass dynamic=False, or on_unsupported="eager"')
    return ("input", j, replay)


def _input_info(f_arg, fake_arg, role: Role, grad_fn_before, writes_before: int | None) -> InputInfo:
    if not isinstance(f_arg, torch.Tensor):
        return InputInfo(role=role, requires_grad=False)
    written = _write_count(f_arg) != writes_before
    elem = f_arg.elem
    mutated = written and bool(torch._functionalize_has_data_mutation(elem))
    if mutated and has_internal_overlap(fake_arg):
        raise ExpandedInputWritten()
    if mutated and windows_overlap(fake_arg):   # fuzz seed 3602516 (an unfold passed on by Dynamo)
        raise UnsupportedError("an input whose elements overlap without a stride of 0 (windows of an unfold) is "
                               "written in place: eager writes each shared element once per window, in its "
                               "kernel's order, which a functional graph cannot express",
                               hint='pass the tensor the windows were taken from (or a clone of the input), or '
                                    'pass on_unsupported="eager"')
    recorded = f_arg.grad_fn is not grad_fn_before   # autograd saw an in-place op on it
    if recorded and not mutated and type(f_arg.grad_fn).__name__ == "CopySlices":   # also after t_() (403386)
        # No value and no geometry changed, yet autograd rewrote the input's history through a view:
        # set_() on a view of it (set_ is not seen by torch-function modes).
        raise UnsupportedError("set_() on a view of an input under grad mode, where either side requires grad, is "
                               "not supported: eager gives the input set_'s autograd history, whose backward "
                               "raises (the derivative for set_ is not implemented)",
                               hint="call set_() under torch.no_grad() or on a detach(), or pass "
                                    'on_unsupported="eager"')
    new_metadata = None
    if torch._functionalize_has_metadata_mutation(elem):
        new_metadata = _replayable_metadata(f_arg)
    requires_grad_set = bool(f_arg.requires_grad and f_arg.grad_fn is None and not fake_arg.requires_grad)
    if requires_grad_set and new_metadata is not None:
        # Its gradient would have the final geometry, the graph's the one the input came in with.
        raise UnsupportedError("requires_grad_() on an input whose metadata (t_(), transpose_(), ...) the "
                               "function also changes is not supported",
                               hint='change a view instead (x = x.t()), or pass on_unsupported="eager"')
    return InputInfo(role=role, requires_grad=bool(fake_arg.requires_grad), mutates_data=mutated,
                     mutation_hidden_from_autograd=mutated and not recorded, new_metadata=new_metadata,
                     metadata_recorded=new_metadata is not None and recorded, requires_grad_set=requires_grad_set)


def _check_views_before_requires_grad(infos: list[InputInfo], call_args: list, fake_args: list,
                                      checks: EagerInPlaceChecks) -> None:
    """Fuzz seed 310444: ``t0 = a[0]; a.requires_grad_()`` on an input that is no view. Eager's earlier view
    becomes a leaf of its own, whose gradient does not reach the input; the graph is traced with the input
    requiring grad from the start. (Views of an input that is the caller's view hang off the caller's base:
    ``_outputs_after_requires_grad`` passes it as a view.) Refused too where a write through such a view
    then gave the input a ``grad_fn`` (fuzz seed 1201465: eager's leaf is moved into the graph's interior)."""
    for info, f, fake in zip(infos, call_args, fake_args, strict=True):
        line = checks.view_before_requires_grad(f) if isinstance(f, torch.Tensor) else None
        if line is not None and (fake._base is None or not info.requires_grad_set):
            raise UnsupportedError("requires_grad_() on an input after a view of it was taken inside the function "
                                   "is not supported: eager's earlier view becomes a leaf of its own, whose "
                                   "gradient does not reach the input", source=line,
                                   hint="call requires_grad_() before taking views (or outside the function), or "
                                        'pass on_unsupported="eager"')


def _check_written_geometry(infos: list[InputInfo], fake_args: list) -> None:
    """An input whose data and metadata both change gets its new value copied in its final geometry
    (Note [Input mutations]): that writes every element the function wrote only when the final
    geometry holds the caller's elements (``t_``, ``unsqueeze_``), not after ``as_strided_`` to fewer."""
    for i, (info, fake) in enumerate(zip(infos, fake_args, strict=True)):
        # An input that requires grad and changes its geometry is traced on a copy of its elements (fuzz seed
        # 503777): a geometry reaching other elements of the caller's storage would read the copy's.
        if info.new_metadata is None or not (info.mutates_data or info.requires_grad):
            continue
        size, stride, offset, replay = info.new_metadata
        if replay is not None:
            with torch.utils._python_dispatch._disable_current_modes():
                view = replay_views(fake, replay)
            size, stride, offset = view.shape, view.stride(), view.storage_offset()
        old, new = _elements(fake.shape, fake.stride(), fake.storage_offset()), _elements(size, stride, offset)
        if old is not None and new is not None and old != new and not info.mutates_data:
            raise UnsupportedError(f"input {i} requires grad and its geometry is changed to one that does not hold "
                                   "the same elements (as_strided_() to other elements of its storage): not "
                                   "supported", hint='take as_strided() of the base tensor outside the function, '
                                   'or pass on_unsupported="eager"')
        if old is not None and new is not None and old != new:
            raise UnsupportedError(f"input {i} is written in place and its geometry is changed to one that does "
                                   "not hold the same elements (as_strided_() to other elements of its storage): "
                                   "not supported", hint='take as_strided() out of place, or write through a view, '
                                   'or pass on_unsupported="eager"')


def _elements(size, stride, offset) -> tuple | None:
    """Which storage elements a geometry holds, up to the order of its dimensions; None if symbolic."""
    if not static(size, stride, offset):
        return None
    dims = sorted((s, st) for s, st in zip(size, stride, strict=True) if s != 1)
    return (offset, tuple(dims)) if all(s > 0 for s in size) else ()


def replay_views(base: torch.Tensor, sequence: tuple) -> torch.Tensor:
    """The view ops ``sequence`` (recorded by functionalization) applied to ``base``'s geometry, on an
    alias: the sequence may hold in-place view ops (``t_``) that must not touch ``base`` itself."""
    return functionalization.apply_view_meta_sequence(torch.ops.aten.alias(base), list(sequence))


def _replayable_metadata(f_arg) -> tuple:
    """(size, stride, storage_offset, view replay) an input ends with after ``t_()`` / ``unsqueeze_()`` / ..."""
    plain = from_fun(f_arg)
    size, stride, offset = geometry(plain)
    replay = _view_replay(f_arg)
    if replay is None and not static(size, stride, offset):
        raise UnsupportedError("metadata mutation of an input with symbolic sizes is not supported",
                               hint='pass dynamic=False, or on_unsupported="eager"')
    return size, stride, offset, replay


def _replay_from(f_tensor, source) -> tuple | None:
    """The view ops from ``source`` to ``f_tensor``, a view of its functional storage; None if not
    replayable (symbolic sizes, or ``f_tensor`` not viewed from ``source``'s geometry: checked by
    replaying them on ``source``'s, fuzz seed 150838, where ``source`` was ``unsqueeze_``-d after
    the view was taken and its ops were no prefix of the view's)."""
    plain = from_fun(f_tensor)
    if not static(*geometry(plain)):
        return None
    try:
        sequence = tuple(functionalization.get_view_meta_sequence(f_tensor.elem))
        prefix = tuple(functionalization.get_view_meta_sequence(source.elem))
    except (RuntimeError, AttributeError):
        return None
    if len(prefix) > len(sequence):
        return None
    replay = sequence[len(prefix):]
    size, stride, offset = geometry(from_fun(source))
    if not static(size, stride, offset):
        return replay
    try:
        memory = torch.empty(max(extent(size, stride, offset), offset + 1), dtype=plain.dtype, device="meta")
        replayed = replay_views(memory.as_strided(size, stride, offset), replay)
    except RuntimeError:
        return None
    return replay if geometry(replayed) == geometry(plain) else None


def _written_after(info: OutputInfo, out, call_args: list, checks: EagerInPlaceChecks) -> OutputInfo:
    """``info`` with the other inputs written after the view ``out`` was made (OutputInfo.written_after)."""
    others = tuple(j for j, f in enumerate(call_args) if j != info.input_index and isinstance(f, torch.Tensor)
                   and checks.written_after_made(out, f))
    return dataclasses.replace(info, written_after=others) if others else info


def _required(info: OutputInfo) -> OutputInfo:
    """An input view that required grad when the function returned it, before autograd's regeneration
    of its grad_fn failed on functional fakes and cleared it (_STALE_VIEW_OF_NON_GRAD_BASE); eager's
    regenerated grad_fn requires grad."""
    return dataclasses.replace(info, requires_grad=True, view_meta=(*info.view_meta[:4], True, *info.view_meta[5:]))


def _view_replay(f_tensor, autograd_base=None) -> tuple | None:
    """The view ops from ``f_tensor``'s base to it, to replay on the caller's tensor; None if not replayable
    (symbolic sizes: the ops hold symbols, not the caller's sizes).

    Functionalization counts from the storage's first tensor, autograd from ``autograd_base`` when
    given: they differ after in-place view ops on an intermediate (``stft`` runs ``transpose_`` and
    ``squeeze_`` on its FFT result before ``view_as_real``). The base's own ops are a prefix of the
    view's; only the ops after it are replayed on the base."""
    plain = from_fun(f_tensor)
    if not static(*geometry(plain)) or _symbolic_trace(plain):   # its ops may hold symbols (fuzz seed 13800161:
        return None                                               # a reshape(-1) before a static t0[0])
    try:
        sequence = tuple(functionalization.get_view_meta_sequence(f_tensor.elem))
        skip = 0 if autograd_base is None else len(functionalization.get_view_meta_sequence(autograd_base.elem))
    except (RuntimeError, AttributeError):
        return None
    return sequence[skip:] if skip < len(sequence) else None


def _symbolic_trace(fake: torch.Tensor) -> bool:
    """The trace ``fake`` belongs to gave its inputs symbolic sizes (``dynamic=True``); not a symbolic float alone
    (Dynamo's for a changed global float: a view of a written input was then regenerated by geometry, in the frame
    of its functional value, at offset 0: --semantics12 seed 14100004)."""
    shape_env = getattr(getattr(fake, "fake_mode", None), "shape_env", None)
    if shape_env is None:
        return False
    values = shape_env.backed_var_to_val if hasattr(shape_env, "backed_var_to_val") else shape_env.var_to_val
    return any(symbol_is_type(symbol, SymT.SIZE) for symbol in values)


def _output_view_info(out, flat_outs: list, infos: list[OutputInfo], with_backward: bool) -> OutputInfo | None:
    """An output that is an autograd view of an earlier tensor output is regenerated from it at run time,
    so it stays a view of that output (in-place ops on it behave as in eager)."""
    base = getattr(out, "_base", None) if isinstance(out, torch.Tensor) else None
    # a view moved off its base (fuzz seed 92511) is returned as the tensor it is, not regenerated from the base
    if base is None or with_backward and _from_custom_function(out) or moved_off_base(out):
        return None
    for i, info in enumerate(infos):
        if info.kind == "tensor" and flat_outs[i] is base:
            requires_grad = bool(with_backward and out.requires_grad)
            view_meta = _view_meta(out, requires_grad)
            if view_meta[5] and base_written_after(out):   # Note [Multi-output views of a written base]
                view_meta = (*view_meta[:5], WRITTEN_AFTER)   # (fuzz seed 1903244: the base returned too)
            return OutputInfo(kind="output_view", requires_grad=requires_grad, input_index=i,
                              view_meta=view_meta, view_base=from_fun(base))
    return None


def _view_of_returned_alias(k: int, out, info: OutputInfo, flat_outs: list, infos: list[OutputInfo]) -> OutputInfo:
    """OutputInfo.replay_base: an input view (replayed, static geometry, no grad, made and returned with no write
    between) whose autograd ``_base`` is an earlier output, itself such an alias of the input but no view."""
    def plain(i: OutputInfo) -> bool:
        return i.kind == "input_view" and i.view_replay is not None and not i.requires_grad and not i.via_data \
            and not i.made_before_write and not i.made_before_set and not i.written_after \
            and i.view_meta is not None and static(*i.view_meta[:3])

    base = out._base if isinstance(out, torch.Tensor) and plain(info) else None
    if base is None:
        return info
    for j in range(k):
        earlier = infos[j]
        if flat_outs[j] is base and plain(earlier) and not base._is_view() \
                and len(earlier.view_replay) < len(info.view_replay) \
                and all(a is b for a, b in zip(earlier.view_replay, info.view_replay, strict=False)):
            return dataclasses.replace(info, replay_base=j)
    return info


def _views_of_later_outputs(flat_outs: list, infos: list[OutputInfo], with_backward: bool) -> list[OutputInfo]:
    """Views of an intermediate returned before the intermediate itself (Dynamo returns ``t0.select(0, -1),
    ..., t0`` across a graph break, then writes through the view; fuzz seed 600836) are views of that later
    output too: regenerated from it (``output_view`` of a later index), not from a base of their own, whose
    history an in-place op on the view would rebase instead of the later output's."""
    later = {id(o): j for j, (o, info) in enumerate(zip(flat_outs, infos, strict=True))
             if isinstance(o, torch.Tensor) and info.kind == "tensor" and info.view_meta is None}
    if not later or all(info.kind != "tensor" or info.view_meta is None for info in infos):
        return infos
    return [_output_view_info(out, flat_outs, infos, with_backward) or info
            if info.kind == "tensor" and info.view_meta is not None and later.get(id(out._base), -1) > k else info
            for k, (out, info) in enumerate(zip(flat_outs, infos, strict=True))]


def _view_meta(out, requires_grad: bool) -> tuple:
    """How the runtime regenerates the view ``out`` (OutputInfo.view_meta)."""
    plain = from_fun(out)
    multi_output = torch._functionalize_is_multi_output_view(out.elem)
    if multi_output and out.requires_grad and out._is_view() \
            and torch._C._autograd._get_creation_meta(out) != torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE:
        # functionalization's view chain runs through a detach() autograd's does not: ``t0 = b.chunk(2)[0];
        # t2 = t0.detach().requires_grad_(); t2.unsqueeze(0)`` is an ordinary view (fuzz --semantics12 seed 4901278)
        multi_output = False
    if not multi_output and out.requires_grad and out._is_view() \
            and torch._C._autograd._get_creation_meta(out) == torch._C._autograd.CreationMeta.NO_GRAD_MODE:
        return (*geometry(plain), plain.dtype, requires_grad, _no_grad_view(out))
    return (*geometry(plain), plain.dtype, requires_grad, bool(multi_output))


def _no_grad_view(out) -> str:
    """Note [Views made under no_grad]: NO_GRAD_STALE where ``out``'s base was written after it was made
    (reading its grad_fn raises; in a call under no_grad too, where every view is made under no_grad),
    NO_GRAD_VIEW where it has no grad_fn, NO_GRAD_ROOTED where it has one: a view taken with grad mode on of a
    view made under no_grad (the creation meta is inherited; review of 0b5d60a)."""
    try:
        grad_fn = out.grad_fn
    except RuntimeError as exc:
        if VIEW_OF_MODIFIED_BASE in str(exc):
            return NO_GRAD_STALE
        raise
    return NO_GRAD_VIEW if grad_fn is None else NO_GRAD_ROOTED


def returned(out, info: OutputInfo):
    """What the graph returns for a user output: a view of an intermediate returns its base."""
    return out._base if info.kind == "tensor" and info.view_meta is not None else out


# A view that requires grad (of an input given ``requires_grad_()`` inside) whose autograd base does
# not (the caller's base), seen as written after it was made: autograd regenerates its grad_fn by
# replaying the view ops on the base, which on functional fakes gives no grad_fn and clears its
# requires_grad (eager's is an as_strided node, with no edge to the input when the write is real).
# It is no custom Function's output; its requires_grad is the one read before (_required).
_STALE_VIEW_OF_NON_GRAD_BASE = "new_fn INTERNAL ASSERT FAILED"


# Note [Multi-output views of a written base]
# ------------------------------------------------
# ``t1 = t0.unbind(0)[0]; t0.copy_(t0); return t1``: eager's t1 is one of several views one op
# returned, and its base was written after it was made, so reading its grad_fn (is_leaf, a backward
# through it) or writing it in place raises. The runtime regenerates the view from the base the
# graph returns, so nothing was written after; its view_meta's multi_output is WRITTEN_AFTER, and
# the runtime makes it at a version its base's counter (which it shares, as eager's) then leaves and
# never reaches, which makes autograd refuse it as eager's.
WRITTEN_AFTER = "written_after"
# A view of an intermediate (no multi-output view) written after it was made: eager's view is stale, and
# regenerates its grad_fn from its geometry *when read*, after a ``.data =`` on it too (fuzz seed 3403996,
# a Dynamo graph break between): the runtime moves its version counter after making it, as for the above.
STALE_VIEW = "stale_view"
MULTI_OUTPUT = (True, WRITTEN_AFTER)   # the view_meta[5] states of a multi-output view
# Note [Views made under no_grad]
# -------------------------------
# ``with torch.no_grad(): v = t0[1:]`` of a ``t0`` that requires grad: eager's view requires grad, but autograd
# refuses an in-place op on it with grad mode on, and once its base is written with grad mode on, reading its
# grad_fn raises. It has no grad_fn until then, so it reads ``is_leaf`` True. Its view_meta's multi_output is
# NO_GRAD_VIEW, and the runtime makes it under no_grad too; NO_GRAD_STALE where the base was written after it was
# made, which the runtime makes stale as it does WRITTEN_AFTER views, whatever the grad mode of the call (a view of
# an input made before the epilogue's write is made stale by that write).
NO_GRAD_VIEW = "no_grad_view"
NO_GRAD_STALE = "no_grad_stale"
# A view taken with grad mode on of such a view (``v.t()``): its grad_fn's edge ends at the no_grad view, which
# autograd takes for a leaf, so no gradient reaches the base through it. The runtime makes the view under no_grad
# and an identity view of it with grad mode on.
NO_GRAD_ROOTED = "no_grad_rooted"


def base_written_after(out) -> bool:
    """``out``, a multi-output view that requires grad, whose base was written after it was made."""
    if not out.requires_grad:
        return False
    try:
        out.grad_fn   # noqa: B018 (autograd checks the view's version here)
    except RuntimeError as exc:
        return VIEW_OF_MODIFIED_BASE in str(exc)
    return False


def _from_custom_function(out) -> bool:
    """The output of a custom autograd.Function (Python or C++): its own backward, not a view's."""
    try:
        grad_fn = out.grad_fn
    except RuntimeError as exc:   # a multi-output view whose base was written: eager raises on its use
        if VIEW_OF_MODIFIED_BASE in str(exc) or _STALE_VIEW_OF_NON_GRAD_BASE in str(exc):
            return False
        raise
    return isinstance(grad_fn, torch.autograd.function.BackwardCFunction) or type(grad_fn).__name__ == "CppFunction"


def _counter_and_saves(info: OutputInfo, out, checks: EagerInPlaceChecks, call_args: list) -> OutputInfo:
    """A "tensor" output's ``counter_of`` (``t = x.detach(); t.data = ...; return t`` keeps x's version counter,
    --semantics12 seed 6102248) and ``saved_by`` (relu_() on a returned unfold view: eager saved the view, which
    the graph's own reads of the output, through scatters, do not show: seed 6500307)."""
    if isinstance(out, torch.Tensor) and info.kind in ("input_view", "output_view", "tensor") \
            and (info.view_meta is not None or info.on_input is not None):   # on_input: fuzz seed 12402857
        info = dataclasses.replace(info, saved_itself_by=checks.saved_itself_by(out))
    if info.kind != "tensor" or info.carries is not None or info.new_value_of is not None \
            or not isinstance(out, torch.Tensor):
        return info
    counter = checks.counter_kept_from(out, call_args) if info.view_meta is None and not info.requires_grad else None
    return dataclasses.replace(info, counter_of=counter, saved_by=checks.saved_by(out))


def _detached_alias_with_grad(out, f_args: list) -> bool:
    """``out`` (or its base) aliases an input's storage without being a view of it in autograd's
    sense (``x.detach()``, ``x.data``), and an in-place op with a value that requires grad gave it
    a history of its own."""
    root = out if out._base is None else out._base
    return (root._base is None and root.requires_grad and root.grad_fn is not None
            and not any(root is f for f in f_args) and not _from_custom_function(root))


def _in_callers_frame(info: OutputInfo, call_arg, fake_arg) -> OutputInfo:
    """An input view regenerated by geometry (no replay: symbolic sizes) with its offset in the caller's frame: the
    trace's input may sit at another offset than the caller's tensor (a clone of a non-leaf input, a written
    input's functional value, both at 0), and the view's geometry is in the trace's frame (``return a.detach()``
    of ``a = base[3:]`` under ``dynamic=True`` came back at offset 0: fuzz seed 13700090)."""
    if not isinstance(fake_arg, torch.Tensor) or info.view_meta is None:
        return info
    size, stride, offset, *rest = info.view_meta
    shift = fake_arg.storage_offset() - from_fun(call_arg).storage_offset()
    return dataclasses.replace(info, view_meta=(size, stride, offset + shift, *rest))


def _moved_onto_input(out, index: int, input_offset) -> OutputInfo:
    """Note [Detached aliases written with grad]: the graph returns the alias's value, differentiable;
    the runtime moves it onto the caller's storage (and takes ``out`` of it when ``out`` is a view). Its
    offset is relative to the input's (``input_offset``, in the functional frame: a written input's
    functional value sits at offset 0 whatever the caller's, fuzz seed 403092); the runtime adds the
    caller's."""
    view_meta = None
    root = out
    if out._base is not None:   # taken by geometry: its view ops start at the input's storage, not at root
        view_meta = _view_meta(out, True)
        root = out._base
    plain = from_fun(root)
    size, stride, offset = geometry(plain)
    return OutputInfo(kind="tensor", requires_grad=True, view_meta=view_meta,
                      view_base=plain if view_meta is not None else None,
                      on_input=(index, size, stride, offset - input_offset))


def _output_info(out, f_args: list, input_storages: dict, with_backward: bool, flat_fn: LeafSlots) -> OutputInfo:
    if not isinstance(out, torch.Tensor):
        return OutputInfo(kind="constant", constant=out)
    for i, f in enumerate(f_args):
        if out is f:
            return OutputInfo(kind="input", requires_grad=f.requires_grad, input_index=i)
    slot = flat_fn.slot_of_view(out)   # None while the function has no slots
    if slot is not None:   # Note [New leaves]: a view of a leaf made inside is a view of its slot
        requires_grad = bool(out.requires_grad)
        view_meta = _view_meta(out, requires_grad)
        on_input = flat_fn.geometry_on_input(out, slot)   # a slot sharing an input's storage
        return OutputInfo(kind="input_view", requires_grad=requires_grad, input_index=slot,
                          view_meta=view_meta if on_input is None else (*on_input, *view_meta[3:]))
    base = input_storages.get(StorageWeakRef(out.untyped_storage()))
    if base is not None and with_backward and _detached_alias_with_grad(out, f_args):
        return _moved_onto_input(out, base, from_fun(f_args[base]).storage_offset())
    if base is not None and not (with_backward and _from_custom_function(out)):
        # A view of an input is regenerated from the caller's tensor; a custom Function's output
        # that aliases an input is a plain output, so the Function's backward stays in the graph.
        replay = _view_replay(out)
        if replay is None and torch._functionalize_was_storage_changed(out.elem):
            # set_() of a tensor made inside onto the input's storage (fuzz seed 200016): its functional
            # geometry is in the frame of the input's functional value, which need not be the caller's
            # (a written input's offset is 0 there); replayed from the input, or refused.
            replay = _replay_from(out, f_args[base])
            if replay is None:
                raise UnsupportedError(f"a tensor made inside the function and set_() onto the storage of input "
                                       f"{base} is returned with a geometry that cannot be replayed on the "
                                       "caller's tensor", hint='return a clone of it, or pass on_unsupported="eager"')
        return OutputInfo(kind="input_view", requires_grad=out.requires_grad, input_index=base,
                          view_meta=_view_meta(out, bool(out.requires_grad)), view_replay=replay)
    view_meta = replay = view_base = None
    if with_backward and out._base is not None and not _from_custom_function(out) and not moved_off_base(out):
        # A view of an intermediate: returned from the autograd.Function it could not be modified
        # in place; the graph returns its base instead, and the runtime takes the view of it
        # (replaying the view ops: the base's real strides may differ from its fake's).
        view_meta = _view_meta(out, bool(out.requires_grad))
        if view_meta[5] and base_written_after(out):   # Note [Multi-output views of a written base]
            view_meta = (*view_meta[:5], WRITTEN_AFTER)
        replay = _view_replay(out, out._base)
        out = out._base
        view_base = from_fun(out)
    requires_grad = with_backward and out.requires_grad and (out.is_floating_point() or out.is_complex())
    return OutputInfo(kind="tensor", requires_grad=requires_grad, view_meta=view_meta, view_replay=replay,
                      view_base=view_base)
