"""What runs around the user's function while it is traced: functional wrappers, grad mode,
refusals of what would happen at trace time only, and the translation of tracer failures
into UnsupportedError. Eager's checks of in-place ops are in ``inplace.py``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
)
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.symbolic_shapes import guard_or_true
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._mode_utils import no_dispatch
from torch.utils.weak import WeakTensorKeyDictionary

from ..errors import UnsupportedError, source_from_traceback, user_source_line

try:  # the name moved between releases
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode as _DataDependentGuard
except ImportError:  # pragma: no cover
    _DataDependentGuard = RuntimeError

_REAL_TENSOR_REACHED = "Please convert all Tensors to FakeTensors first"   # FakeTensorMode on a real tensor
_FAKE_DATA_ACCESS = "data is not allocated yet"   # c10's message when a kernel reads a fake tensor's data
_DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException, _DataDependentGuard)
_SYMBOLIC_OFFSET_SET = "set_storage_offset() called on tensor with symbolic shape"   # c10's
_FUNCTIONALIZATION_LIMITS = ("functionalization",)   # RuntimeErrors functionalization raises on what it cannot express



class JointFunctionalMode(FunctionalTensorMode):
    """Functionalization for our traces; FSDP2's ``fsdp.copy_`` is an ``aten.copy_`` of its input.

    Note [fsdp.copy_]: PyTorch's functionalization kernel for ``fsdp.copy_`` writes the wrapped
    tensor in place and records no mutation, so the write would stay in the graph, ahead of the
    storage resize the epilogue applies (Note [Storage resize] in capture/metadata.py): a write
    into a 0-byte storage. Traced as the data mutation it is, its new value is a functional copy
    that the epilogue writes into the caller's tensor after resizing its storage.
    """

    def __init__(self):
        super().__init__(_allow_token_discovery=True)
        self._fsdp_copy = _fsdp_copy()
        self.inference_views: list = []   # source lines of views taken under inference mode (refused after the call)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.is_inference_mode_enabled() and isinstance(func, torch._ops.OpOverload) and func.is_view \
                and args and isinstance(args[0], FunctionalTensor) and not args[0].is_inference():
            # functionalization fails on a view of a normal tensor under inference mode: made outside it and refused
            # after the function ran (ModeSwitches.check), not here: a Dynamo graph's exit from inference mode is a
            # call after this op, which an exception would skip, leaving inference mode on behind it
            self.inference_views.append(user_source_line())
            with torch.inference_mode(False):
                return super().__torch_dispatch__(func, types, args, kwargs)
        if func is self._fsdp_copy:
            super().__torch_dispatch__(torch.ops.aten.copy_.default, types, tuple(args), kwargs)
            return None
        if func in _RESIZES:
            func, args, kwargs = _as_resize(func, args, kwargs or {})
        if (functional := _out_of_place(func)) is not None and args and isinstance(args[0], torch.Tensor) \
                and not static(*geometry(args[0])):
            # Functionalization's own in-place kernels of clamp_, hardtanh_, square_, ... fail on symbolic sizes
            # (c10's "SymIntArrayRef expected to contain only concrete integers", fuzz seed 13700022; an INTERNAL
            # ASSERT in PyTorch's arg parser under autocast, seed 13700170): the out-of-place op, then copy_
            value = super().__torch_dispatch__(functional, types, args, kwargs)
            if isinstance(value, torch.Tensor) and value.dtype == args[0].dtype and value.shape == args[0].shape:
                super().__torch_dispatch__(torch.ops.aten.copy_.default, types, (args[0], value), {})
                return args[0]   # else the op's own (eager refuses the cast)
        if func is _SET_SOURCE and isinstance(args[0], FunctionalTensor) and not hasattr(args[0], OLD_STORAGE):
            # Note [Inputs given another storage]: the first storage's value, where it was written
            old = super().__torch_dispatch__(torch.ops.aten.alias.default, types, (args[0],), {}) \
                if torch._functionalize_has_data_mutation(args[0].elem) else None
            setattr(args[0], OLD_STORAGE, old)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if func is _SET_SOURCE and isinstance(args[0], FunctionalTensor) and isinstance(args[1], FunctionalTensor):
            _take_storage_of(args[0], args[1])   # Note [set_ under functionalization]
            return out
        if func._schema.is_mutable and torch.Tag.inplace_view not in func.tags:
            for written in _written_args(func, args, kwargs or {}):
                _keep_layout(written)
        return out


_OUT_OF_PLACE_NAMED_OTHERWISE = {torch.ops.aten.pow_.Scalar: torch.ops.aten.pow.Tensor_Scalar,
                                 torch.ops.aten.pow_.Tensor: torch.ops.aten.pow.Tensor_Tensor}


@functools.cache
def _out_of_place(func) -> Any:
    """The out-of-place overload of the in-place ATen op ``func`` (``clamp_.default`` -> ``clamp.default``), where one
    exists with the same arguments; None for any other op."""
    if not isinstance(func, torch._ops.OpOverload) or func.namespace != "aten" or not func._schema.is_mutable \
            or torch.Tag.inplace_view in func.tags or torch.Tag.nondeterministic_seeded in func.tags:
        return None   # random ops keep theirs (their generator state, capture/generators.py)
    if func in _OUT_OF_PLACE_NAMED_OTHERWISE:
        return _OUT_OF_PLACE_NAMED_OTHERWISE[func]
    name = func._schema.name.split("::")[-1]
    if not name.endswith("_") or name.startswith("_") or name in ("copy_", "set_", "resize_", "resize_as_"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    overload = getattr(packet, func._overloadname, None) if packet is not None else None
    if overload is None or overload._schema.is_mutable \
            or [(a.name, str(a.type)) for a in overload._schema.arguments] \
            != [(a.name, str(a.type)) for a in func._schema.arguments]:
        return None
    return overload


_RESIZE = torch.ops.aten.resize_.default
_SET_SOURCE = torch.ops.aten.set_.source_Tensor
# Attribute of a FunctionalTensor given another storage by set_(): an alias of its first storage, taken
# before the first set_() where that storage was written (else None)
OLD_STORAGE = "_jointgraph_old_storage"


def _take_storage_of(t: FunctionalTensor, source: FunctionalTensor) -> None:
    """Note [set_ under functionalization]
    --------------------------------------
    Functionalization's ``t.set_(source)`` gives the tensor ``t``'s wrapper holds ``source``'s value
    and functional storage, but the wrapper keeps its own size, strides and (wrapper) storage: the
    program would go on seeing ``t`` with its old shape, and nothing would say that ``t`` now shares
    ``source``'s storage. The wrapper takes ``source``'s wrapper storage and geometry too, below
    autograd (the user's ``set_`` already moved ``t``'s version, and recorded what autograd records).
    ``x.data = y`` is traced as this ``set_`` (Note [Assigning .data] in capture/inplace.py). Refused: a
    new shape for a tensor that requires grad (eager's backward through it raises, ours would at
    trace time)."""
    if t.requires_grad and t.shape != source.shape:
        raise UnsupportedError("set_() (or .data =) giving a tensor that requires grad another shape is not "
                               f"supported ({tuple(t.shape)} to {tuple(source.shape)}): its gradient would have the "
                               "new shape, which its autograd history does not accept", source=user_source_line(),
                               hint='keep the shape, or pass on_unsupported="eager"')
    if not (static(*geometry(t)) and static(*geometry(source))):   # the wrapper's own set_ takes plain ints
        raise UnsupportedError("set_() (or .data =) of a tensor with symbolic sizes is not supported",
                               source=user_source_line(),
                               hint='pass dynamic=False, or on_unsupported="eager"')
    version = t._version
    with no_dispatch(), torch._C._AutoDispatchBelowADInplaceOrView():
        torch.ops.aten.set_.source_Tensor(t, source)
    torch._C._autograd._unsafe_set_version_counter((t,), (version,))
_RESIZE_AS = torch.ops.aten.resize_as_.default
_RESIZES = frozenset((_RESIZE, _RESIZE_AS))


def _as_resize(func, args: tuple, kwargs: dict) -> tuple:
    """A ``resize_`` or ``resize_as_`` as the ``resize_(t, size)`` it is, refused where it cannot be compiled.

    Note [resize_as_]: ATen's ``resize_as_(t, template)`` is ``t.resize_(template.shape)`` (restrided to
    ``memory_format`` when one is given). Functionalization has no kernel of its own for it and records a data
    mutation whose new value has the new shape, which the epilogue cannot copy into the caller's tensor
    of the old shape; as ``resize_`` it is the metadata mutation it is, replayed as eager's is."""
    t, size = args[0], (args[1] if func is _RESIZE else args[1].shape)
    memory_format = kwargs.get("memory_format")
    if func is _RESIZE_AS and memory_format is torch.preserve_format:
        memory_format = torch._prims_common.suggest_memory_format(args[1])
    if isinstance(t, FunctionalTensor):
        _refuse_growing_resize(func, t, size)
        _refuse_restride(func, memory_format)
    return _RESIZE, (t, size), ({} if memory_format is None else {"memory_format": memory_format})


