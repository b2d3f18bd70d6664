"""Eager's checks and rewrites of in-place ops, applied while tracing.

Note [Eager's in-place checks]
------------------------------
Functionalization turns every in-place op into an out-of-place op plus a write-back, so
it never sees what eager's kernels refuse: writing into a tensor whose elements share
memory (``x.expand(2, 3).add_(1)``) or reading from a tensor that partly overlaps the one
written (``x[1:].copy_(x[:-1])``). ``EagerInPlaceChecks`` (a TorchFunctionMode, so it sees
the user's tensors with their real view geometry) raises eager's own RuntimeError for
both, at the call, as eager does. Writes into an ``expand``ed tensor that eager allows
(``fill_`` / ``zero_``: every copy of an element gets the same value) are applied to the
tensor that was expanded, which holds exactly the written memory; functionalization's
inverse of ``expand`` (a sum over the expanded dimensions) would otherwise multiply the
written value. Other writes into tensors with overlapping elements (``unfold`` windows)
depend on the order eager's kernel visits them and are refused.

Note [Writes into expanded tensors]
-----------------------------------
``e = s.expand(2, 3)`` shares ``s``'s memory: every row of ``e`` is ``s``. Eager writes
through ``e`` (or any view of it: ``e[0]``, ``e[mask]``) straight into that memory.
Functionalization instead computes ``e``'s new value and scatters it back into ``s``
with its inverse of ``expand``, a sum over the expanded dimensions: ``e[0].fill_(1)``
would leave ``s`` at ``1 + s`` and ``e.fill_(True)`` on a bool tensor crashes. So the
in-place checks (``context.EagerInPlaceChecks``) follow which tensors are views of an
expand, and of which source, and rewrite a write into one of them as a write into the
source that touches the same memory:

* a target with the source's own geometry (``s.expand(3)`` of a 1-D ``s``) is ``s``: the op
  runs on ``s``;
* a target whose elements do not overlap (``e[0]``) gets its new value on a copy; the value is
  placed in ``s`` through the storage offsets of both geometries (an ``index_put`` into a
  buffer spanning both, read back at ``s``'s offsets) and copied into ``s``. A view op
  (``as_strided`` of ``s``) would be shorter, but functionalization cannot write through
  ``as_strided`` in a view chain;
* a target whose elements overlap (``e`` itself, ``e[:, mask]``) can only be written
  with one value per element for the result not to depend on the kernel's order: a fill
  (``fill_``, ``zero_``, ``masked_fill_``, ``index_fill_``, ``x[i] = scalar``,
  ``index_put_`` of one value). The op runs on a boolean tensor of the target's shape
  that owns its memory, marking which elements it writes; the marks are carried to the
  source through the storage offsets of both geometries (an ``index_put`` that
  accumulates per memory location), and the source is filled where it was marked.

Any other write into overlapping elements is what eager refuses or leaves to its
kernel's order; the checks raise or refuse those before this module is asked.

An ``unfold`` (``x.unfold(0, 2, 1)``) is such a view too, with ``x`` its source: functionalization
refuses any write through one, eager writes through it (its windows overlapping or not: no stride
is 0). Where they do not overlap, the copy path above applies; where they do, fills take the
marks; an idempotent elementwise op with
scalar arguments (``clamp_``, ``relu_``, ``abs_``, ...) gives every copy of an element one
value, whichever order the kernel visits them in, and takes the copy path where autograd does
not record it (with autograd, the copies' gradients would add up where eager's do not).

Geometry is read from the values functionalization holds (``from_fun``): that is the
frame ``as_strided`` on the functional source is applied in.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
import weakref
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import _disable_current_modes

from ..errors import UnsupportedError, user_source_line
from ..ir.sizes import extent
from .context import (
    _AS_INPUTS,
    VIEW_INCOMPATIBLE,
    _dense,
    _grad_fn,
    from_fun,
    frozen_storage_write,
    geometry,
    has_internal_overlap,
    shares_version_counter,
    static,
)

INTERNAL_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single "
                    "memory location. Please clone() the tensor before performing the operation.")
PARTIAL_OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                   "single memory location. Please clone() the tensor before performing the operation.")

_METADATA_ONLY = frozenset({
    "requires_grad_", "retain_grad", "share_memory_", "record_stream", "detach_", "t_", "transpose_", "swapdims_",
    "swapaxes_", "unsqueeze_", "squeeze_", "as_strided_", "resize_", "resize_as_", "set_", "resize_storage_bytes_",
})
# Metadata-only in-place ops that bump the version counter eager shares among a storage's views.
_VERSIONED_METADATA = frozenset({"t_", "transpose_", "swapdims_", "swapaxes_", "unsqueeze_", "squeeze_",
                                 "as_strided_", "resize_", "resize_as_"})
# In-place view ops that reorder a view's dimensions or elements (Note [Writes after an in-place view op on a view]).
_PERMUTING_METADATA = frozenset({"t_", "transpose_", "swapdims_", "swapaxes_", "as_strided_"})
# Writes eager allows into a tensor whose elements overlap (it checks neither overlap).
_OVERLAP_UNCHECKED = frozenset({
    "fill_", "zero_", "masked_fill_", "index_put_", "index_fill_", "put_", "masked_scatter_", "fill_diagonal_",
    "index_add_", "index_copy_", "scatter_add_", "scatter_reduce_", "bernoulli_", "random_", "exponential_",
    "geometric_", "cauchy_", "log_normal_",
})
_EXPANDS = frozenset({torch.Tensor.expand, torch.Tensor.expand_as, torch.Tensor.broadcast_to, torch.broadcast_to})
_DUNDER_WRITES = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
                            "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__",
                            "__imatmul__"})
_DATA = torch._C.TensorBase.__dict__["data"]   # the descriptor whose __get__ is `x.data`
_GRAD = torch._C.TensorBase.__dict__["grad"]   # and ``x.grad``: an argument's stand-in carries none of the caller's
_GET_DATA = torch._C._autograd._get_data_attr   # what Dynamo records for `x.data`


# Functional forms whose ``inplace=True`` always writes their input (``F.relu`` and its kin).
_ALWAYS_WRITE_IN_PLACE = frozenset({
    "relu", "relu6", "hardtanh", "leaky_relu", "elu", "selu", "celu", "rrelu", "_threshold", "silu", "mish",
    "hardswish", "hardsigmoid"})


def _inplace_argument(func, args: tuple, kwargs: dict):
    """The ``inplace`` argument of a functional form, by keyword or by position (``nn.Hardtanh`` passes it
    positionally), or None."""
    if "inplace" in kwargs:
        return kwargs["inplace"]
    position = _inplace_position(func)
    return args[position] if position is not None and position < len(args) else None


@functools.cache
def _inplace_position(func) -> int | None:
    try:
        names = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None
    return names.index("inplace") if "inplace" in names else None


def _reads_autograd_state(func, name: str) -> bool:
    """A read of ``t.requires_grad``, ``t.is_leaf`` or ``t.grad_fn``, in any grad mode."""
    return name == "__get__" and getattr(getattr(func, "__self__", None), "__name__", None) in (
        *_GRAD_FN_GETTERS, "requires_grad")


def _differentiable_result(result) -> bool:
    """The op's (first) result can require grad: a floating-point or complex tensor (not a comparison's or an
    index's)."""
    first = result[0] if isinstance(result, (tuple, list)) and result else result
    return isinstance(first, torch.Tensor) and (first.is_floating_point() or first.is_complex())


def _root_of(t: torch.Tensor) -> torch.Tensor:
    """``t``'s autograd base, or ``t`` itself when it is no view (a ``detach()`` is a root of its own)."""
    return t if t._base is None else t._base


# Custom in-place ops whose eager call moves their target's version (FSDP2's copy into an unsharded parameter);
# ``inductor::resize_storage_bytes_`` moves none
_CUSTOM_WRITES_MOVING_VERSIONS = frozenset({"fsdp::copy_"})


def _custom_op_name(func) -> str | None:
    """``namespace::name`` of a ``torch.ops`` op (a packet or an overload), else None."""
    if isinstance(func, torch._ops.OpOverload):
        func = func.overloadpacket
    return getattr(func, "_qualified_op_name", None) if isinstance(func, torch._ops.OpOverloadPacket) else None


def _is_in_place(name: str) -> bool:
    """A method that writes its tensor's elements (``add_``, ``copy_``), not only its metadata."""
    return name.endswith("_") and not name.startswith("_") and name not in _METADATA_ONLY




def _partial_overlap(out: torch.Tensor, other: torch.Tensor, strides=None) -> bool:
    """Eager's MemOverlapStatus::Partial between a written tensor and a read one.

    Offsets are read from the tensors functionalization holds (views of one current value),
    not from the functional wrappers, whose offsets go stale after a write to the base; whether
    eager can tell at all (both tensors dense) is read from the wrappers, which keep the user's
    strides (a write gives an input a new, contiguous value). ``strides``: eager's strides of a
    tensor, where the tracer's view ops chose others (``_eager_view_strides``)."""
    if other is out or out.numel() == 0 or other.numel() == 0:
        return False
    if not (_dense(out) and _dense(other)):   # the user's geometry: eager's "too hard to tell"
        return False
    strides = strides or (lambda t: tuple(t.stride()))
    same_strides = out.shape == other.shape and strides(out) == strides(other)   # size-1 dims' too, as eager's
    out, other = from_fun(out), from_fun(other)
    if not (_dense(out) and _dense(other)):
        return False
    if _storage_id(out) != _storage_id(other):
        return False
    a0, a1 = out.storage_offset() * out.element_size(), (out.storage_offset() + out.numel()) * out.element_size()
    b0 = other.storage_offset() * other.element_size()
    b1 = (other.storage_offset() + other.numel()) * other.element_size()
    # The same bytes are a full overlap only with the same strides (a.unsqueeze(0) against a is partial).
    return a0 < b1 and b0 < a1 and ((a0, a1) != (b0, b1) or not same_strides)


_AS_STRIDED = frozenset({torch.Tensor.as_strided, torch.as_strided, torch.Tensor.as_strided_})


def _eager_view_strides(func, args: tuple, kwargs: dict, strides: Callable) -> tuple | None:
    """The strides eager gives the view ``func(*args, **kwargs)`` makes: the op run on meta tensors with
    the arguments' strides as eager made them (``strides``). The tracer's own view ops choose other
    strides for size-1 dims in places (fuzz seed 4404547: ``t.view(-1)`` of a (1, 1) ``t`` with strides
    (2, 2) is (2,) in eager; ``x.data`` of a (1, 4) view with strides (8, 1): seed 4900167), which eager's
    overlap check compares. None where it cannot tell (symbolic sizes, an op meta tensors refuse)."""
    def meta(t):
        if not isinstance(t, torch.Tensor):
            return t
        if not static(tuple(t.shape), strides(t), 0):
            raise _NoMeta
        return torch.empty_strided(tuple(t.shape), strides(t), dtype=t.dtype, device="meta")

    try:
        with _disable_current_modes(), torch._C.DisableTorchFunction():
            margs = [type(a)(meta(x) for x in a) if isinstance(a, (list, tuple)) else meta(a) for a in args]
            view = func(*margs, **{k: meta(v) for k, v in kwargs.items()})
    except (_NoMeta, RuntimeError, TypeError, ValueError, NotImplementedError, AttributeError):
        return None
    return tuple(view.stride()) if isinstance(view, torch.Tensor) else None


class _NoMeta(Exception):
    """An argument a meta tensor cannot stand for."""


def _check_view(t: torch.Tensor, args: tuple, kwargs: dict) -> None:
    """Eager's refusal of ``t.view(shape)`` where no strides give ``t``'s elements that shape; fake tensors
    allow some of these (``b.expand(2, 1, 5).view(-1)`` of a (1, 5) ``b``: fuzz seed 2701701)."""
    shape = kwargs.get("size", args[0] if len(args) == 1 and not isinstance(args[0], int) else args)
    if not isinstance(shape, (tuple, list, torch.Size)) or not all(type(n) is int for n in shape):
        return   # view(dtype), or symbolic sizes: fake tensors decide
    if not static(*geometry(t)) or t.numel() == 0:
        return
    known = math.prod(n for n in shape if n != -1)
    if list(shape).count(-1) > 1 or known == 0 or t.numel() % known:
        return   # eager's own shape errors, which fake tensors raise too
    shape = [t.numel() // known if n == -1 else n for n in shape]
    if math.prod(shape) == t.numel() and not _viewable(t.shape, t.stride(), shape):
        raise RuntimeError(VIEW_INCOMPATIBLE)


def _viewable(sizes, strides, shape) -> bool:
    """Whether elements of the given sizes and strides can be read with ``shape`` by strides alone: each run of
    old dimensions contiguous with one another (dimensions of size 1 join any run) must be covered exactly by
    whole dimensions of ``shape``."""
    if not sizes:
        return True
    d = len(shape) - 1
    base, run = strides[-1], 1   # the run's innermost stride, and its number of elements so far
    for k in range(len(sizes) - 1, -1, -1):
        run *= sizes[k]
        if k > 0 and (sizes[k - 1] == 1 or strides[k - 1] == run * base):
            continue   # dimension k - 1 continues the run
        covered = 1
        while d >= 0 and (covered < run or shape[d] == 1):
            covered *= shape[d]
            d -= 1
        if covered != run:
            return False
        if k > 0:
            base, run = strides[k - 1], 1
    return d < 0


def _check_as_strided_bounds(t: torch.Tensor, size, stride, storage_offset=None, *, copy: bool = False,
                             caller_bytes: int = 0, name: str = "as_strided_") -> None:
    """Eager's check of an ``as_strided`` geometry against the storage, at the call: fake tensors
    would instead grow the storage (and a dead ``as_strided`` would never run). ``copy``: ``t``'s storage is
    a copy of an input's elements (an input that requires grad, traced on a clone), whose caller's storage
    may hold more. ``caller_bytes``: the size of the caller's storage when ``t`` is (a view of) an input: a write
    gives the traced value a storage of the input's own elements (fuzz --semantics12 seed 3106363)."""
    offset = t.storage_offset() if storage_offset is None else storage_offset
    if not static(size, stride, offset) or any(n == 0 for n in size):
        return
    needed = extent(size, stride, offset) * t.element_size()
    # A functional wrapper of an input view reports its own extent; the value it wraps, the storage's.
    own, have = t.untyped_storage().nbytes(), from_fun(t).untyped_storage().nbytes()
    if isinstance(have, int):
        have = max(have, caller_bytes)
    if isinstance(own, int) and isinstance(have, int) and (own < needed <= have or copy and needed > own):
        # fuzz seed 504421: ``a[1:].as_strided_((2,), (1,))`` on an input requiring grad (its copy is smaller)
        raise UnsupportedError(f"{name}() of an input view to a geometry reaching past "
                               "the view's own elements into the rest of its storage is not supported: "
                               "functionalization gives the input only its own elements", source=user_source_line(),
                               hint="take the view from the base tensor instead, or pass the base, or "
                                    'pass on_unsupported="eager"')
    have = max(own, have)
    if isinstance(have, int) and needed > have:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, and "
                           f"itemsize {t.element_size()} requiring a storage size of {needed} are out of bounds "
                           f"for storage of size {have}")