def _refuse_restride(func, memory_format) -> None:
    """A resize to a channels-last layout: functionalization's resize keeps the new layout on the
    wrapper only, and the value computed behind it is contiguous, so it is refused by name."""
    if memory_format in (torch.channels_last, torch.channels_last_3d):
        raise UnsupportedError(
            f"{func._opname}() with memory_format={memory_format} is not supported: functionalization keeps "
            "the new layout on the tensor's wrapper only", source=user_source_line(),
            hint="resize to the contiguous layout and call .contiguous(memory_format=...) on the result, "
                 'or pass on_unsupported="eager"')


def _refuse_growing_resize(func, t: FunctionalTensor, size) -> None:
    """``t.resize_(size)`` (or ``resize_as_``) past the end of ``t``'s storage: eager re-allocates the
    storage (its new elements are uninitialized memory); functionalization has no functional form for a
    storage that grows (PyTorch's FunctionalTensorMode fails inside its aliasing fix-up), so it is refused
    by name, for inputs and for tensors made inside the function alike. A resize within the storage
    (smaller, or another shape of as many elements) is a metadata change and compiles."""
    needed = (t.storage_offset() + math.prod(size)) * t.element_size()
    # The inner tensor is read directly, not through from_fun: that would sync the wrapper, an op
    # dispatched from inside this mode's own dispatch; only the storage's size is needed here.
    have = torch._from_functional_tensor(t.elem).untyped_storage().nbytes()
    if guard_or_true(needed > have):
        raise UnsupportedError(
            f"{func._opname}() to {tuple(size)} grows the storage of a tensor of shape {tuple(t.shape)} "
            f"({have} bytes) to {needed} bytes: a storage that grows has no functional form, so it cannot be "
            "compiled", source=user_source_line(),
            hint="make the larger tensor instead (torch.empty(...) filled with copy_(), or torch.cat) and use it, "
                 'or pass on_unsupported="eager"')


def _written_args(func, args, kwargs) -> list:
    """The FunctionalTensors an in-place or out= op writes."""
    written = []
    for i, arg in enumerate(func._schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, FunctionalTensor):
            written.append(value)
    return written


def _keep_layout(t: FunctionalTensor) -> None:
    """Note [In-place ops keep the target's layout]: functionalization computes ``v.op_(...)`` as the
    out-of-place ``op``, whose result has the layout the kernel picks (``masked_fill`` of a
    transposed view is contiguous), while the wrapper keeps ``v``'s strides. Through a view, the
    base is then regenerated by the inverse view of that value (``a.t().masked_fill_(...)`` leaves
    ``a``'s value transposed), and everything computed from it afterwards, outputs included, has
    strides eager never shows. Eager writes in place, so the target keeps its strides: the new
    value is copied into the target's own layout, only when the two differ."""
    inner = torch._from_functional_tensor(t.elem)
    if _same_layout(inner, t):
        return
    fixed = torch.ops.aten.copy.default(
        torch.empty_strided(t.shape, t.stride(), dtype=inner.dtype, device=inner.device), inner)
    torch._functionalize_replace(t.elem, fixed)
    torch._functionalize_commit_update(t.elem)
    torch._functionalize_sync(t.elem)


def _same_layout(inner: torch.Tensor, t: torch.Tensor) -> bool:
    if inner.shape != t.shape or inner.numel() <= 1 or has_internal_overlap(t):
        return True   # not a layout difference this step can or needs to mend
    return all(a == b for n, a, b in zip(t.shape, inner.stride(), t.stride(), strict=True) if n != 1)


def _fsdp_copy():
    """``fsdp.copy_`` once ``torch.distributed.fsdp`` registered it, else None."""
    namespace = getattr(torch.ops, "fsdp", None)
    return getattr(getattr(namespace, "copy_", None), "default", None) if namespace is not None else None