def _same_data(target: torch.Tensor, source) -> bool:
    """``source`` is ``target``'s own memory with its geometry and dtype: eager's ``copy_`` does nothing."""
    if source is target:
        return True
    if not isinstance(source, torch.Tensor) or _storage_id(source) != _storage_id(target):
        return False
    # In the user's geometry and in the values functionalization holds (wrapper offsets go stale).
    return all((*geometry(s), s.dtype) == (*geometry(t), t.dtype)
               for s, t in ((source, target), (from_fun(source), from_fun(target))))


def _unordered_overlap(out: torch.Tensor, other: torch.Tensor) -> bool:
    """A read tensor that shares written elements with ``out`` under another geometry, where eager
    cannot tell (one of them is not dense): its kernel reads some elements before and some after
    writing them. Same geometry (``x.mul_(x.view_as(x))``) reads each element before writing it."""
    if other is out or out.numel() == 0 or other.numel() == 0 or _storage_id(out) != _storage_id(other):
        return False
    if _dense(out) and _dense(other):
        return False   # eager's own check decides (_partial_overlap)
    out, other = from_fun(out), from_fun(other)
    if not (static(*geometry(out)) and static(*geometry(other))):
        return True   # symbolic: cannot tell, so cannot promise eager's result
    if _same_elements_in_order(out, other):
        return False
    return bool(np.intersect1d(_element_offsets(out), _element_offsets(other)).size)