def to_fun(x):
    return FunctionalTensor.to_functional(x) if isinstance(x, torch.Tensor) else x


def to_fun_input(x, leaf: bool):
    """A functional graph input that looks as the caller's tensor does: a leaf that requires grad
    stays a leaf (``is_leaf``, ``grad_fn is None``, eager's error on an in-place op under grad
    mode); ``to_fun`` alone makes every input a non-leaf."""
    if leaf and isinstance(x, torch.Tensor) and x.requires_grad and x.is_leaf:
        # Wrapped while it does not require grad, then marked: a leaf wrapper over x itself (an
        # alias made first, by detach(), would give a freed fake storage a new full one).
        x.requires_grad_(False)
        try:
            wrapper = FunctionalTensor.to_functional(x)
        finally:
            x.requires_grad_(True)
        return wrapper.requires_grad_()
    return to_fun(x)


def from_fun(x):
    if isinstance(x, FunctionalTensor):
        torch._sync(x)
        return torch._from_functional_tensor(x.elem)
    return x


def clone_as_is(t: torch.Tensor) -> torch.Tensor:
    """A copy with ``t``'s strides, even when ``t`` is not dense (a slice): ``clone()`` would make it
    contiguous, and ops that view or copy depending on strides (``reshape``) would then differ from eager."""
    if _dense(t) or has_internal_overlap(t):
        return t.clone()
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def grad_context(with_backward: bool):
    """Grad mode while tracing: on with a backward; without one, the caller's (off, unless the entry is
    traced again without the backward eager's backward would raise in, Note [Errors in the backward],
    where the function's own forward, its grad-mode switches included, runs as eager's does)."""
    # the caller's, restored on the way out: a Dynamo graph switches grad mode by calls, not a with block, and an
    # error between its calls would leave the switch behind
    return torch.enable_grad() if with_backward else torch.set_grad_enabled(torch.is_grad_enabled())


# Note [Grad mode switched on inside]
# -----------------------------------
# ``with torch.enable_grad(): y = x * 2`` (or ``torch.set_grad_enabled(True)``) inside a function the caller runs
# under ``torch.no_grad()``: eager's ``y`` has history into ``x``. A call under no_grad compiles no backward (its
# entry is the no_grad one), so such a ``y`` would come back without it. The metadata pass of a call under no_grad
# notes each op that records history (torch's own helpers run ops with grad mode on too: a new leaf's gradient edge
# is read through a throwaway view), and where a result, its base, or an input written so reaches the caller, it
# refuses by name (on_unsupported="eager" runs the call eagerly).
#
# ``torch.inference_mode()`` switched on inside is refused where an inference tensor it made is a result (eager's
# is one: autograd refuses to save it, an in-place op on it outside raises; the compiled one would not be) or where
# a view taken under it fails inside functionalization. Called under inference mode, the function is traced under it.
# eager's error for an in-place op on an inference tensor outside inference mode, word for word
INFERENCE_WRITE_ERROR = ("Inplace update to inference tensor outside InferenceMode is not allowed.You can make a "
                         "clone to get a normal tensor before doing inplace update.See "
                         "https://github.com/pytorch/rfcs/pull/17 for more details.")
_DATA = torch._C.TensorBase.__dict__["data"]   # the descriptor a ``t.data`` read's ``__get__`` is bound to
_NO_DATA_WRITE = frozenset({"requires_grad_", "detach_", "share_memory_"})   # in place, but write no element
_BASE = torch._C.TensorBase.__dict__["_base"]   # the descriptor a ``t._base`` read's ``__get__`` is bound to
# and for requires_grad_() on one (capture/leaves.py LeafBinder, which takes requires_grad_() of tensors made inside)
INFERENCE_REQUIRES_GRAD_ERROR = "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed."
_IN_PLACE_DUNDERS = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
                               "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__",
                               "__imatmul__"})


class ModeSwitches(torch.overrides.TorchFunctionMode):
    """Note [Grad mode switched on inside]: entered around the function in the metadata pass."""

    def __init__(self):
        super().__init__()
        self.watch_history = not torch.is_grad_enabled()
        self.inference = torch.is_inference_mode_enabled()
        self.recorded = WeakTensorKeyDictionary()   # a result with history -> (op, the user's source line)
        self.inference_made: dict = {}   # the storage of an inference tensor made inside -> the source line
        # inference tensors made inside, their views and detach()es taken outside -> whether an in-place op on one
        # outside inference mode raises in eager (it has no version counter: not a detach() or .data of one)
        self.inference_tensors = WeakTensorKeyDictionary()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not self.inference and torch.is_inference_mode_enabled():
            result = func(*args, **(kwargs or {}))
            for t in result if isinstance(result, (tuple, list)) else (result,):
                if isinstance(t, torch.Tensor) and t.is_inference():   # by storage: its views outside have no _base
                    self.inference_made.setdefault(StorageWeakRef(t.untyped_storage()), user_source_line())
                    self.inference_tensors[t] = True
            return result
        outside = bool(self.inference_tensors) and not torch.is_inference_mode_enabled()   # of inference made inside
        if outside:
            self._refuse_inference_write(func, args, kwargs or {})
        if self.watch_history and torch.is_grad_enabled():
            result = self._recording_history(func, args, kwargs or {})
        else:
            result = func(*args, **(kwargs or {}))
        if outside:
            self._follow_inference_views(func, args, result)
        return result

    def _recording_history(self, func, args: tuple, kwargs: dict):
        """``func``'s result, each tensor it gives history (grad mode switched on in a call under no_grad) noted."""
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        written = [t for t in (target, target._base if target is not None else None) if t is not None]
        before = [_grad_fn(t) for t in written]
        result = func(*args, **kwargs)
        # a new tensor with history (a view property too: ``w.T``), not an argument handed back (``x.contiguous()``)
        given = pytree.tree_leaves((args, kwargs))   # also inside a list argument (torch.atleast_1d([x, y]))
        # nor its base (``x._base``, read with a rebuilt input's base its stand-in: fuzz --semantics12 seed 14604295)
        read_base = getattr(func, "__self__", None) is _BASE
        bases = [a._base for a in given if isinstance(a, torch.Tensor)] if read_base else ()
        made = [t for t in (result if isinstance(result, (tuple, list)) else (result,))
                if isinstance(t, torch.Tensor) and not any(t is a for a in given) and not any(t is b for b in bases)]
        # a tensor written in place, and its base, whose history the write changed (fuzz --semantics12 seed
        # 13900026: ``b[0].mul_(3.0)`` of an input under set_grad_enabled(True); ``y[0] = w.sum()``)
        made += [t for t, grad_fn in zip(written, before, strict=True) if _grad_fn(t) is not grad_fn]
        for t in made:
            # a stand-in jointgraph rebuilt is recorded again by the first op of the user's that gives it history
            if t.requires_grad and _has_history(t) and (t not in self.recorded or t.__dict__.pop(_REBUILT, False)):
                self.recorded[t] = (_op_name(func), user_source_line())
        return result

    def _refuse_inference_write(self, func, args: tuple, kwargs: dict) -> None:
        """Eager's error for an in-place op, outside inference mode, on an inference tensor made inside or a view of
        one (which functionalization does not mark; not a ``detach()`` or ``.data`` of one, which eager writes);
        fuzz --semantics12 seed 14804477, ``t1[1:1].clamp_(...)`` of a ``clone()`` made under it: the trace wrote a
        plain tensor."""
        name = getattr(func, "__name__", "")
        target = args[0] if args else None
        written = [] if name in _NO_DATA_WRITE else [*pytree.tree_leaves(target)] if name.startswith("_foreach_") \
            and name.endswith("_") else [target] if name.endswith("_") and not name.startswith("_") \
            or name in _IN_PLACE_DUNDERS or kwargs.get("inplace") is True else []
        written += pytree.tree_leaves(kwargs.get("out"))
        if any(isinstance(t, torch.Tensor) and self.inference_tensors.get(t) for t in written):
            raise RuntimeError(INFERENCE_WRITE_ERROR)

    def _follow_inference_views(self, func, args: tuple, result) -> None:
        """Outside inference mode: a view of an inference tensor is one, without a version counter (an in-place op
        on it raises); its ``detach()`` or ``.data`` is one with a counter of its own (written freely)."""
        source = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if source is None or source not in self.inference_tensors:
            return
        counted = getattr(func, "__name__", "") == "detach" or getattr(func, "__self__", None) is _DATA
        storage = StorageWeakRef(source.untyped_storage())
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, torch.Tensor) and t is not source and StorageWeakRef(t.untyped_storage()) == storage:
                self.inference_tensors[t] = not counted
                setattr(t, _INFERENCE_VIEW, True)   # for LeafBinder's requires_grad_() (inference_in_eager)

    def check(self, tensors: list, inference_views: list = ()) -> None:
        """Refuse where one of ``tensors`` (the results, the inputs), or its base, still has history it got under a
        grad mode switched on inside a call under no_grad (or a custom Function's, which no mode sees applied), or
        is an inference tensor made inside (or a view of one)."""
        if inference_views and not self.inference:   # JointFunctionalMode.inference_views
            raise _inference_refused("a view taken under it cannot be traced", inference_views[0])
        for t in tensors if not self.inference else ():
            made = self.inference_made.get(StorageWeakRef(t.untyped_storage())) \
                if self.inference_made and isinstance(t, torch.Tensor) else None   # no storage read where none made
            if made is not None or isinstance(t, torch.Tensor) and t.is_inference():   # (fuzz --semantics12 seed
                raise _inference_refused("a result is an inference tensor (or a view of one), which a compiled "
                                         "graph does not make", made or user_source_line())   # 13901505: a view)
        for t in tensors if self.watch_history else ():
            for u in (t, t._base) if isinstance(t, torch.Tensor) else ():
                if u is None or not (u in self.recorded or _custom_history(u)) or not _has_history(u) \
                        or getattr(u, _REBUILT, False):
                    continue
                op, source = self.recorded[u] if u in self.recorded else ("a custom autograd.Function", None)
                raise UnsupportedError(
                    f"{op} records autograd history under torch.enable_grad() (or set_grad_enabled(True)) "
                    "inside a function called under torch.no_grad(), and its result reaches the caller: the "
                    "call compiles no backward, so that history would be lost: not supported", source=source,
                    hint='call the function with grad mode on, or pass on_unsupported="eager"')