def _same_elements_in_order(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Element i of ``a`` is element i of ``b`` (once broadcast): each is read before it is written."""
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        return False
    if tuple(shape) != tuple(a.shape):
        return False
    expanded = b.expand(shape) if tuple(b.shape) != tuple(shape) else b
    return bool(np.array_equal(_element_offsets(a), _element_offsets(expanded)))


def _element_offsets(t: torch.Tensor) -> np.ndarray:
    """The storage offset of each element of ``t``, flattened in ``t``'s order."""
    return _geometry_offsets(t.shape, t.stride(), t.storage_offset())


def _geometry_offsets(sizes, strides, offset: int) -> np.ndarray:
    """The storage offset of each element of a tensor of that geometry, flattened in its order."""
    offsets = np.full((), offset, dtype=np.int64)
    for size, stride in zip(sizes, strides, strict=True):
        offsets = offsets[..., None] + np.arange(size, dtype=np.int64) * stride
    return offsets.reshape(-1)


EXPANDED_INPUT_WRITTEN = ("an input whose elements share memory (an expanded tensor, stride 0) is written in place; "
                          "its new value cannot be expressed functionally")
EXPANDED_INPUT_HINT = ("pass the tensor before expand (or a .clone() of the expanded one), or pass "
                       'on_unsupported="eager"')
class ExpandedInputWritten(UnsupportedError):
    """An expanded input is written in place: traced as itself, its new value cannot be expressed functionally.
    The caller compiles it as an expand of its compact memory where it can (Note [Expanded inputs written in
    place] in runtime/expanded.py); this is the refusal where it cannot."""

    def __init__(self):
        super().__init__(EXPANDED_INPUT_WRITTEN, source=user_source_line(), hint=EXPANDED_INPUT_HINT)


VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation"
LEAF_WRITTEN = "a leaf Variable that requires grad is being used in an in-place operation"
_MULTI_OUTPUT_NODE = torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE
MULTI_OUTPUT_VIEW_WRITTEN = ("A view of a function that returns multiple views (unbind, split, chunk) is being "
                             "modified inplace. Such functions do not allow the output views to be modified inplace. "
                             "You should replace the inplace operation by an out-of-place one.")


CREATION = torch._C._autograd.CreationMeta


@dataclasses.dataclass(frozen=True)
class CallerView:
    """What autograd's in-place check reads off a caller's view of a leaf that requires grad: how it was made
    (``CreationMeta``) and, if it has a node, that node's name and its output number."""

    creation: Any
    node: str | None = None
    output_nr: int = 0

    @classmethod
    def of(cls, t: torch.Tensor) -> CallerView:
        creation = creation_of(t)
        if creation == CREATION.DEFAULT:   # eager's message names no node: the caller's view is left unread
            return cls(creation)            # (a read would regenerate a stale one's grad_fn)
        try:
            node = t.grad_fn
        except RuntimeError:   # stale, its node not regenerated
            node = None
        return cls(creation, node.name() if node is not None else None, t.output_nr)


def creation_of(t: torch.Tensor):
    """How autograd made the view ``t`` (``CreationMeta``): DEFAULT for a tensor that is no view."""
    return torch._C._autograd._get_creation_meta(t) if t._is_view() else CREATION.DEFAULT


NO_LEAF_VIEWS: Mapping[int, CallerView] = MappingProxyType({})   # inputs -> CallerView: none


def in_place_on_a_view_error(view: CallerView, modified: str = "is being") -> str:
    """Autograd's error for an in-place op, under grad mode, on a view of a leaf that requires grad (``view``),
    or on a view made under no_grad, under inference_mode or by a multi-output op (``unbind``, ``split``), whose
    own error comes first: eager's wording, its node named as eager names it (``Output 0 of Select``)."""
    if view.creation == CREATION.DEFAULT:
        return VIEW_OF_LEAF + "."
    name = re.sub(r"Backward\d*$", "", view.node) if view.node is not None else None
    modes = {CREATION.NO_GRAD_MODE: ("no_grad mode", "with grad mode enabled"),
             CREATION.INFERENCE_MODE: ("inference mode", "in normal mode")}
    mode, where = modes.get(view.creation, (None, None))
    if name is not None and mode is not None:
        message = (f"Output {view.output_nr} of {name} is a view of a view which was created in {mode} and "
                   f"{modified} modified inplace {where}.")
    elif name is not None:
        message = f"Output {view.output_nr} of {name} is a view and {modified} modified inplace."
    else:
        message = f"A view was created in {mode or 'no_grad mode'} and {modified} modified inplace {where or ''}."
    if view.creation == CREATION.MULTI_OUTPUT_NODE:
        return message + (" This view is the output of a function that returns multiple views. Such functions do "
                          "not allow the output views to be modified inplace. You should replace the inplace "
                          "operation by an out-of-place one.")
    block = "inference_mode" if view.creation == CREATION.INFERENCE_MODE else "no_grad"
    return message + (" Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
                      f"your code by moving both the view and the inplace either both inside the {block} block (if "
                      "you don't want the inplace to be tracked) or both outside (if you want the inplace to be "
                      "tracked).")


def stale_view_error(detail: str, source: str | None = None) -> UnsupportedError:
    """Note [Views made before an in-place view op]: the refusal, wherever the trace meets the limit."""
    return UnsupportedError(f"traced under functionalization, {detail}", source=source,
                            hint="take the view after the in-place view op (t_(), unsqueeze_(), transpose_(), "
                                 'as_strided_(), ...), use the out-of-place op (x = x.t()), or pass '
                                 'on_unsupported="eager"')


class _ByTensor:
    """Values keyed by live tensors (by identity: tensors compare elementwise, and ids are reused)."""

    def __init__(self):
        self._items: dict[int, tuple] = {}

    def __setitem__(self, t: torch.Tensor, value) -> None:
        self._items[id(t)] = (weakref.ref(t), value)

    def get(self, t: torch.Tensor, default=None):
        ref, value = self._items.get(id(t), (None, default))
        return value if ref is not None and ref() is t else default


_GRAD_FN_GETTERS = ("grad_fn", "is_leaf")   # attributes whose read regenerates a stale view's grad_fn


# attributes whose read tells a leaf from another tensor, or gives a differentiable view
_AUTOGRAD_ATTRIBUTES = frozenset({*_GRAD_FN_GETTERS, "T", "mT", "H", "mH", "real", "imag"})


def _differentiates(func, name: str) -> bool:
    """Under grad mode, ``func`` gives a result whose requires_grad (or autograd state) follows its tensor
    arguments': not ``detach()``, ``.data``, a size or dtype read, or an op under ``no_grad``."""
    if not torch.is_grad_enabled() or name in ("detach", "requires_grad_", "__set__", "size", "dim", "numel",
                                               "stride", "storage_offset", "is_contiguous", "data_ptr",
                                               "element_size", "untyped_storage", "__len__", "__format__",
                                               "__repr__", "tolist", "item"):
        return False
    if name == "__get__":
        return getattr(getattr(func, "__self__", None), "__name__", None) in _AUTOGRAD_ATTRIBUTES
    return True


def _reads_grad_fn(func, name: str, result) -> bool:
    """Eager's ``func`` read the grad_fn of its tensor arguments: an op with a tensor result autograd may
    record (not ``detach()``, ``.data`` or ``requires_grad_()``), or a read of ``t.grad_fn`` / ``t.is_leaf``."""
    if name == "__get__":
        return getattr(getattr(func, "__self__", None), "__name__", None) in _GRAD_FN_GETTERS
    if name in ("detach", "requires_grad_", "__set__"):
        return False
    return isinstance(result, torch.Tensor) or isinstance(result, (tuple, list)) \
        and any(isinstance(r, torch.Tensor) for r in result)


def _unpack(t):
    return t


def _reached(t) -> set[int]:
    """The ids of the autograd nodes on a path from the tensor ``t`` (none for anything else)."""
    stack, seen = [], set()
    if isinstance(t, torch.Tensor):
        try:
            stack.append(t.grad_fn)
        except RuntimeError:   # a stale view: its history is eager's error, not a path
            pass
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(next_node for next_node, _ in node.next_functions)
    return seen

# autograd's error for a view read after an in-place op on its base that it cannot regenerate the grad_fn after
VIEW_OF_MODIFIED_BASE = "its base or another view of its base has been modified inplace"
# ... for a view one multi-output op made with grad
_MULTI_OUTPUT_VIEW_STALE = (f"{VIEW_OF_MODIFIED_BASE}. This view is the output of a function that returns "
                            "multiple views.")


def multi_output_view(t: torch.Tensor) -> bool:
    """``t`` is one of the views a multi-output op (``chunk``, ``split``, ``unbind``) made with autograd on."""
    return t.requires_grad and t._is_view() and torch._C._autograd._get_creation_meta(t) == _MULTI_OUTPUT_NODE


def _storage_id(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


def _elem(t: torch.Tensor) -> torch.Tensor:
    """The tensor a functional wrapper holds (what functionalization's own ops see), else ``t``."""
    return getattr(t, "elem", t)


class EagerInPlaceChecks(torch.overrides.TorchFunctionMode):
    """Note [Eager's in-place checks].

    ``analyze``: the metadata pass also raises eager's errors and records what the caller's
    tensors need (writes through ``.data``, storages swapped by ``t.data = y``); the joint trace,
    which follows the same program, only needs the rewrite of writes into ``expand``s.
    """

    def __init__(self, analyze: bool = True):
        super().__init__()
        self.analyze = analyze
        self._expanded = ExpandedViews()   # Note [Writes into expanded tensors]
        self._data_aliases = _ByTensor()   # x.data and views of it (``.data`` counts its own versions) -> True
        # A tensor given another's storage by set_(), its .data and views -> that storage (its own counter)
        self._set_sources = _ByTensor()
        self._made = _ByTensor()           # any result -> (its storage, that storage's writes, clock) when made
        self._clock = 0                        # in-place ops that bump a version, on any storage
        self._last_write: dict[int, int] = {}  # storage -> the clock of its latest such op
        self._first_write: dict[int, int] = {}  # ... and of its first
        self._grad_read_at: dict[int, int] = {}  # input storage -> the clock when autograd last read the input
        self._grad_first_read_at: dict[int, int] = {}   # ... first read it
        self._stale_reads: set = set()   # storages autograd read through a view made before a write into them
        # Storages written through a .data alias / through any other tensor (eager bumps those versions).
        self.written_via_data: set = set()
        self.written_directly: set = set()
        self.written_via_set: set = set()      # storages (of ``elem``s) written through a tensor set_() gave them
        self._written_via_set_with_grad: set = set()   # ... with autograd recording the write
        # storages an in-place op autograd records ran on -> the tensors it ran on (weakly: a strong reference
        # would keep a temporary view alive, seen as a view taken earlier)
        self._written_with_grad: dict[int, list[weakref.ref]] = {}
        self._recorded_on_input: set = set()   # storages of inputs written with autograd recording it, by the input
        self._recorded_on_views: set = set()   # ... or by a view of it
        # Inputs (by storage) and watched views whose own grad_fn eager regenerated after such a write
        # (Note [Writes through a view of an input] in runtime/epilogue.py)
        self._refreshed: set = set()
        self._watched = _ByTensor()            # views standing for inputs (Note [Aliased inputs]) -> True
        self._root_stand_ins = _ByTensor()     # ... those standing for an autograd root (no view in eager) -> True
        self._refreshed_watched = _ByTensor()  # ... whose grad_fn eager regenerated
        self._viewed_from = _ByTensor()        # views of watched views -> (that view, taken through detach())
        # Note [Assigning .data]: a tensor given other data keeps its version counter, an input's where it was one
        # (or a view of one): tensor -> that input's storage; and the storages whose counters a save so shared
        self._kept_counters = _ByTensor()
        self._saved_kept_counters: set = set()
        self._written_itself = _ByTensor()     # tensors an in-place op ran on (their grad_fn is refreshed)
        self._views_before_requires_grad = _ByTensor()   # views of an input taken before its requires_grad_()
        self._regeometried = _ByTensor()       # views as_strided_() moved beyond their elements, and their views
        self._writes: dict[int, int] = {}      # storage -> in-place ops on it that bump its version
        self._views: dict[int, list] = {}      # storage -> weak references to views made of it inside
        self.reshaped_under_views = False      # an in-place view op ran on a storage with views made before
        self.set_under_views = False           # set_() ran on a storage with views made before
        self.set_inside = False                # set_() ran on a tensor made inside the function
        self._reshaped_views: dict[int, list] = {}   # storage -> differentiable views given new metadata in place
        self._permuted = _ByTensor()   # views given new dimension order in place without grad, and views of them
        self.views_before_requires_grad: dict[int, str] = {}   # input storage -> the requires_grad_() line
        self.copies: set = set()   # storages of inputs traced on a copy of their elements (clone_as_is)
        self.expanded_inputs: set = set()   # storages of expanded inputs (or of their dense copies)
        self._leaf_views = _ByTensor()         # inputs that are the caller's views of a leaf requiring grad
        self._plain_views = _ByTensor()        # ... views of a tensor not requiring grad, not requiring it -> state:
        # "null": written with grad through a view of it, no grad_fn since (eager's leaf error on an in-place op
        # on it); "set": its grad_fn was set or regenerated, never null again (see mark_plain_views)
        self._input_storages = _ByTensor()    # input -> its storage when the call began
        self._input_order: dict[int, int] = {}   # input storage -> the input's position among the tensor inputs
        self._num_inputs = 0
        self._input_bytes: dict[int, int] = {}   # an input's storage -> its size in bytes when the call began
        self._views_made_leaves = _ByTensor()   # views of a tensor made inside, taken before its requires_grad_()
        self._views_given_data = _ByTensor()   # views of an input given other data by .data =: see _assign_data
        self._set_writes: dict[int, int] = {}   # storage set_() gave a tensor -> writes through such tensors
        self._rebased = _ByTensor()   # views an in-place op autograd recorded ran on: rebased, with a node
        self._refreshed_at = _ByTensor()   # stale views autograd read: the writes into their storage then
        self._view_reads: dict[int, list] = {}   # input storage -> (clock made, clock read) of views autograd read
        self._eager_strides = _ByTensor()   # views whose strides eager's view op chooses otherwise than the tracer's
        self._multi_output_storages: set = set()   # storages whose multi-output views (with grad) autograd read
        self._saved_at: dict[int, int] = {}   # storage -> the clock when autograd first saved a tensor on it
        self._saving: list[tuple[int, int]] = []   # (storage, clock) saved by the op running now
        self._saving_objects: list = []   # the tensors the op running now saved, themselves
        self.saved_on_clones: set = set()   # storages whose unfold-written clones (ExpandedViews.scratch) saved a value
        # (tensor, saved as its op's own result, the outputs whose backward reaches the node that saved it, or None:
        # unknown) per tensor a node on a path from the results saved: settle_saves
        self._saved_objects: list[tuple[torch.Tensor, bool, tuple[int, ...] | None]] = []
        self._inputs_read: set = set()      # first storages of inputs an op read (not through x.data)
        self.read_before_set: set = set()   # ... of inputs read before set_() or .data = moved them
        self._node_saves: dict[int, tuple] = {}    # id(node) -> (node, its saves, tensors saved as such): settle_saves
        self._by_output: list[dict[int, int]] = []   # per output: storage -> first save on a path from it
        self._by_other: list[dict[int, int]] = []    # per input's new history: the same

    def track(self, tensors: list) -> None:
        """Watch ``tensors`` (the inputs) as results are watched: a storage swapped under them is refused."""
        self._input_order = {_storage_id(t): k for k, t in enumerate(tensors)}
        self._num_inputs = len(tensors)
        for t in tensors:
            self._made[t] = (_storage_id(t), None, None)
            self._input_storages[t] = _storage_id(t)
            nbytes = from_fun(t).untyped_storage().nbytes()
            if isinstance(nbytes, int):   # the caller's storage (a write may give the traced value a smaller one)
                self._input_bytes[_storage_id(t)] = nbytes

    def check_storage_kept(self, t: torch.Tensor) -> None:
        """Refuse a tensor whose storage was swapped behind functionalization's back (``t.data = y``
        on an intermediate): the wrapper would keep reading the old value."""
        storage, _, _ = self._made.get(t, (None, None, None))
        if storage is not None and _storage_id(t) != storage:
            raise UnsupportedError("assigning to .data of a tensor inside the compiled function is not supported: "
                                   "the traced program would keep reading its old value", source=user_source_line(),
                                   hint="use `with torch.no_grad(): t.copy_(y)` for a same-shaped value, or a new "
                                        'variable, or pass on_unsupported="eager"')

    def _assign_data(self, target: torch.Tensor, value: torch.Tensor) -> None:
        """Note [Assigning .data]
        -----------------------
        ``x.data = y`` swaps the storage and geometry under ``x``'s autograd metadata (requires_grad,
        grad_fn, is_leaf stay ``x``'s; its version does not move), below functionalization, which
        would go on reading the old value. It is traced as the ``set_`` it amounts to (Note [set_
        under functionalization] in capture/context.py), of a detach of ``y``, under ``no_grad``,
        keeping ``x``'s version: the metadata pass sees the storage change as that of a ``set_``."""
        if self.analyze:
            self.check_storage_kept(target)
            self.check_storage_kept(value)
        if value.dtype != target.dtype or value.device != target.device or value.layout != target.layout:
            what = f"{target.dtype} to {value.dtype}" if value.dtype != target.dtype else \
                f"{target.device}, {target.layout} to {value.device}, {value.layout}"
            raise UnsupportedError(f".data assigned a tensor of another dtype, device or layout ({what}) is not "
                                   "supported: the traced set_() keeps the tensor's own", source=user_source_line(),
                                   hint='assign a tensor of the same dtype, or pass on_unsupported="eager"')
        if target.is_inference() or value.is_inference():   # fuzz --semantics12 --checkpoint seed 14930006
            raise UnsupportedError("'.data =' on (or of) an inference tensor made inside the compiled function is not "
                                   "supported: an inference tensor has no version counter for the traced set_() to "
                                   "keep", source=user_source_line(),
                                   hint='assign a clone made outside inference mode, or pass on_unsupported="eager"')
        self.set_inside = True
        before = _storage_id(target)
        given = self.analyze and before in self._input_bytes and target.requires_grad and target._is_view()
        stale = given and (self._stale_given_data(target) or self.written_since_made(target))
        shares_input_counter = before in self._input_bytes and not self._data_aliases.get(target) \
            and self._set_sources.get(_elem(target)) is None   # x.data and set_() count versions of their own
        counter = self._kept_counters.get(target, before if shares_input_counter else None)
        source = value.detach()
        # set_() shares the storage, not the version counter (see __torch_function__); also in the joint trace
        self._set_sources[_elem(target)] = self._set_sources.get(_elem(value), _storage_id(_elem(value)))
        with torch.no_grad(), torch.autograd._unsafe_preserve_version_counter(target):
            target.set_(source)
        if self.analyze:
            storage = _storage_id(target)
            self._made[target] = (storage, self._writes.get(storage, 0), self._clock)
            if counter is not None:   # fuzz --semantics12 seed 3904259: eager's saves of it check that input
                self._kept_counters[target] = counter
            if given:   # fuzz seed 4404960: its old storage and the writes into it, the new one's (through it), and
                new = self._set_sources.get(_elem(target))   # whether it was stale already
                self._views_given_data[target] = (before, self._writes.get(before, 0), new,
                                                  self._set_writes.get(new, 0), stale)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        # F.relu(x, inplace=True), nn.ReLU(inplace=True), F.hardtanh / leaky_relu (inplace=True): the functional
        # form writes ``x`` through an in-place op this mode does not see (it runs inside the call); not dropout,
        # which writes nothing when not training or with p = 0
        in_place = target is not None and (_is_in_place(name) or name in _ALWAYS_WRITE_IN_PLACE
                                           and _inplace_argument(func, args, kwargs) is True)
        # an in-place op's autograd reads its arguments' grad_fn before its own write moves the version
        before = self._before_write() if self.analyze and (in_place or name in _DUNDER_WRITES) else None
        if name == "__setitem__" and target is not None and len(args) > 2 and args[1] is False:
            return None   # eager's x[False] = v writes nothing and moves no version (review of the change)
        if name == "__get__" and self.analyze and target is not None and getattr(func, "__self__", None) is _GRAD \
                and self._input_storages.get(target) is not None:   # review of the tenth session: it read None
            raise UnsupportedError(
                "reading .grad of an argument inside the compiled function is not supported: the trace runs on a "
                "stand-in of the caller's tensor, whose .grad it does not carry (it would read None)",
                source=user_source_line(), hint='read .grad outside and pass it in, or pass on_unsupported="eager"')
        if name == "__set__" and target is not None and getattr(func, "__self__", None) is _GRAD:
            raise UnsupportedError(   # review of the tenth session: aot_function dropped it silently
                "assigning .grad inside the compiled function is not supported: the trace runs on stand-ins of the "
                "tensors, and the compiled call would not set it", source=user_source_line(),
                hint='assign .grad outside the compiled function, or pass on_unsupported="eager"')
        if name == "__set__" and target is not None and getattr(func, "__self__", None) is _DATA \
                and len(args) > 1 and isinstance(args[1], torch.Tensor):
            self._note_read_before_set(target)
            return self._assign_data(target, args[1])
        if name.split(".")[0] == "set_" and target is not None:   # set_.source_Tensor, ...
            self._note_read_before_set(target)
            self.set_inside = True
            if self._plain_views.get(target) is not None:   # eager's stays a view whose grad_fn autograd regenerates
                self._plain_views[target] = "set"           # after writes through its views (fuzz seed 14000298)
            if len(args) > 1 and isinstance(args[1], torch.Tensor):   # fuzz seed 3600451: set_() onto an expand
                self._expanded.note_set(target, args[1])
            if self._views.get(_storage_id(target)):   # views made before: regenerated from the new geometry
                self.set_under_views = True            # (Note [Views made before an in-place view op])
            if len(args) > 1 and isinstance(args[1], torch.Tensor):   # also in the joint trace (_follow_clones)
                # set_() shares the storage, not the version counter: writes through ``target`` leave
                # the source's version as is, like writes through ``.data``. The user's set_() is not
                # seen here, only functionalization's, on the tensors its wrappers hold (``elem``).
                self._set_sources[target] = self._set_sources.get(args[1], _storage_id(args[1]))
        if self.analyze:   # a storage swapped under an argument explains what its checks would find
            for arg in args:
                if isinstance(arg, torch.Tensor):
                    self.check_storage_kept(arg)
        if self.analyze and func in _AS_STRIDED and target is not None:
            _check_as_strided_bounds(target, *args[1:], **kwargs, copy=_storage_id(target) in self.copies,
                                     caller_bytes=self._input_bytes.get(_storage_id(target), 0), name=name)
        differentiates = self.analyze and _differentiates(func, name)
        if differentiates:   # a multi-output view read by autograd (fuzz --semantics12 seed 3100272)
            for arg in args:
                if isinstance(arg, torch.Tensor) and multi_output_view(arg):
                    self._multi_output_storages.add(_storage_id(arg))
        if differentiates and self._views_given_data:
            for arg in (t for a in (*args, *kwargs.values()) for t in (a if isinstance(a, (list, tuple)) else (a,))):
                if isinstance(arg, torch.Tensor) and self._stale_given_data(arg):
                    raise UnsupportedError(
                        "a view of an input, given other data by .data = and written in place (before or after) "
                        "since it was made, is differentiated: eager regenerates its history from its new "
                        "geometry on the caller's base tensor, which the trace does not see",
                        source=user_source_line(),
                        hint="put the new data in a new variable (t = v.data * 2) rather than assigning .data, "
                             'or pass on_unsupported="eager"')
        if differentiates and self._views_made_leaves:
            tensors = [t for arg in (*args, *kwargs.values()) for t in (arg if isinstance(arg, (list, tuple))
                                                                         else (arg,)) if isinstance(t, torch.Tensor)]
            # with another argument requiring grad, the result requires grad in ours as in eager
            if not any(t.requires_grad for t in tensors if self._views_made_leaves.get(t) is None):
                for t in tensors:
                    self.refuse_view_made_leaf(t)
        if self.analyze and func is torch.Tensor.view and target is not None:
            _check_view(target, args[1:], kwargs)
        if self.analyze and name == "requires_grad_" and target is not None:
            self._note_views_before_requires_grad(target, *args[1:], **kwargs)
        if name == "copy_" and len(args) > 1 and _same_data(target, args[1]) and has_internal_overlap(target) \
                and (target.requires_grad or args[1].requires_grad) and torch.is_grad_enabled():
            # fuzz seed 400103: ``t0.data.copy_(t0)``, t0 expanded and requiring grad: eager records the copy
            # in autograd and writes nothing; traced as a copy, functionalization refuses the overlap
            raise UnsupportedError("copy_() of an expanded tensor onto its own memory, recorded by autograd (one "
                                   "side requires grad), cannot be compiled: its functional form writes into "
                                   "overlapping elements", source=user_source_line(),
                                   hint='drop the copy (it changes no value), or run it under torch.no_grad(), or '
                                        'pass on_unsupported="eager"')
        if name == "copy_" and len(args) > 1 and _same_data(target, args[1]) \
                and not ((target.requires_grad or args[1].requires_grad) and torch.is_grad_enabled()):
            # Eager's copy_ returns at once when the source is the target's memory, but its version
            # counter still moves: a value saved before makes the backward raise. Under grad mode
            # autograd still records it when either side requires grad (``a.copy_(a.detach()
            # .requires_grad_())`` gives ``a`` a history): traced as a copy.
            self._record_write(target)
            torch.autograd.graph.increment_version(target)
            self._follow_clones(target)
            return target
        if self.analyze and target is not None and (in_place or name in _VERSIONED_METADATA) \
                and target.requires_grad and torch.is_grad_enabled() and self._of_an_input(target):
            root = target._base if target._base is not None else target
            if self._leaf_views.get(root) is not None:   # where eager raises it, not at a later op it never runs
                raise RuntimeError(self._leaf_view_error(root, target))
            self._written_with_grad.setdefault(_storage_id(target), []).append(weakref.ref(target))   # eager
            # refuses it on a view of a leaf
        if self.analyze and name == "__setitem__" and target is not None and target.requires_grad \
                and torch.is_grad_enabled() and self._of_an_input(target):
            root = target._base if target._base is not None else target
            if self._leaf_views.get(root) is not None:
                # x[i] = v is an in-place op autograd records, on x or the view x[i]: eager refuses it on a view of
                # a leaf after the value's conversion, the basic index and the value's shape, and before its
                # index_put_'s bounds checks, which only the graph makes (fuzz --semantics12 seed 15000191:
                # ``c[[0, 0]] = c.sum()``, ``c`` an empty view of a leaf, raised the graph's IndexError). The trace
                # runs it for the checks before (the stand-in is no view: autograd may take it for a leaf)
                try:
                    func(*args, **kwargs)
                except RuntimeError as exc:
                    if not str(exc).startswith((LEAF_WRITTEN, VIEW_OF_LEAF)):
                        raise
                written = target   # a basic index writes the view it takes, which eager's message names
                if len(args) > 1 and _basic_index(args[1]) and setitem_writes_a_view(target, args[1]):
                    written = target[args[1]]
                raise RuntimeError(self._leaf_view_error(root, written))
        if self.analyze and target is not None and (in_place or name in _DUNDER_WRITES) and torch.is_grad_enabled() \
                and any(isinstance(t, torch.Tensor) and t.requires_grad for t in (*args, *kwargs.values())) \
                and self._of_an_input(target):   # Note [Writes through a view of an input] in runtime/epilogue.py
            through_a_view = name == "__setitem__" and len(args) > 1 and setitem_writes_a_view(target, args[1])
            on_itself = self._input_storages.get(target) is not None and not through_a_view
            (self._recorded_on_input if on_itself else self._recorded_on_views).add(_storage_id(target))
            if self._watched.get(target) and not through_a_view:
                # a rebuilt input (Note [Aliased inputs]) written itself: eager's write gives it its grad_fn, so
                # the caller's is not stale after the call (--semantics12 seed 11102649: a.add_(t0) on a slice
                # passed beside an overlapping one, then a.mul_(2) after the call)
                self._refreshed_watched[target] = True
        if self.analyze and target is not None and name in _VERSIONED_METADATA and _storage_id(target) in \
                self.expanded_inputs and self._input_storages.get(target) is None:   # squeeze_() of a view of one
            raise ExpandedInputWritten()   # (fuzz seed 503382): views of its traced dense copy are no views in eager
        if in_place or target is not None and name in _DUNDER_WRITES:   # also x[i] = v, x += v
            # eager's errors come first; copy_ from the target's own memory returns before eager's checks,
            # also where autograd records it (fuzz seed 120199: c.detach().copy_(c) on an expanded c)
            if self.analyze and self._views_before_requires_grad.get(target) and self._expanded.views_an_expand(target):
                raise _write_through_view_before_requires_grad(name)
            if self.analyze and self._views_before_requires_grad.get(target) and torch.is_grad_enabled() \
                    and target._base is not None and target._base.is_leaf and target._base.requires_grad:
                raise ViewOfLeafWritten()
            if self.analyze and self._expanded.views_an_expand(target):
                _check_in_place_on_a_leaf(func, target, args[1:], kwargs, self._of_an_input(target))
            if self.analyze and _storage_id(target) in self.expanded_inputs:   # fuzz seed 802195
                raise ExpandedInputWritten()   # before eager's overlap checks, which the inner trace makes
            if in_place and self.analyze and name not in _OVERLAP_UNCHECKED \
                    and not (name == "copy_" and len(args) > 1 and _same_data(target, args[1])):
                self._check(target, args[1:], kwargs)
            if self.analyze and self._views_given_data.get(target) is not None and target.requires_grad \
                    and not self._data_aliases.get(target) and _recorded(args, kwargs):   # not a .data or a detach
                raise _recorded_write_of_a_view_given_data(name)
            via_data = bool(self._data_aliases.get(target))
            via_set = self._set_sources.get(_elem(target)) is not None
            if self._expanded.write(func, name, target, args[1:], kwargs, via_data=via_data, via_set=via_set):
                self._follow_clones(target, self._expanded.fresh)
                self._record_write(target, _recorded(args, kwargs))
                if self.analyze:   # its grad_fn is regenerated, as after any write to it (fuzz --semantics12 6500307)
                    self._written_itself[target] = True
                if self._saving or self._saving_objects:   # made by the op on its scratch clone, whose node the
                    fresh = self._expanded.fresh            # input's new history reaches (eager's: the target's)
                    self._attribute_saves(target if fresh is None else fresh)
                return None if name == "__setitem__" else target
            if in_place and self.analyze and name in _OVERLAP_UNCHECKED and has_internal_overlap(target):
                raise UnsupportedError(f"{name} into a tensor whose elements overlap in memory cannot be compiled "
                                       "(eager's result depends on the order its kernel writes them)",
                                       source=user_source_line(),
                                       hint='write into a clone, or pass on_unsupported="eager"')
        if self.analyze:
            if in_place or target is not None and name in _DUNDER_WRITES:
                self._refuse_write_under_reshaped_view(name, target, _recorded(args, kwargs))
                self._written_itself[target] = True
                if self._regeometried.get(target) and name not in _VERSIONED_METADATA:
                    raise _write_after_as_strided_of_a_view(name)
            if name == "as_strided_" and target is not None and target._is_view() \
                    and _reaches_beyond_its_elements(target, *args[1:], **kwargs):
                self._regeometried[target] = True
            if self._plain_views and (in_place or target is not None and name in _DUNDER_WRITES):
                # x[i] = v writes a view of x; an advanced index writes x itself (fuzz seed 11903096: ``b[[0, 0]] =
                # a.sum()`` gives ``b`` its grad_fn, and ``b.fill_()`` after it runs)
                self._note_plain_view_write(target, _recorded(args, kwargs), name == "__setitem__" and len(args) > 1
                                            and setitem_writes_a_view(target, args[1]))
            if in_place or target is not None and (name in _DUNDER_WRITES or name in _VERSIONED_METADATA):
                self._record_write(target, _recorded(args, kwargs))
            if self.analyze and (in_place or name in _DUNDER_WRITES) and target._is_view() \
                    and _recorded(args, kwargs) and not (name == "__setitem__" and len(args) > 1
                                                         and setitem_writes_a_view(target, args[1])):
                self._rebased[target] = True   # its own node from here on (``rebased``)
            if target is not None and name in _VERSIONED_METADATA and target.requires_grad \
                    and torch.is_grad_enabled() and target._is_view():
                self._reshaped_views.setdefault(_storage_id(target), []).append(weakref.ref(target))
            elif target is not None and name in _PERMUTING_METADATA and target._is_view():
                self._permuted[target] = True
            if target is not None and name in _VERSIONED_METADATA and self._views.get(_storage_id(target), 0):
                self.reshaped_under_views = True   # Note [Views made before an in-place view op]
                self._refuse_regenerated_gradients(name, target)
        if (in_place or name in _VERSIONED_METADATA) and self._root_stand_ins and self._root_stand_ins.get(target):
            _as_a_root(target)   # t_() too (fuzz --semantics12 seed 13502098)
            # its history came from a write through another alias only (one on it itself rebases it: the squeeze_
            # after b.clamp_() compiles)
            if self.analyze and name in _VERSIONED_METADATA and target.requires_grad and torch.is_grad_enabled() \
                    and not self._written_itself.get(target) and not (name == "t_" and target.dim() < 2):
                raise UnsupportedError(
                    f"{name} on an input that shares storage with another input the function writes, after a write "
                    "through that other input gave it a history, is not supported: the view standing for it keeps "
                    "the history of its old geometry (the backward would fail on the gradient's shape)",
                    source=user_source_line(),
                    hint='pass distinct tensors (e.g. .clone()), or pass on_unsupported="eager"')
        writes = target is not None and (in_place or name in _DUNDER_WRITES or name in _VERSIONED_METADATA)
        version = target._version if in_place and _custom_op_name(func) in _CUSTOM_WRITES_MOVING_VERSIONS else None
        try:
            result = func(*args, **kwargs)
            if version is not None and target._version == version:
                # a custom in-place op (torch.ops.fsdp.copy_): eager's moves its target's version, which the traced
                # backward of a value saved before it checks (fuzz STORAGE_WRITERS seed 60: ``t0 = b.cos()``, then
                # fsdp.copy_ into ``b``: eager's backward raises, the trace read the new value)
                torch.autograd.graph.increment_version(target)
        except RuntimeError as exc:
            written = (self._recorded_on_input | self._recorded_on_views) - {_storage_id(target)} \
                if writes and self.analyze and str(exc).startswith((LEAF_WRITTEN, VIEW_OF_LEAF)) \
                and self._of_an_input(target) else ()
            order = self._input_order
            if written and _storage_id(target) in order:
                # another input was written with autograd recording it first: where the two share a storage,
                # eager's target is a view with a history by then (fuzz seed 9100260; compiled.py): (the
                # target's position among the tensor inputs, the written ones', their number)
                exc.after_a_recorded_write = (order[_storage_id(target)],
                                              tuple(order[w] for w in written if w in order), self._num_inputs)
            raise
        if writes:
            self._follow_clones(target)
        if self._expanded.any_unrecorded and (differentiates and _differentiable_result(result)
                                              or _reads_autograd_state(func, name)):
            for arg in (t for a in (*args, *kwargs.values()) for t in (a if isinstance(a, (list, tuple)) else (a,))):
                self.refuse_unrecorded_history(arg)
        if self.analyze and isinstance(result, torch.Tensor) and target is not None and result is not target \
                and not in_place and _storage_id(result) == _storage_id(target) and not result.is_sparse:
            eager = _eager_view_strides(func, args, kwargs, self._user_stride)   # a view: as eager's view op makes it
            if eager is not None and eager != tuple(result.stride()) and len(eager) == result.dim():
                self._eager_strides[result] = eager
        if self.analyze and isinstance(result, torch.Tensor) and result is not target and name != "__get__":
            self._note_reads(args)   # a value computed from them (not x.data, nor requires_grad_() returning x)
        if self.analyze and torch.is_grad_enabled() and _reads_grad_fn(func, name, result):
            self._note_grad_fn_reads(args, kwargs, before, linked=name != "__get__")
        if self._saving or self._saving_objects:
            self._attribute_saves(result)
        if isinstance(result, torch.Tensor):
            self._track(func, name, target, result)
        elif isinstance(result, (tuple, list)):   # chunk, split, unbind: each view is made here
            for item in result:
                if isinstance(item, torch.Tensor):
                    self._track(func, name, target, item)
        return result

    def _of_an_input(self, t: torch.Tensor) -> bool:
        """``t`` is an input or an autograd view of one, not a ``detach()`` alias of one (or a view of such an
        alias): eager's view-of-a-leaf check follows autograd's views (fuzz seed 404638)."""
        root = t._base if t._base is not None else t
        # an input keeps being one when an op hands it back (fuzz --semantics12 seed 11601151: a synthetic base,
        # whose rebuilt member's detach() became a leaf, was recorded as made inside)
        return self._made.get(root, (None,))[1:] == (None, None) or self._input_storages.get(root) is not None

    def _note_views_before_requires_grad(self, target: torch.Tensor, requires_grad: bool = True) -> None:
        """Fuzz seed 310444: ``t0 = a[0]; a.requires_grad_()`` on an input. Eager's ``t0``, a view made
        before, then requires grad as a leaf of its own (its gradient never reaches ``a``); the graph
        is traced with ``a`` requiring grad from the start, where ``t0`` is differentiable into ``a``."""
        original = self._input_storages.get(target)
        if not requires_grad or target.requires_grad or original is None:
            return   # not an input (or nothing changes)
        # its storage now and when the call began: views of the old one, made before a set_() (or .data =)
        # of the input, are its autograd views all the same (fuzz seed 904401)
        views = [v for storage in {original, _storage_id(target)} for ref in self._views.get(storage, ())
                 if (v := ref()) is not None and v is not target and v._base is not None and not v.requires_grad]
        if views:
            # refused by the metadata pass (_check_views_before_requires_grad) where eager's view does not follow
            self.views_before_requires_grad[original] = user_source_line()
            for v in views:   # writes through them are refused (fuzz seed 4201969)
                self._views_before_requires_grad[v] = True

    def note_new_leaf(self, leaf: torch.Tensor) -> None:
        """``leaf``, a tensor made inside, is about to be given ``requires_grad_()`` (capture/leaves.py): its
        earlier views become leaves of their own (fuzz seed 3401858), refused where they are used."""
        if not self.analyze or leaf.requires_grad:
            return
        for ref in self._views.get(_storage_id(leaf), ()):
            if (v := ref()) is not None and v is not leaf and v._base is leaf and not v.requires_grad:
                self._views_made_leaves[v] = user_source_line()

    def refuse_unrecorded_history(self, t) -> None:
        """Refuse the use of ``t`` (as a result, or an argument of an op autograd records) when it is, or views,
        a detached alias of an expand that a write with grad went through (Note [Writes into expanded tensors]):
        eager's alias then requires grad, with the write's history; the rewrite recorded it elsewhere."""
        if not self._expanded.any_unrecorded or not isinstance(t, torch.Tensor):
            return
        line = self._expanded.unrecorded.get(_root_of(t))
        if line is not None:
            raise UnsupportedError("a detach() (or .data) of an expanded tensor, written in place with a value that "
                                   f"requires grad at {line}, is used afterwards: eager records that write in its "
                                   "autograd history, and the compiled write into the expand's memory cannot; not "
                                   "supported", source=user_source_line(),
                                   hint="write into a clone (t = x.expand(...).clone()), or pass "
                                        'on_unsupported="eager"')

    def refuse_view_made_leaf(self, t) -> None:
        """Refuse the use of ``t`` (as a result, or an argument of an op autograd would record, with no other
        argument requiring grad) when it is a view of a tensor made inside that was taken before
        ``requires_grad_()`` on that tensor: eager's view then requires grad as a leaf of its own (its gradient
        reaches nothing the caller sees, but what is computed from it requires grad); the graph's view does not."""
        line = self._views_made_leaves.get(t) if isinstance(t, torch.Tensor) else None
        if line is not None:
            raise UnsupportedError("a view taken before requires_grad_() on the tensor it views (a tensor made "
                                   f"inside the function; requires_grad_() at {line}) is used afterwards: eager "
                                   "makes that view a leaf of its own, whose gradient reaches neither the tensor "
                                   "nor the inputs; not supported", source=user_source_line(),
                                   hint="take the view after requires_grad_(), or pass on_unsupported=\"eager\"")

    def _track(self, func, name: str, target, result: torch.Tensor) -> None:
        self._expanded.track(func, target, result)
        storage = _storage_id(result)
        a_view = target is not None and result is not target and storage == _storage_id(target)
        if a_view and self._permuted.get(target):
            self._permuted[result] = True
        if target is not None and (_reads_data(func, name)
                                   or self._data_aliases.get(target) and a_view):
            self._data_aliases[result] = True   # x.data, or a view of it (every trace: writes into expands ask)
        if a_view and self._watched:
            self._note_viewed_from(func, name, target, result)
        if a_view and self._regeometried.get(target):
            self._regeometried[result] = True
        if a_view and self._views_before_requires_grad.get(target):   # a view of one hangs off it (fuzz seed
            self._views_before_requires_grad[result] = True            # 14833228: t0[1:].copy_(a), t0 an expand)
        if a_view and self._views_given_data.get(target) is not None:   # it shares the view's version counter
            self._views_given_data[result] = self._views_given_data.get(target)
        if a_view and self.analyze and name != "__get__" and func is not _GET_DATA:
            counter = self._kept_counters.get(target)
            if counter is not None:   # a view shares the version counter of its base
                self._kept_counters[result] = counter
        if not self.analyze:
            return
        if result is target and self._made.get(result, (None,))[0] == storage:
            return   # an in-place op returns its target: it was made earlier (and is now stale)
        self._made[result] = (storage, self._writes.get(storage, 0), self._clock)
        if a_view:
            self._views.setdefault(storage, []).append(weakref.ref(result))
        source = self._set_sources.get(_elem(target)) if target is not None else None
        if source is not None and result is not target and (a_view or name == "__get__" or func is _GET_DATA):
            self._set_sources[_elem(result)] = source

    def _record_write(self, target: torch.Tensor, recorded: bool = False) -> None:
        if self.analyze:
            source = self._set_sources.get(_elem(target))
            if source is not None:
                self.written_via_set.add(source)   # the storage set_() gave it: eager leaves its version
                if not self._data_aliases.get(target):   # x.data counts versions of its own
                    self._set_writes[source] = self._set_writes.get(source, 0) + 1
                if recorded:
                    self._written_via_set_with_grad.add(source)
                if source == _storage_id(_elem(target)):   # Note [set_ under functionalization]: the wrapper
                    return   # shares the source's storage too, whose own tensors this write does not version
            via_data = self._data_aliases.get(target)
            written = self.written_via_data if via_data else self.written_directly
            storage = _storage_id(target)
            written.add(storage)
            if not via_data:
                self._writes[storage] = self._writes.get(storage, 0) + 1
                self._clock += 1
                self._last_write[storage] = self._clock
                self._first_write.setdefault(storage, self._clock)

    def _refuse_regenerated_gradients(self, name: str, target: torch.Tensor) -> None:
        """Under grad mode, autograd regenerates the gradient of an older view of ``target`` (or of
        ``target`` itself, a view, after ``as_strided_``) from the new geometry under
        functionalization: the gradient comes out wrong where eager's is right. Refused."""
        if not (torch.is_grad_enabled() and target.requires_grad):
            return
        inputs = getattr(_AS_INPUTS, "ids", ())   # views rebuilt from a synthetic base stand for inputs
        views = [v for ref in self._views.get(_storage_id(target), ()) if (v := ref()) is not None]
        # a view one multi-output op made with grad has no gradient to regenerate: eager raises on any use
        others = any(v is not target and id(v) not in inputs and not multi_output_view(v) for v in views)
        if others or name == "as_strided_" and any(v is target for v in views) and id(target) not in inputs:
            raise stale_view_error(f"{name} on a tensor that requires grad, with a view of it taken earlier inside "
                                   "the function (or, for as_strided_, on such a view): the gradient through the "
                                   "older view would come from the new geometry, not eager's", user_source_line())

    def _refuse_write_under_reshaped_view(self, name: str, target: torch.Tensor, recorded: bool) -> None:
        """Note [Writes after an in-place view op on a view]: autograd records how a view was
        taken from its base when the view is made; ``t_()`` / ``unsqueeze_()`` on the view change
        its geometry but not that record. A later write into the storage is then differentiated
        through the view's old geometry (as PyTorch's own AOTAutograd does): the gradient goes to
        the wrong elements where eager's is right. Refused. Also where the view required no grad at
        its ``t_()`` (or another op reordering its dimensions) and a later write autograd records goes into that
        view, or a view taken of it after (review of 7803a49: ``t0 = a[:, :1]; t0.t_(); t0.mul_(w)`` gave ``w``
        four times eager's gradient, ``t0[0].mul_(w)`` others; writes into the base, and after ``unsqueeze_()``,
        are exact)."""
        views = self._reshaped_views.get(_storage_id(target))
        plain = recorded and torch.is_grad_enabled() and self._permuted.get(target)
        if views and any(ref() is not None for ref in views) or plain:
            raise stale_view_error(f"{name} into the storage of a view that {'requires grad and ' if views else ''}"
                                   "was given new metadata in place (t_(), unsqueeze_(), transpose_(), ...) earlier "
                                   f"in the function{'' if views else ', with autograd recording the write'}: "
                                   "autograd would differentiate the write through the view's old geometry, not "
                                   "eager's", user_source_line())

    def refuse_stale_views(self, exc: BaseException) -> None:
        """Note [Views made before an in-place view op]: functionalization regenerates a view by
        replaying its view ops on its base's *new* geometry (``t0 = a.t(); a.unsqueeze_(0); t0[::2]``
        replays ``t()`` on a 3-D tensor), where eager's view keeps its own. A failure of the trace
        after such an op is that limit, not the user's error."""
        if self.set_inside and type(exc) is ValueError and str(exc).startswith("Cannot view a tensor"):
            raise UnsupportedError("a tensor given another's geometry by set_() inside the function is viewed "
                                   "afterwards; functionalization keeps its old geometry, where eager takes the new "
                                   f"one ({str(exc).splitlines()[0][:120]})",
                                   hint='use the other tensor itself (or a clone) instead of set_(), or pass '
                                        'on_unsupported="eager"') from exc
        if (self.reshaped_under_views or self.set_under_views) and (
                type(exc) is IndexError and str(exc).startswith("Dimension out of range")   # fuzz seed 1002281
                or type(exc) is RuntimeError and "cannot be applied to a 0-dim tensor" in str(exc)):   # 11902337
            # a dimension gone (``t0 = a[1:]; a.set_(b.sum()); t1 * t0``: the slice replayed on a 0-dim tensor)
            raise stale_view_error("a view taken before an in-place view op (or set_()) on the tensor it views is "
                                   "used afterwards; it is regenerated from the new geometry, where eager keeps its "
                                   f"own ({str(exc).splitlines()[0][:120]})") from exc
        if type(exc) is RuntimeError and (_MULTI_OUTPUT_VIEW_STALE in str(exc)
                                          or str(exc).startswith((LEAF_WRITTEN, VIEW_OF_LEAF))):
            # eager's own errors: a multi-output view made with grad read after its base changed in place, an in-place
            # op on a leaf that requires grad or a view of one (fuzz seed 81155: unsqueeze_() of a leaf, after views)
            return
        replay_failed = type(exc) is RuntimeError and str(exc).startswith(("The expanded size", "shape '["))
        if self.reshaped_under_views and (type(exc) is RuntimeError or type(exc) is ValueError
                                          and str(exc).startswith("Cannot view a tensor")) \
                or self.set_under_views and replay_failed:   # fuzz seed 4801950: an expand of it replayed
            raise stale_view_error("a view taken before an in-place view op (or set_()) on the tensor it views is "
                                   "used afterwards; it is regenerated from the new geometry, where eager keeps its "
                                   f"own ({str(exc).splitlines()[0][:120]})") from exc

    def stale_when_returned(self, t: torch.Tensor) -> bool:
        """``t`` (a view) is still stale in eager when the function returns it: written under since it was made,
        and neither written itself nor read by autograd since (either regenerates its grad_fn: then it keeps
        its old geometry whatever ``.data =`` does to it later)."""
        return self.written_since_made(t) and _storage_id(t) not in self._stale_reads \
            and not self._written_itself.get(t)

    def _stale_given_data(self, t: torch.Tensor) -> bool:
        """``t``, a view of an input given other data by ``.data =``, is stale in eager: a write moved the version
        it shares since it was made (before the ``.data =``, into its old storage since, or through a tensor that
        keeps its counter into its new one; not through ``.data``, nor through the tensor that gave it the data,
        which count their own)."""
        given = self._views_given_data.get(t)
        if given is None:
            return False
        storage, writes, new, new_writes, stale = given
        return stale or self._writes.get(storage, 0) > writes or self._set_writes.get(new, 0) > new_writes

    def stale_view(self, t: torch.Tensor) -> bool:
        """``t`` (a view) is stale in eager now: a write moved the version it shares since it was made, and since
        autograd last read it (which regenerated its grad_fn: fuzz seed 4800052, ``t1 = a.t()``, a write through
        ``t1.detach()``, then ``t1 * t1``)."""
        storage, made, _ = self._made.get(t, (None, None, None))
        return made is not None and self._writes.get(storage, 0) > max(made, self._refreshed_at.get(t, made))

    def rebased(self, t: torch.Tensor) -> bool:
        """An in-place op autograd recorded ran on the view ``t`` itself (not ``t[i] = v`` with a basic index, which
        writes a view of it): autograd gave eager's ``t`` a node of its own then, which stays, stale or not, so an
        in-place op on it after the call does not take it for a leaf (--semantics12 seed 15203166: ``t0 =
        a[:, :1]; t0[[0, -1]] = t1.sum()``, ``t0`` returned, then ``out.mul_(2)``)."""
        return bool(self._rebased.get(t))

    def written_since_made(self, t: torch.Tensor) -> bool:
        """``t`` (a view) was made before an in-place op on its storage that bumped the version
        counter it shares: eager's view is then stale, and regenerates (or refuses) its grad_fn."""
        storage, made, _ = self._made.get(t, (None, None, None))
        return made is not None and self._writes.get(storage, 0) > made

    def written_after_made(self, t: torch.Tensor, other: torch.Tensor) -> bool:
        """An in-place op that bumps a version ran on ``other``'s storage after ``t`` was made: were the
        two storages one at run time (a detach of a view's input, passed as another input), eager's
        ``t`` would be stale."""
        _, _, clock = self._made.get(t, (None, None, None))
        return clock is not None and self._last_write.get(_storage_id(other), 0) > clock

    def saves(self):
        """Note [When eager saved an input]
        -----------------------------------
        Autograd's pack hook, around the metadata pass: the clock (in-place ops so far) at which eager first
        saved a tensor sharing each storage's version counter. The epilogue bumps an input's version (its
        ``t_()``, a ``copy_`` from its own memory) once, after the forward; eager bumped it where the
        program did. Where another input shares the saved one's storage at run time (``b`` and ``a = b[2:]``
        passed apart, never aliased in the trace, since no value changes), a bump after the save makes
        eager's backward raise and one before it does not (fuzz seeds 500638, 401079): the runtime counts
        only the bumps made before the save (``_epilogue_bumps`` in runtime/function.py). Only the saves of
        nodes on a path from the function's results count (``settle_saves``): eager never runs the others."""
        return torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)

    def _pack(self, t):
        counter = self._kept_counters.get(t) if isinstance(t, torch.Tensor) else None
        if counter is not None:   # given other data by .data =, it kept an input's version counter
            self._saving.append((counter, self._clock))
            self._saved_kept_counters.add(counter)
        elif isinstance(t, torch.Tensor) and not self._data_aliases.get(t) and self._set_sources.get(_elem(t)) is None:
            storage = _storage_id(t)   # .data and set_() count versions of their own
            if storage in self._expanded.scratch:   # a write through an unfold, made on a clone, saved its result
                self.saved_on_clones.add(self._expanded.scratch[storage])
            self._saving.append((self._expanded.scratch.get(storage, storage), self._clock))
        if isinstance(t, torch.Tensor):
            self._saving_objects.append(t)
        return t

    def _follow_clones(self, target: torch.Tensor, made: torch.Tensor | None = None) -> None:
        """After a write into ``target``'s storage: the clones writes through unfold views were rewritten onto
        follow it as eager's saved views would (``ExpandedViews.bump_clones``): their version moves with a write
        through a tensor sharing the storage's counter; a write through one with a counter of its own (``x.data``,
        a tensor ``set_()`` onto the storage) moves none, and they take its values."""
        if self._data_aliases.get(target) or self._set_sources.get(_elem(target)) is not None:
            self._expanded.refresh_clones(target, made)
        else:
            self._expanded.bump_clones(target, made)

    def saved_with_kept_counter(self, t: torch.Tensor) -> bool:
        """After ``settle_saves``: eager saved a tensor that ``.data =`` left on the input ``t``'s version counter
        (``t`` or a view of it, given other data): eager's backward checks ``t``'s version."""
        storage = self._input_storages.get(t)
        return storage in self._saved_kept_counters and self._saved_at.get(storage) is not None

    def _attribute_saves(self, result) -> None:
        """The saves made by the op that returned ``result``, kept with the node it made: a save counts only
        where that node is on a path to the function's results (``settle_saves``). Saves no node takes are
        counted as they are."""
        saves, self._saving = self._saving, []
        results = [r for r in (result if isinstance(result, (tuple, list)) else (result,))
                   if isinstance(r, torch.Tensor)]
        # an op's own result is saved as a shallow copy (a later .data = does not reach it), an argument as itself
        objects = [(t, any(t is r for r in results)) for t in self._saving_objects]
        self._saving_objects = []
        first = results[0] if results else None
        try:
            node = first.grad_fn if first is not None else None
        except RuntimeError:   # a stale view refusing its grad_fn: count the saves as they are
            node = None
        if node is None:
            for storage, clock in saves:
                self._saved_at.setdefault(storage, clock)
            self._saved_objects.extend((t, result, None) for t, result in objects)
        else:
            entry = self._node_saves.setdefault(id(node), (node, [], []))
            entry[1].extend(saves)
            entry[2].extend(objects)

    def settle_saves(self, outputs: list, others: list) -> None:
        """Count the saves of the nodes on a path from the function's ``outputs`` (and ``others``: its inputs'
        new histories) to the inputs: eager's backward never runs the others, whose saved values may be
        modified without error (fuzz seed 1201955: ``t0 = a.sin()`` unused, then ``c.t_()`` on another
        input on ``a``'s storage, then ``a @ a.t()``). Per output too (``saved_at``): a backward
        from one output runs only the nodes on its paths."""
        reached = [_reached(t) for t in outputs]
        reached_others = [_reached(t) for t in others]
        seen = set().union(*reached, *reached_others)
        self._by_output = [{} for _ in outputs]
        self._by_other = [{} for _ in others]
        for key, (_, saves, objects) in self._node_saves.items():
            if key in seen:
                by = None if any(key in nodes for nodes in reached_others) else \
                    tuple(k for k, nodes in enumerate(reached) if key in nodes)
                self._saved_objects.extend((t, result, by) for t, result in objects)
            for storage, clock in saves if key in seen else ():
                self._saved_at[storage] = min(clock, self._saved_at.get(storage, clock))
                for paths, by in ((reached, self._by_output), (reached_others, self._by_other)):
                    for k, nodes in enumerate(paths):
                        if key in nodes:
                            by[k][storage] = min(clock, by[k].get(storage, clock))
        self._node_saves.clear()

    def saved_itself(self, t: torch.Tensor) -> bool:
        """After ``settle_saves``: an op on a path from the results saved the tensor ``t`` itself as an argument (not
        as its own result): eager's backward reads ``t``'s data when it runs, after a ``.data =`` too (Note [Inputs
        given new data after the call] in runtime/function.py)."""
        return self.saved_itself_by(t) != ()

    def saved_itself_by(self, t: torch.Tensor) -> tuple[int, ...] | None:
        """``saved_itself``'s outputs: those whose backward reaches a node that saved ``t`` itself (() where none
        did; None: unknown, or a node an input's new history reaches)."""
        found: set = set()
        for o, result, by in self._saved_objects:
            if o is t and not result:
                if by is None:
                    return None
                found.update(by)
        return tuple(sorted(found))

    def saved_on_clone(self, t: torch.Tensor) -> bool:
        """An op saved its result written through an unfold of the input ``t``, on the clone the trace wrote: eager's
        saved result shares ``t``'s version counter, which the graph does not show."""
        return self._input_storages.get(t) in self.saved_on_clones

    def saved_otherwise(self, t: torch.Tensor) -> bool:
        """After ``settle_saves``: such an op saved another tensor on ``t``'s storage (a view, ``t.detach()``), or ``t``
        as its own result (a shallow copy): what eager's backward reads of those keeps the data of the call."""
        storage = _storage_id(t)
        return any(result or o is not t for o, result, _ in self._saved_objects if o is t or _storage_id(o) == storage)

    def saved_by(self, t: torch.Tensor) -> tuple[int, ...] | None:
        """After ``settle_saves``: the outputs from which eager's backward reaches a node that saved a tensor on
        ``t``'s storage, sharing its version counter (() where none did); None when one of the others' does."""
        if self._data_aliases.get(t) or self._set_sources.get(_elem(t)) is not None:
            return ()   # x.data and set_() count versions of their own
        storage = _storage_id(t)
        if any(storage in by for by in self._by_other):
            return None
        return tuple(k for k, by in enumerate(self._by_output) if storage in by)

    def saved_at(self, t: torch.Tensor) -> tuple[int | None, tuple[int | None, ...], tuple[int | None, ...]]:
        """After ``settle_saves``: when a tensor on the input ``t``'s first storage was first saved (a clock, or
        None), and the same per output and per other (input's new history) given to ``settle_saves`` (by a
        node on a path from it: fuzz seed 4403260, a save after ``t_()`` reached only from a written input)."""
        storage = self._input_storages.get(t)
        return (self._saved_at.get(storage), tuple(by.get(storage) for by in self._by_output),
                tuple(by.get(storage) for by in self._by_other))

    def written_at(self, t: torch.Tensor) -> int | None:
        """When the version counter of the input ``t``'s first storage last moved (a clock), or None."""
        return self._last_write.get(self._input_storages.get(t))

    def first_written_at(self, t: torch.Tensor) -> int | None:
        """When the version counter of the input ``t``'s first storage first moved (a clock), or None."""
        return self._first_write.get(self._input_storages.get(t))

    def view_reads(self, t: torch.Tensor) -> tuple[tuple[int, int], ...]:
        """(clock made, clock read) of each view of the input ``t``'s storage that autograd read."""
        return tuple(self._view_reads.get(self._input_storages.get(t), ()))

    def grad_first_read_at(self, t: torch.Tensor) -> int | None:
        """The clock when autograd first read the input ``t`` or a view of it in autograd, or None."""
        return self._grad_first_read_at.get(self._input_storages.get(t))

    def grad_read_at(self, t: torch.Tensor) -> int | None:
        """The clock when autograd last read the input ``t`` itself or a view of it in autograd (an op linking
        its node to their grad_fn), or None: a read after a version bump regenerates the grad_fn of a view in
        eager, also of a view taken before the bump (fuzz --semantics12, across a Dynamo graph break:
        ``t0.data = ...``, then ``u = t0[1:]``, ``t0.fill_()`` under no_grad, ``u.sum()``)."""
        return self._grad_read_at.get(self._input_storages.get(t))

    def multi_output_viewed(self, t: torch.Tensor) -> bool:
        """Autograd read a view a multi-output op (``chunk``, ``split``, ``unbind``) took with grad of the input ``t``
        (or of a view of it): eager refuses that use after an in-place op bumps the version of the storage, also
        through another input sharing it (check_geometry_writes_beside_multi_output_views in runtime/epilogue.py)."""
        return self._input_storages.get(t) in self._multi_output_storages

    def stale_view_read(self, t: torch.Tensor) -> bool:
        """Autograd read a view made inside of the input ``t``'s storage after a write into it since the view was
        made: eager regenerates that view's grad_fn from its autograd base (check_stale_views_of_leaf_views in
        runtime/epilogue.py)."""
        return self._input_storages.get(t) in self._stale_reads

    def mark_plain_views(self, tensors: list) -> None:
        """These inputs are the caller's views of a tensor that does not require grad, not requiring grad
        themselves. A write autograd records through a view of one (``a[::2] = w.sum()``) gives its base a
        history and leaves the input itself no grad_fn until autograd reads one (any op differentiating it
        regenerates it); an in-place op on it before then, under grad mode, raises eager's error for a leaf
        requiring grad (fuzz --semantics12 seed 5700407: ``a[::2] = t1.sum(); a.copy_(a)`` on ``a = base.t()``),
        which the trace, on an input that is no view, did not."""
        for t in tensors:
            self._plain_views[t] = "clean"

    def _note_plain_view_write(self, target: torch.Tensor, recorded: bool, setitem: bool) -> None:
        """Before a write: raise eager's leaf error for an in-place op on a plain view input left without a
        grad_fn; note a recorded write through a view of one (no grad_fn; ``x[i] = v`` writes through a view
        of ``x``) or on it (its grad_fn set)."""
        via = target._base if target._base is not None else target if setitem else None
        if via is not None and self._plain_views.get(via) is not None:
            if recorded and self._plain_views.get(via) == "clean":
                self._plain_views[via] = "null"
            return
        state = self._plain_views.get(target)
        if state == "null" and torch.is_grad_enabled():
            raise RuntimeError(LEAF_WRITTEN + ".")
        if recorded:
            self._plain_views[target] = "set"

    def mark_leaf_views(self, tensors: list) -> None:
        """These inputs (or the copies they are traced on), each with its ``CallerView``, are the caller's views
        of a leaf that requires grad: an in-place op autograd records on them, or on a view of them, raises eager's
        error there (fuzz seed 503382: traced on, ``t1 = a[:-1]; t1.squeeze_(); t1[:, 1:]`` failed with an
        IndexError), for a view made under no_grad or by ``unbind`` / ``split`` that view's own error."""
        for t, view in tensors:
            self._leaf_views[t] = view

    def _leaf_view_error(self, root: torch.Tensor, target: torch.Tensor) -> str:
        """Eager's error for an in-place op on ``target``, the input ``root`` (a caller's view of a leaf) or a view
        of it: a view of a view made under no_grad or by a multi-output op carries that making, named by its own
        node (``Output 0 of Select is a view of a view which was created in no_grad mode``)."""
        view = self._leaf_views.get(root)
        if target is root:
            return in_place_on_a_view_error(view)
        # eager's rule: the target's own making where it is not the default (an unbind inside, a view taken under
        # no_grad inside), else the one it inherited; an inference-mode one always (review of 9718cb7)
        own = creation_of(target)
        creation = view.creation if view.creation == CREATION.INFERENCE_MODE or own == CREATION.DEFAULT else own
        node = _grad_fn(target)
        return in_place_on_a_view_error(CallerView(creation, node.name() if node is not None else None,
                                                   target.output_nr))

    def mark_expanded_inputs(self, tensors: list) -> None:
        """These inputs are expanded (their elements share memory; traced as they are, or on a dense copy): a
        write into one raises ``ExpandedInputWritten`` before eager's overlap checks, which the copy's geometry
        would answer wrongly (the caller's ``b[:-1].copy_(b[1:])`` copies a memory onto itself; fuzz seed
        802195). The entry is then traced on their compact memory (Note [Expanded inputs written in place])."""
        self.expanded_inputs |= {_storage_id(t) for t in tensors}

    def mark_copies(self, tensors: list) -> None:
        """These inputs are traced on a copy of their elements (``clone_as_is``): their caller's storage may
        hold more than the copy."""
        self.copies |= {_storage_id(t) for t in tensors if isinstance(t, torch.Tensor)}

    def _note_reads(self, args: tuple) -> None:
        for arg in args:
            original = self._input_storages.get(arg) if isinstance(arg, torch.Tensor) else None
            if original is not None:
                self._inputs_read.add(original)

    def stand_for_roots(self, tensors: list) -> None:
        """These views, rebuilt from a synthetic base, stand for inputs that are no views in eager (autograd
        roots): an in-place op on one reads its grad_fn first (see ``_as_a_root``)."""
        for t in tensors:
            self._root_stand_ins[t] = True

    def watch(self, tensors: list) -> None:
        """Watch these views, which stand for inputs (views rebuilt from a synthetic base, Note [Aliased
        inputs]), for ``refreshed``."""
        for t in tensors:
            self._watched[t] = True

    def _before_write(self) -> tuple:
        """The write clock, the writes per storage and the storages with recorded writes, before an op's own."""
        return self._clock, dict(self._writes), frozenset(self._recorded_on_views | self._recorded_on_input)

    def _note_grad_fn_reads(self, args: tuple, kwargs: dict, before: tuple | None = None,
                            linked: bool = True) -> None:
        """Autograd read the grad_fn of each tensor argument (to link the op's node to it): an input whose
        storage a recorded write changed, stale until then, has a fresh one from now on. ``before``: the state
        before the op's own write (``_before_write``), when it writes: eager reads its arguments first (fuzz
        --semantics12 seed 5103541: ``t0 = b.chunk(2)[0]; b.narrow(0, 1, 1).mul_(t0)`` leaves ``t0`` stale, its
        grad_fn not regenerated). ``linked``: an op linked its node to them (not a read of ``t.grad_fn``): a
        gradient flows through the history read (``grad_first_read_at``)."""
        clock, writes = (before[0], before[1]) if before is not None else (self._clock, self._writes)
        for arg in (*args, *kwargs.values()):
            for t in arg if isinstance(arg, (list, tuple)) else (arg,):
                if not isinstance(t, torch.Tensor):
                    continue
                original = self._input_storages.get(t)
                if original is not None and t.requires_grad:
                    self._grad_read_at[original] = clock
                    if linked:
                        self._grad_first_read_at.setdefault(original, clock)
                    if self._plain_views and self._plain_views.get(t) == "null":
                        self._plain_views[t] = "set"   # autograd regenerated its grad_fn
                elif t.requires_grad and t._base is not None and (of := self._input_storages.get(t._base)) is not None:
                    self._grad_read_at[of] = clock   # a view of the input in autograd (not of a detach() of it)
                    if linked:
                        self._grad_first_read_at.setdefault(of, clock)
                made = self._made.get(t)
                if made is not None and made[2] is not None and t.requires_grad and t._is_view() \
                        and made[0] in self._input_bytes:
                    self._view_reads.setdefault(made[0], []).append((made[2], clock))
                if made is not None and made[1] is not None and t.requires_grad \
                        and writes.get(made[0], 0) > made[1]:
                    self._stale_reads.add(made[0])   # a view made before a write into its storage
                    self._refreshed_at[t] = writes.get(made[0], 0)   # eager regenerated its grad_fn here
                storage = _storage_id(t)
                if storage not in self._recorded_on_views and storage not in self._recorded_on_input \
                        or before is not None and storage not in before[2]:
                    continue
                if original is not None:
                    self._refreshed.add(original)
                if self._watched.get(t):
                    self._refreshed_watched[t] = True

    def _note_viewed_from(self, func, name: str, target: torch.Tensor, result: torch.Tensor) -> None:
        """``result``, a view of ``target``, descends from a watched view: remember which, and whether a
        ``detach()`` / ``.data`` on the way cut it from that view's autograd (fuzz seed 3604254)."""
        source = (target, False) if self._watched.get(target) else self._viewed_from.get(target)
        if source is None:
            return
        cut = name in ("detach", "detach_") or _reads_data(func, name)
        self._viewed_from[result] = (source[0], source[1] or cut)

    def viewed_from(self, t: torch.Tensor) -> tuple | None:
        """(the watched view ``t`` was taken from, through a detach()) or None."""
        return self._viewed_from.get(t)

    def refreshed(self, t: torch.Tensor) -> bool:
        """The watched view ``t`` had its grad_fn regenerated by eager after a recorded write into its storage
        (by an op reading it, or the write itself): the caller's tensor it stands for must too."""
        return bool(self._refreshed_watched.get(t))

    def _note_read_before_set(self, target: torch.Tensor) -> None:
        original = self._input_storages.get(target)
        if original is not None and original in self._inputs_read:
            self.read_before_set.add(original)

    def was_read_before_set(self, t: torch.Tensor) -> bool:
        """An op read the input ``t`` before set_() or ``.data =`` gave it another storage."""
        return self._input_storages.get(t) in self.read_before_set

    def view_before_requires_grad(self, t: torch.Tensor) -> str | None:
        """The line of a ``requires_grad_()`` on the input ``t`` after a view of it was made, or None."""
        return self.views_before_requires_grad.get(self._input_storages.get(t, _storage_id(t)))

    def counter_kept_from(self, t: torch.Tensor, inputs: list) -> int | None:
        """Note [Assigning .data]: the input whose version counter ``t`` kept when ``.data =`` gave it other
        data (``t = x.detach(); t.data = ...``), or None."""
        counter = self._kept_counters.get(t)
        if counter is None:
            return None
        return next((i for i, a in enumerate(inputs)
                     if isinstance(a, torch.Tensor) and self._input_storages.get(a) == counter), None)

    def via_data(self, t: torch.Tensor) -> bool:
        """``t`` is ``x.data`` or a view of it: its version counter is its own, not ``x``'s."""
        return bool(self._data_aliases.get(t))

    def written(self, t: torch.Tensor) -> bool:
        """An in-place op (data or metadata) ran on a tensor sharing ``t``'s storage, not through
        ``.data``: eager bumped the version counter ``t`` shares with it."""
        return _storage_id(t) in self.written_directly

    def written_through_views_with_grad(self, t: torch.Tensor) -> bool:
        """Every in-place op autograd records on the input ``t``'s storage ran on a view of ``t``, none on
        ``t`` itself: eager leaves ``t``'s own ``grad_fn`` stale until it is read (Note [Writes through a
        view of an input] in runtime/epilogue.py)."""
        storage = _storage_id(t)
        return storage in self._recorded_on_views and storage not in self._recorded_on_input \
            and storage not in self._refreshed

    def written_with_grad(self, t: torch.Tensor) -> bool:
        """An in-place op autograd records ran on ``t`` or on a tensor sharing its version counter (a view of it,
        whose op eager refuses where ``t`` is a view of a leaf); not on another tensor set_() onto its storage
        (fuzz seed 12701995: ``a.set_(b); a.t_()``, ``b`` a view of a leaf: eager's ``t_()`` is on ``a``)."""
        return any(target is None or target is t or shares_version_counter(t, target)   # gone: counted, as before
                   for target in (ref() for ref in self._written_with_grad.get(_storage_id(t), ())))

    def written_via_set_with_grad(self, t: torch.Tensor) -> bool:
        """``t``'s storage was written through a tensor set_() gave it, with autograd recording the write."""
        return _storage_id(_elem(t)) in self._written_via_set_with_grad

    def only_via_data(self, t: torch.Tensor) -> bool:
        """``t``'s storage was written in place only through ``.data`` aliases: eager leaves its version
        unchanged (``.data`` counts its own versions)."""
        storage = _storage_id(t)
        return (storage in self.written_via_data or _storage_id(_elem(t)) in self.written_via_set) \
            and storage not in self.written_directly

    def _user_stride(self, t: torch.Tensor) -> tuple:
        """``t``'s strides as eager's view ops made them."""
        return self._eager_strides.get(t) or tuple(t.stride())

    def _check(self, target: torch.Tensor, rest: tuple, kwargs: dict) -> None:
        if has_internal_overlap(target):
            raise RuntimeError(INTERNAL_OVERLAP)
        for other in (*rest, *kwargs.values()):
            if isinstance(other, torch.Tensor) and _partial_overlap(target, other, self._user_stride):
                raise RuntimeError(PARTIAL_OVERLAP)
            if isinstance(other, torch.Tensor) and _unordered_overlap(target, other):
                raise UnsupportedError("an in-place op that reads elements it writes through another view "
                                       "(x.t().mul_(x)) cannot be compiled: eager's result depends on the order "
                                       "its kernel visits them", source=user_source_line(),
                                       hint='read from a clone, or pass on_unsupported="eager"')


# Fills: the position of the written value among the op's arguments after the target
# (None: the op writes zeros).
_FILL_VALUE = {"fill_": 0, "zero_": None, "masked_fill_": 1, "index_fill_": 2, "__setitem__": 1, "index_put_": 1}


def _reaches_beyond_its_elements(t: torch.Tensor, size, stride, storage_offset=None) -> bool:
    """``t.as_strided_(size, stride, storage_offset)`` of the view ``t`` places it on storage elements that are not
    among ``t``'s own: functionalization's replay of it, on the view's elements, then differs from eager's, on the
    storage (seen over random views and geometries, tests/test_input_semantics.py); not known (symbolic): True."""
    plain = from_fun(t)
    offset = plain.storage_offset() if storage_offset is None else storage_offset
    if not (static(*geometry(plain)) and static(tuple(size), tuple(stride), offset)):
        return True
    return not np.isin(_geometry_offsets(size, stride, offset), _element_offsets(plain)).all()


class ViewOfLeafWritten(RuntimeError):
    """Eager's error for a write through a view of a leaf that requires grad, raised by the trace where the view
    was taken before ``requires_grad_()`` on the input: eager's is that error where the input is no view of the
    caller's, and no error where it is one (the view hangs off the caller's base, which requires no grad), which
    the metadata pass answers by passing such inputs as views (``collect_metadata``), also for an entry compiled
    without a backward (--semantics12 seed 11800285: eager's backward raises)."""

    def __init__(self):
        super().__init__(VIEW_OF_LEAF + ".")


def _check_in_place_on_a_leaf(func, target: torch.Tensor, rest: tuple, kwargs: dict, of_an_input: bool) -> None:
    """Eager's in-place checks for ``func(target, *rest, **kwargs)``, a write through a view of an expand that the
    trace rewrites onto a clone (where autograd never sees it): under grad mode, a target requiring grad that is a
    leaf, a view of one, or a view made under no_grad or by a multi-output op, is refused by autograd (fuzz
    --semantics12 seed 14992982: ``v = a.expand(2, 3, 4).detach().requires_grad_()``, then ``relu_(v[0])``). Then
    the op runs on the target itself, where autograd's check raises eager's error in eager's order: for ``x[i] = v``
    after the value's conversion and the basic index (review of 54c4f1c: ``v[5] = 1.0`` raises IndexError first),
    with eager's message (``v[0] = 1.0`` writes the view ``v[0]``, ``v[:, [0]] = 1.0`` the leaf itself). Not for a
    view of an input that requires grad in the trace: the caller's may be no leaf (Note [Eager's in-place checks])."""
    if not (torch.is_grad_enabled() and target.requires_grad):
        return
    if creation_of(target) == CREATION.DEFAULT:   # else made as eager's was, also of an input (review of 7803a49:
        root = target._base if target._base is not None else target   # ``t1[0]`` taken under no_grad)
        if of_an_input and root.requires_grad or not (target.is_leaf or root.is_leaf):
            return
    func(target, *rest, **kwargs)   # raises: autograd checks before the write reaches the expand's memory
    raise AssertionError(f"autograd let {getattr(func, '__name__', func)} write a leaf or a view of one")


def _write_through_view_before_requires_grad(name: str) -> UnsupportedError:
    """Fuzz seed 4201969: ``t1 = a.expand(...); a.requires_grad_(); t1.fill_(2.0)`` on an input that is the caller's
    view: eager's ``t1`` hangs off the caller's base and does not require grad; the rewrite of writes into expands,
    traced with ``a`` requiring grad from the start, wrote into ``a`` itself (eager's leaf error where eager raises
    none). Other writes through such views compile as before."""
    return UnsupportedError(
        f"{name} through an expand of an input taken before requires_grad_() on that input cannot be compiled: eager's "
        "expand does not require grad, the traced one does",
        source=user_source_line(),
        hint='call requires_grad_() before taking views (or outside the function), or pass on_unsupported="eager"')


def _reads_data(func, name: str) -> bool:
    """``func`` is the read of ``x.data`` (or what Dynamo records for it)."""
    return name == "__get__" and getattr(func, "__self__", None) is _DATA or func is _GET_DATA


def _recorded(args: tuple, kwargs: dict) -> bool:
    """Autograd records this in-place op: grad mode, and an argument (the target included) requires grad."""
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in (*args, *kwargs.values()))