_INFERENCE_VIEW = "_jointgraph_inference_view"


def inference_in_eager(t: torch.Tensor) -> bool:
    """``t`` is an inference tensor in eager: one, or a view or detach() taken outside inference mode of one made
    inside, which the trace's tensors do not say (``ModeSwitches`` marks those)."""
    return t.is_inference() or getattr(t, _INFERENCE_VIEW, False)


_REBUILT = "_jointgraph_rebuilt_with"


class AsStridedChainWrite(UnsupportedError):
    """Functionalization's refusal of a write through a view chain that holds an ``as_strided`` (a user's, or one
    jointgraph's own rebuild of aliased inputs put there: runtime/aliasing.py tells the two apart)."""


def rebuilt_as_the_callers(make: Callable[[], torch.Tensor], with_grad: bool, under_no_grad: bool = False) \
        -> torch.Tensor:
    """``make()``, a view jointgraph makes inside the trace as a stand-in of a caller's tensor (an expanded input
    rebuilt from its compact memory, runtime/expanded.py; a view of aliased inputs rebuilt from their synthetic base,
    runtime/aliasing.py), made ``with_grad`` as the caller's was, under a caller's no_grad too: a view made under
    no_grad has no history, and eager's error for one written, then read under enable_grad (fuzz --semantics12 seeds
    14604295, 14814921). Made with grad, it is marked: ``ModeSwitches`` does not count that history, which the
    caller's tensor has already, as made inside until an op of the user's gives it history (a write under
    enable_grad; reading it after a write under no_grad regenerates its node, as eager's). ``under_no_grad``: the
    caller made it under no_grad, so it is made so whatever the call's grad mode (its creation meta is eager's: an
    in-place op with grad on it, or a read of it with grad after a write into its storage, raises eager's error)."""
    if under_no_grad:
        with torch.no_grad():
            return make()
    if not with_grad:
        return make()
    with torch.enable_grad():
        t = make()
    setattr(t, _REBUILT, True)
    return t


def _grad_fn(t: torch.Tensor, stale=None):
    """``t.grad_fn``; ``stale`` for a stale view refusing to give it (one it had)."""
    try:
        return t.grad_fn
    except RuntimeError:
        return stale


def _custom_history(t: torch.Tensor) -> bool:
    """``t``'s grad_fn is a custom autograd.Function's node: under no_grad, only a switched-on grad mode made it."""
    return isinstance(_grad_fn(t), torch.autograd.function.BackwardCFunction)