def _recorded_write_of_a_view_given_data(name: str) -> UnsupportedError:
    """Fuzz seed 9801038: ``t1 = a[:-1]; t1.data = t1.data * 2; t1.copy_(t0)`` with ``t0`` requiring grad: eager
    rewrites the history of ``t1``'s autograd base with ``t1``'s new geometry, laid on the base's elements."""
    return UnsupportedError(
        f"{name}() with autograd recording it, on a view of an input given other data by .data =: eager rewrites "
        "the input's history with the view's new geometry laid on the input's elements, which the trace does not "
        "follow", source=user_source_line(),
        hint="write into a new variable (t = v.data * 2) rather than assigning .data, or run the write under "
             'torch.no_grad(), or pass on_unsupported="eager"')


def recorded_write_after_set_onto_an_input() -> UnsupportedError:
    """Fuzz seed 3804719: ``b.set_(c)`` with ``c`` an input requiring grad, then ``b[::2].sin_()``: eager records the
    write on ``b``, whose history set_() began, and leaves ``c``'s history as it was (its data changed
    under it); the epilogue could only record it on ``c`` (an expand of a leaf there: eager's leaf error)."""
    return UnsupportedError(
        "an in-place op with autograd recording it, through a tensor set_() (or .data =) onto the storage of an "
        "input: eager records it on that tensor and leaves the input's history as it was, which the copy into the "
        "input cannot follow",
        hint='run the in-place op under torch.no_grad() or on a clone, or pass on_unsupported="eager"')


def _write_after_as_strided_of_a_view(name: str) -> UnsupportedError:
    """Fuzz --semantics12 seed 3903057: ``t1 = t0[::2]; t1.as_strided_((2,), (1,)); t1.zero_()``. Eager's
    ``as_strided_`` places ``t1`` on its storage's elements 0 and 1; functionalization replays it on the
    view's own elements (0 and 2 of the storage), so a write through it lands elsewhere. Refused where the
    new geometry reaches elements the view did not hold (``_reaches_beyond_its_elements``), a rule checked
    against eager over random views and geometries (tests/test_input_semantics.py)."""
    return UnsupportedError(
        f"{name} through a view that as_strided_() placed on storage elements it did not hold before cannot be "
        "compiled: the trace places the new geometry on the view's elements, eager on its storage's",
        source=user_source_line(),
        hint='write into a clone, or pass on_unsupported="eager"')


class ExpandedViews:
    """The tensors that are views of an ``expand``, each with the tensor that was expanded."""

    def __init__(self):
        self._source = _ByTensor()
        self.scratch = {}   # storage of a clone written in a target's place -> the target's storage
        # the target's storage -> (clone, the view written on it): their versions and values follow the storage's
        self._clones: dict[int, list] = {}
        self.fresh = None   # the clone the last write() made, if it made one
        # roots (a detach, a .data) a write with grad went through whose history eager records and the rewrite
        # does not -> the line of that write
        self.unrecorded = _ByTensor()
        self.any_unrecorded = False

    def bump_clones(self, target: torch.Tensor, made: torch.Tensor | None = None) -> None:
        """A write into ``target``'s storage: eager bumps the version counter the values saved through the
        views written on a clone (``relu_`` keeps its result) share with it, so a backward reaching them raises (fuzz
        --semantics12 seed 8201891: ``relu_`` through an unfold of ``a``, then ``a[-1].add_(0.5)``); the clones
        count the write too."""
        for clone, _ in self._clones.get(_storage_id(target), ()):
            if clone is not made:   # the write made that one: its own op moved its version
                torch.autograd.graph.increment_version(clone)

    def refresh_clones(self, target: torch.Tensor, made: torch.Tensor | None = None) -> None:
        """After a write into ``target``'s storage that moves no version (through ``.data``): eager's saved views
        read the new values, without an error; the clones take them, their versions kept."""
        for clone, view in self._clones.get(_storage_id(target), ()):
            if clone is not made:
                with torch.no_grad():
                    clone.data.copy_(view)

    def track(self, func, target, result: torch.Tensor) -> None:
        """Record ``result`` of ``func(target, ...)`` when it is an expand (or an unfold: functionalization refuses
        writes through one, whether its windows overlap or not) or a view of one."""
        if target is None:
            return
        if func in _EXPANDS or func is torch.Tensor.unfold:   # set_() may have noted None: viewing no expand
            source = self._source.get(target)                 # (fuzz seed 3803057)
            self._source[result] = target if source is None else source
            return
        source = self._source.get(target)
        if source is not None and result is not target and _storage_id(result) == _storage_id(target):
            self._source[result] = source

    def views_an_expand(self, t: torch.Tensor) -> bool:
        """``t`` is an expand (or unfold) or a view of one: writes through it are rewritten onto the source."""
        return self._source.get(t) is not None

    def note_set(self, target: torch.Tensor, source: torch.Tensor) -> None:
        """``target.set_(source)``: ``target`` now views what ``source`` views (an expand's memory, or not)."""
        self._source[target] = self._source.get(source)

    def write(self, func, name: str, target: torch.Tensor, rest: tuple, kwargs: dict, via_data: bool = False,
              via_set: bool = False) -> bool:
        """Apply ``func(target, *rest, **kwargs)``, a write, to the source of the expand ``target``
        views (Note [Writes into expanded tensors]). False when ``target`` views no expand, or
        when the write is not one this rewrite expresses (eager's checks decide about it). ``via_data``:
        ``target`` is ``x.data`` or a view of it, which counts its own versions; so does the write. ``via_set``:
        ``target`` (or what it views) was given its storage by ``set_()`` or ``.data =``; written through another
        autograd root than the source's, its counter is its own too (fuzz seed 9200933: ``a.data = ...`` then a
        write through ``a.expand(...)`` moves ``a``'s)."""
        source = self._source.get(target)
        self.fresh = None
        if source is None:
            return False
        if name == "__setitem__" and _basic_index(rest[0]):   # eager indexes first: its IndexError comes before the
            target[rest[0]]   # noqa: B018                      write's own checks (fuzz --semantics12 seed 14813336)
        if torch.is_grad_enabled() and multi_output_view(target):
            raise RuntimeError(MULTI_OUTPUT_VIEW_WRITTEN)   # eager's, before its op runs (fuzz seed 1902498)
        if _storage_id(source) != _storage_id(target):
            # a set_() (or .data =) moved the source off the memory the target views (fuzz seed 3003200)
            raise frozen_storage_write(user_source_line())
        t, s = from_fun(target), from_fun(source)
        if not (static(*geometry(t)) and static(*geometry(s))):
            return False   # symbolic geometry: functionalization's own path
        if t.numel() == 0:   # nothing to write, but autograd records the op (functionalization's path runs it),
            if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad   # also where only
                                               for x in (target, *rest, *kwargs.values())):     # the operand requires
                return False   # grad: the target then does too (fuzz seed 6302752: b[1:1].copy_(a), b an expand)
            if name == "__setitem__":   # nothing to write, but eager's index checks run (fuzz seed 1100645)
                target[rest[0]]   # noqa: B018
            return True
        # written through .data or a detach(): autograd records it on that alias, never on the source, also where
        # only the value written requires grad (fuzz --semantics12 seed 7703208); .data leaves the version counter
        # the saved tensors check (fuzz seed 3005184)
        apart = _root_of(target) is not _root_of(source)
        aliased = via_data or source.requires_grad and not target.requires_grad or apart
        if aliased:
            source = source.data if via_data or via_set and apart else source.detach()
        if aliased and torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                                       for x in (*rest, *kwargs.values())):
            # eager's detached alias now requires grad, its history into the value written (fuzz --semantics12
            # seed 8802387); the rewrite's is on a detach of the source: its later use is refused by name
            self.unrecorded[_root_of(target)] = user_source_line()
            self.any_unrecorded = True
        if geometry(t) == geometry(s):
            func(source, *rest, **kwargs)   # the expand added nothing: its memory is exactly the source's
            return True
        overlapping = _overlapping(t)
        if overlapping and name in _IDEMPOTENT and all(isinstance(a, (bool, int, float)) for a in
                                                       (*rest, *kwargs.values())) and not has_internal_overlap(t) \
                and not (torch.is_grad_enabled() and target.requires_grad):
            overlapping = False   # an unfold's copies of an element all take one value (see the Note)
        if not overlapping:
            new = target.clone()   # the target's new value, on memory of its own
            self.scratch[_storage_id(new)] = _storage_id(target)   # eager saved the target (relu_ its result)
            func(new, *rest, **kwargs)
            extent = _storage_extent(t, s)
            memory = source.new_zeros(extent).index_put((_offsets(s),), source)
            memory = memory.index_put((_offsets(t),), new)
            source.copy_(memory[_offsets(s)])
            self._clones.setdefault(_storage_id(target), []).append((new, target))
            self.fresh = new
            return True
        value = _fill_value(name, rest, kwargs)
        if value is _NOT_A_FILL and not has_internal_overlap(t):   # overlapping windows of an unfold
            raise UnsupportedError(f"{name} through an unfold whose windows overlap cannot be compiled: eager applies "
                                   "it once per window to the shared elements, in its kernel's order, and autograd "
                                   "records it on the overlapping view (fills, and idempotent elementwise ops such as "
                                   "clamp_ that autograd does not record, are compiled)",
                                   source=user_source_line(),
                                   hint="write through x.unfold(d, size, step) with step >= size, or into a clone, "
                                        'or pass on_unsupported="eager"')
        if value is _NOT_A_FILL:
            return False
        if name == "fill_" and isinstance(rest[0] if rest else kwargs.get("value"), torch.Tensor) \
                and has_internal_overlap(t):   # fill_ of a tensor value checks its target (of a number, not)
            raise RuntimeError(INTERNAL_OVERLAP)
        basic = name == "__setitem__" and _basic_index(rest[0])
        if basic and has_internal_overlap(_indexed(t, rest[0])):   # copied into an overlapping view: eager raises
            raise RuntimeError(INTERNAL_OVERLAP)
        # eager's backward writes the target's own gradient into the overlapping view: only where it had one
        target_grad = source.requires_grad
        if target_grad and torch.is_grad_enabled() and not basic and not has_internal_overlap(t) \
                and name in ("__setitem__", "index_put_", "index_fill_"):
            raise UnsupportedError(f"{name} with an index through an unfold whose windows overlap, into a tensor that "
                                   "requires grad, cannot be compiled: eager's backward copies the gradient through "
                                   "the overlapping windows in its kernel's order (review of 155fbcb)",
                                   source=user_source_line(),
                                   hint="write through x.unfold(d, size, step) with step >= size, or into a clone, "
                                        'or pass on_unsupported="eager"')
        _check_index_put_dtypes(name, t.dtype, rest, kwargs, basic)
        entries = _entry_counts(name, t.shape, t.device, rest, kwargs)
        counts = torch.zeros(_storage_extent(t, s), dtype=torch.int32, device=t.device)
        counts = counts.index_put((_offsets(t).reshape(-1),), entries.reshape(-1), accumulate=True)
        written = counts[_offsets(s)] > 0
        if isinstance(value, torch.Tensor) and value.requires_grad and torch.is_grad_enabled() \
                and source.is_floating_point():
            # eager's backward sums the value's gradient over the written view's elements, an element reached by
            # n windows n times (fuzz seed 10202545: ``t0 = b.unfold(0, 2, 1); t0[...] = t0.sum()``): the value
            # is weighted by that count in the gradient only
            source.copy_(torch.where(written, _CountedValue.apply(value, counts[_offsets(s)]), source))
        else:
            source.masked_fill_(written, value)
        if torch.is_grad_enabled() and target_grad and not basic and has_internal_overlap(t):
            _BackwardRaisesOverlap.apply(source)   # eager records the write on the overlapping (stride 0) view
        return True