def _inference_refused(why: str, source) -> UnsupportedError:
    return UnsupportedError(
        f"torch.inference_mode() is switched on inside the compiled function, and {why}: not supported",
        source=source,
        hint="use torch.no_grad() inside the function, call the whole compiled function under "
             'torch.inference_mode(), or pass on_unsupported="eager"')


def _has_history(t: torch.Tensor) -> bool:
    return _grad_fn(t, stale=True) is not None


def _op_name(func) -> str:
    name = getattr(func, "__name__", None) or str(func)
    owner = getattr(func, "__objclass__", None) or getattr(func, "__self__", None)
    return f"Tensor.{name}" if owner is torch.Tensor or owner is torch._C.TensorBase else f"torch.{name}"


_AS_INPUTS = threading.local()   # ids of tensors the traced function takes as inputs (rebuilt aliased views)


@contextlib.contextmanager
def treated_as_inputs(tensors: list):
    """``requires_grad_()`` on these (views rebuilt from a synthetic base, Note [Aliased inputs]) is
    an input's: the caller applies it."""
    before = getattr(_AS_INPUTS, "ids", frozenset())
    _AS_INPUTS.ids = before | {id(t) for t in tensors}
    try:
        yield
    finally:
        _AS_INPUTS.ids = before


_REQUIRES_GRAD = torch._C.TensorBase.__dict__["requires_grad"]   # the descriptor of `t.requires_grad = ...`


def geometry(t: torch.Tensor) -> tuple:
    """(size, stride, storage offset) of ``t``."""
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def static(size, stride, offset) -> bool:
    """Every size, stride and the offset are plain ints (no symbols)."""
    return all(isinstance(v, int) for v in (*size, *stride, offset))


def has_internal_overlap(t: torch.Tensor) -> bool:
    """Eager's definite overlap (MemOverlap::Yes): a dimension of stride 0 and size > 1, in a tensor
    with elements (an empty one overlaps nothing)."""
    return t.numel() > 0 and any(st == 0 and sz > 1 for sz, st in zip(t.shape, t.stride(), strict=True))


def _dense(t: torch.Tensor) -> bool:
    return torch._prims_common.is_non_overlapping_and_dense_or_false(t)



@contextlib.contextmanager
def compiling():
    """``torch.compiler.is_compiling()`` is True while jointgraph traces, as under torch.compile and
    torch.export, so libraries (Hugging Face transformers among them) take their trace-safe branches
    instead of branching on tensor values."""
    import torch.compiler as compiler

    old = getattr(compiler, "_is_compiling_flag", None)
    if old is None:   # pragma: no cover - a torch without the flag
        yield
        return
    compiler._is_compiling_flag = True
    try:
        yield
    finally:
        compiler._is_compiling_flag = old


_DATA_DEPENDENT_HINT = ("compute it outside the compiled function; a size may stay symbolic (torch.zeros(n.item()) "
                        'compiles, int(n.item()) asks for the value); or pass on_unsupported="eager"')
# int() and bool() must return Python values, which make_fx cannot give without the tensor's value;
# Dynamo rewrites them into symbols (or breaks the graph at a branch), so torch.compile is the way out.
_PYTHON_VALUE_HINT = ("compute the value outside the compiled function and pass it as a Python int; or keep it a "
                      "tensor or a symbolic size (torch.zeros(n.item()) compiles, int(n.item()) asks for the value); "
                      'or use torch.compile(fn, backend="jointgraph"), which traces int(n.item()) with '
                      "torch._dynamo.config.capture_scalar_outputs = True and breaks the graph at a Python branch; "
                      'or pass on_unsupported="eager"')


VIEW_INCOMPATIBLE = ("view size is not compatible with input tensor's size and stride (at least one dimension "
                     "spans across two contiguous subspaces). Use .reshape(...) instead.")


def frozen_storage_write(source: str | None) -> UnsupportedError:
    """The refusal of a write into a storage a ``set_()`` (or ``.data =``) moved a tensor off."""
    return UnsupportedError(
        "an in-place write into a storage that an earlier set_() (or .data =) moved a tensor off cannot "
        "be compiled (functionalization freezes the storage a tensor leaves)",
        source=source,
        hint='write before the set_() (or .data =), or write a clone, or pass on_unsupported="eager"')