def _scalar_type_name(dtype: torch.dtype) -> str:
    """c10's name of ``dtype`` (``Float``, ``Double``, ``Long``), as eager's kernels print it."""
    return torch.empty(0, dtype=dtype).type().removeprefix("torch.").removesuffix("Tensor")


def _check_index_put_dtypes(name: str, dtype: torch.dtype, rest: tuple, kwargs: dict, basic: bool) -> None:
    """Eager's index_put_ (also ``x[index] = v`` with an advanced index other than one mask, which eager fills with
    ``masked_fill_``) requires a tensor value of the target's dtype; the fill rewrite casts, so the check is made
    here (fuzz --semantics12 seed 12400591: ``a.expand(2, 3, 3)[[0, -1]] = t0.sum()``, ``t0`` float64 under
    ``torch.set_default_dtype(torch.float64)``, ``a`` float32)."""
    if name == "index_put_":
        value, index = (rest[1] if len(rest) > 1 else kwargs.get("values")), tuple(rest[0])
    elif name == "__setitem__" and not basic:
        value, index = rest[1], rest[0]
    else:
        return
    if isinstance(value, torch.Tensor) and value.numel() == 1 and _one_mask(index):
        return   # eager fills through one mask with masked_fill_, which casts (review of 5714ffe)
    if isinstance(value, torch.Tensor) and value.dtype != dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_scalar_type_name(dtype)} for the destination and {_scalar_type_name(value.dtype)} "
                           "for the source.")