@contextlib.contextmanager
def translate_errors():
    """Turn tracer failures the user cannot see into UnsupportedError with their source line."""
    try:
        yield
    except UnsupportedError:
        raise
    except _DATA_DEPENDENT as exc:
        op = getattr(exc, "func", None)
        what = f"data-dependent operation {op}" if op is not None else "data-dependent Python control flow or value"
        raise UnsupportedError(
            f"{what} cannot be compiled ahead of time: its result depends on tensor values ({type(exc).__name__})",
            source=source_from_traceback(exc),
            hint=_DATA_DEPENDENT_HINT if op is not None else _PYTHON_VALUE_HINT) from exc
    except AssertionError as exc:
        if _REAL_TENSOR_REACHED not in str(exc):
            raise
        # Note [Captured tensors]: a real tensor reached below __torch_function__ or in the backward.
        raise UnsupportedError(f"a real tensor reached the tracer where it cannot be lifted into a graph input: "
                               f"{str(exc).partition('Found in ')[2][:200] or exc}",
                               source=source_from_traceback(exc),
                               hint='pass the tensor as an argument, or pass on_unsupported="eager"') from exc
    except UnsupportedOperatorException as exc:
        raise UnsupportedError(f"operator {exc.func} has no fake-tensor implementation",
                               source=source_from_traceback(exc)) from exc
    except ValueError as exc:
        if not str(exc).startswith("Cannot view a tensor with shape"):
            raise
        # Fake tensors' view() raises ValueError where eager's kernel raises this RuntimeError.
        raise RuntimeError(VIEW_INCOMPATIBLE) from exc
    except RuntimeError as exc:
        message = str(exc)
        if "cannot mutate tensors with frozen storage" in message:
            raise frozen_storage_write(source_from_traceback(exc)) from exc
        if _SYMBOLIC_OFFSET_SET in message:   # as_strided_ on a tensor with symbolic sizes (fuzz seed 13700066)
            raise UnsupportedError("as_strided_() (or another op setting a storage offset) on a tensor with "
                                   "symbolic sizes cannot be traced", source=source_from_traceback(exc),
                                   hint='pass dynamic=False, or on_unsupported="eager"') from exc
        if "as_strided() is non-compositional" in message:
            # functionalization's own ban: a write through a view chain one of whose views is as_strided (the
            # view set_() or .data = leaves between tensors sharing a storage is one; fuzz seed 3000390)
            raise AsStridedChainWrite(
                "a write through a view whose chain of view ops contains as_strided (an as_strided() view, or a "
                "tensor set_() onto another's storage) cannot be traced: functionalization cannot replay "
                "as_strided in a view chain", source=source_from_traceback(exc),
                hint='write the base tensor itself, or a clone, or pass on_unsupported="eager"') from exc
        if message.startswith("new_fn INTERNAL ASSERT FAILED"):
            # autograd regenerates the grad_fn of a view whose base was written since it was made; on the
            # traced (functional) tensors that regeneration fails inside autograd (fuzz seed 31799: a view of
            # an input given requires_grad_(), the input then written under no_grad).
            raise UnsupportedError(
                "autograd cannot regenerate, while tracing, the history of a view whose base was written in place "
                "after the view was made (an internal assertion in PyTorch's autograd)",
                source=source_from_traceback(exc),
                hint='take the view after the write, write a clone, or pass on_unsupported="eager"') from exc
        if _FAKE_DATA_ACCESS in message:
            # A kernel read the data of a fake tensor: its result depends on tensor values.
            raise UnsupportedError(
                "an operation reads tensor values while tracing (for example indices passed as a tensor), "
                "so it cannot be compiled ahead of time", source=source_from_traceback(exc),
                hint='pass such arguments as Python values, or pass on_unsupported="eager"') from exc
        if any(k in message for k in _FUNCTIONALIZATION_LIMITS) and not message.startswith("unsupported operation"):
            first = message.strip().splitlines()[0]
            raise UnsupportedError(f"this in-place operation cannot be expressed functionally: {first}",
                                   source=source_from_traceback(exc),
                                   hint='apply it to a clone (x = x.clone()), or pass on_unsupported="eager"') from exc
        raise


def shares_version_counter(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``b`` moves with ``a``'s version counter (a view or detach of it): probed, then restored."""
    if a.is_inference() or b.is_inference():
        return False
    version, other = a._version, b._version
    torch.autograd.graph.increment_version(a)
    shared = b._version != other
    torch._C._autograd._unsafe_set_version_counter((a,), (version,))
    return shared