def _one_mask(index) -> bool:
    """The advanced part of ``index`` is one boolean mask (a bool tensor, or a list of Python bools); basic parts
    (integers, slices, None, Ellipsis) aside."""
    parts = index if isinstance(index, tuple) else (index,)
    advanced = [p for p in parts if isinstance(p, (torch.Tensor, list))]
    if len(advanced) != 1:
        return False
    part = advanced[0]
    if isinstance(part, torch.Tensor):
        return part.dtype == torch.bool
    return len(part) > 0 and all(isinstance(v, bool) for v in part)


class _CountedValue(torch.autograd.Function):
    """``value`` (0-dim) broadcast to ``counts``' shape; its gradient is the incoming one weighted by ``counts``
    (how many elements of an overlapping view reach each element), summed: eager's gradient of a fill through
    that view. The forward is the value itself, exactly."""

    @staticmethod
    def forward(ctx, value, counts):
        ctx.save_for_backward(counts)
        return value.expand(counts.shape).clone()

    @staticmethod
    def backward(ctx, grad):
        (counts,) = ctx.saved_tensors
        return (grad * counts.to(grad.dtype)).sum(), None


class _BackwardRaisesOverlap(torch.autograd.Function):
    """Eager's autograd records a write into overlapping elements on the expanded view, and its
    backward then writes a gradient into that view: eager's overlap error, when the backward runs
    (Note [Errors in the backward] in runtime/function.py carries it to the compiled backward)."""

    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(INTERNAL_OVERLAP)


def _basic_index(index) -> bool:
    """``x[index] = v`` writes the view ``x[index]`` (where advanced indexing writes ``x`` itself
    by index_put_): in ``x.expand(2, 3)[1:] = v`` the written view, one row, does not overlap."""
    index = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice)) and not isinstance(i, bool) for i in index)


def setitem_writes_a_view(t: torch.Tensor, index) -> bool:
    """Eager's ``t[index] = v`` writes a view of ``t``, not ``t`` itself: an integer (or a 0-dim integer or bool
    tensor), ``None`` or ``True`` in the index, or a slice that does not take its whole dim. A slice from 0 with
    step 1 to the dim's length or beyond is ``t`` itself, as advanced indexing alone is (``index_put_`` on ``t``).
    Which one eager wrote decides whether ``t``'s own ``grad_fn`` is stale afterwards (Note [Writes through a
    view of an input] in runtime/epilogue.py; fuzz --semantics12 seed 10102973: ``b[0, 1] = a.sum()``)."""
    if isinstance(index, range) or isinstance(index, list) and not any(
            isinstance(i, (torch.Tensor, list, tuple, range, slice)) or i is None or i is Ellipsis for i in index):
        return False   # a list of integers is one advanced index: index_put_ on t (eager's treatSequenceAsTuple)
    items = tuple(index) if isinstance(index, list) else index if isinstance(index, tuple) else (index,)

    def dims(item) -> int:
        if item is None or isinstance(item, bool) or item is Ellipsis:
            return 0
        if isinstance(item, torch.Tensor) and item.dtype == torch.bool:
            return max(item.dim(), 1)
        return 1

    ellipsis = next((k for k, item in enumerate(items) if item is Ellipsis), None)
    after = sum(dims(item) for item in items[ellipsis + 1:]) if ellipsis is not None else 0
    dim = 0
    for k, item in enumerate(items):
        if ellipsis is not None and k == ellipsis + 1:
            dim = t.dim() - after
        if item is None or isinstance(item, bool):
            return True
        if isinstance(item, (list, tuple, range)) or type(item).__module__ == "numpy" and getattr(item, "ndim", 0) > 0:
            pass   # an advanced index (a sequence, an array): index_put_ on what the basic indices leave
        elif isinstance(item, torch.Tensor):
            if item.dim() == 0 and (item.dtype == torch.bool or not item.is_floating_point()):
                return True
        elif isinstance(item, slice):
            length = t.shape[dim] if dim < t.dim() else 0
            if item.start not in (None, 0) or item.step not in (None, 1) \
                    or item.stop is not None and not item.stop >= length:
                return True
        elif item is not Ellipsis:   # an integer, or anything with __index__
            return True
        dim += dims(item)
    return False


def _indexed(t: torch.Tensor, index) -> torch.Tensor:
    """A tensor with ``t[index]``'s geometry."""
    return torch.empty_strided(t.shape, t.stride(), dtype=torch.bool, device=t.device)[index]


_NOT_A_FILL = object()


def _fill_value(name: str, rest: tuple, kwargs: dict):
    if name not in _FILL_VALUE:
        return _NOT_A_FILL
    if name == "index_put_" and (kwargs.get("accumulate") or len(rest) > 2 and rest[2]):
        return _NOT_A_FILL
    position = _FILL_VALUE[name]
    if position is None:
        return 0
    value = rest[position] if len(rest) > position else kwargs.get("value")
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            return _NOT_A_FILL
        return value.reshape(())
    return value if isinstance(value, (bool, int, float)) else _NOT_A_FILL


def _entry_counts(name: str, shape: torch.Size, device: torch.device, rest: tuple, kwargs: dict) -> torch.Tensor:
    """How many entries of the fill's index reach each of the target's elements (an index tensor may name an
    element twice: ``t[[0, 0, 1]] = v``): eager's backward of the value gathers the gradient once per entry
    of an indexing write (``index_fill_``'s, once per element). A mask names each element once; it is marked
    as it is (gathering through it would make the count's size depend on its values)."""
    marks = torch.zeros(shape, dtype=torch.int32, device=device)
    if name in ("fill_", "zero_"):
        return marks.fill_(1)
    if name == "masked_fill_":
        return marks.masked_fill_(rest[0], 1)
    if name == "index_fill_":
        return marks.index_fill_(rest[0], rest[1], 1)
    index = rest[0] if name == "__setitem__" else tuple(rest[0])
    parts = index if isinstance(index, tuple) else (index,)
    masks = [p for p in parts if isinstance(p, torch.Tensor) and p.dtype == torch.bool]
    if masks and len(masks) == sum(isinstance(p, (torch.Tensor, list, tuple, range)) for p in parts):
        marks[index] = 1   # masks alone name each element once
        return marks
    if masks:   # counting a mixed index's entries would gather through the mask: a size known only from values
        raise UnsupportedError(f"{name} through overlapping unfold windows with an index mixing a mask and integer "
                               "indices cannot be compiled: eager's gradient of the value counts the entries the "
                               "index names, whose number depends on the mask's values",
                               source=user_source_line(),
                               hint='index with integers only, or write into a clone, or pass on_unsupported="eager"')
    ids = torch.arange(shape.numel(), device=device).view(shape)[index].reshape(-1)
    counts = marks.view(-1).index_put_((ids,), torch.ones_like(ids, dtype=torch.int32), accumulate=True)
    return counts.view(shape)


# elementwise in-place ops f with f(f(x)) == f(x) for their scalar arguments
_IDEMPOTENT = frozenset({"clamp_", "clamp_min_", "clamp_max_", "clip_", "relu_", "abs_", "sign_", "floor_", "ceil_",
                         "trunc_", "round_", "nan_to_num_", "hardtanh_"})


def windows_overlap(t: torch.Tensor) -> bool:
    """Some elements of ``t`` share a memory location through strides that are not 0 (overlapping windows of an
    unfold); a quick test of strides first, which clears every tensor whose dimensions nest."""
    if has_internal_overlap(t) or t.numel() <= 1 or not static(*geometry(t)) or _dense(t):
        return False
    reach = 0   # the largest offset the dimensions of smaller stride reach
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride(), strict=True) if sz > 1):
        if stride <= reach:
            return _overlapping(t)
        reach += (size - 1) * stride
    return False


def _overlapping(t: torch.Tensor) -> bool:
    """Some elements of ``t`` share a memory location (a stride of 0, or windows of an unfold that
    overlap): concrete geometry only."""
    if has_internal_overlap(t):
        return True
    if t.numel() <= 1 or not static(*geometry(t)):
        return False
    offsets = _element_offsets(t)
    return len(np.unique(offsets)) < offsets.size


def _offsets(t: torch.Tensor) -> torch.Tensor:
    """The storage offset of every element of ``t``, as a tensor of ``t``'s shape."""
    offsets = torch.full(t.shape, t.storage_offset(), dtype=torch.int64, device=t.device)
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
        shape = [1] * t.dim()
        shape[dim] = size
        offsets = offsets + (torch.arange(size, dtype=torch.int64, device=t.device) * stride).reshape(shape)
    return offsets


def _storage_extent(*tensors: torch.Tensor) -> int:
    return max(extent(*geometry(t)) for t in tensors)


def _as_a_root(t: torch.Tensor) -> None:
    """Before an in-place op on a view standing for an autograd root (Note [Aliased inputs]), regenerate its
    grad_fn as a root's own would be current: a view written through a view of itself with autograd recording
    it keeps no grad_fn until one is read, and an in-place op then takes it for a leaf requiring grad and raises
    eager's leaf error, which the root never raises (fuzz seed 5002775: ``a[0, 1] = c.sum(); a.zero_()`` on
    ``a`` passed beside ``a[:, :2]``)."""
    if torch.is_grad_enabled() and t.requires_grad:
        with torch._C.DisableTorchFunction():
            t.grad_fn   # noqa: B018  (a read that regenerates it)


def analysis() -> EagerInPlaceChecks | None:
    """The metadata pass's in-place checks, when the function runs under them (not in the joint trace)."""
    checks = in_place_checks()
    return checks if checks is not None and checks.analyze else None


def in_place_checks() -> EagerInPlaceChecks | None:
    """The in-place checks the function runs under, in the metadata pass or in the joint trace."""
    for mode in torch.overrides._get_current_function_mode_stack():
        if isinstance(mode, EagerInPlaceChecks):
            return mode
    return None
