"""Leaves the compiled function creates: factories with ``requires_grad=True``, ``requires_grad_()``
or ``t.requires_grad = True`` on a tensor computed inside.

Note [New leaves]
-----------------
In eager, ``w = torch.ones(3, requires_grad=True)`` or ``v = x.detach().requires_grad_()`` makes a
new leaf at every call: outputs computed from it require grad (even when no input does), their
backward accumulates into ``w.grad``, and a returned leaf is that very object (``is_leaf``,
``grad_fn is None``, its ``.grad`` filled by a backward through the other outputs).

A graph cannot create autograd leaves, so each new leaf becomes a *slot*: an extra graph input
(role ``NEW_LEAF``) that the runtime creates at every call, as a leaf that requires grad. The
tracer runs the user's function through ``LeafSlots``, which finds the leaves as they are made
(``LeafBinder``, a TorchFunctionMode), then:

* writes the leaf's final value into its slot under ``no_grad`` (a mutation hidden from autograd,
  copied into the slot by the epilogue) when the leaf or a view of it is returned;
* returns the slot where the function returns the leaf, so the caller gets the slot object;
* has the joint take the gradient with respect to the leaf as the slot's gradient, so autograd
  accumulates it into ``slot.grad`` through the compiled Function's backward.

A leaf that shares an input's storage (``x.detach().requires_grad_()``, ``x.view(-1).requires_grad_()``
on an input that does not require grad) gets a slot that is a detached alias of the caller's tensor
with the leaf's geometry, so it shares storage as eager's does; its value needs no copy (writes to it
are writes to the input). A returned view of a leaf is a view of the slot, so its gradient goes to the
slot, never to the input; ``nn.Parameter(t)`` made inside gets an ``nn.Parameter`` slot. Refused by name:
a leaf with symbolic sizes (unless it is an input's ``detach()``, whose slot needs none), a fresh leaf whose
storage another output shares (a slot shares none), and a leaf that is itself a view (``x.view(-1)``)
whose storage a differentiable output shares (which of them derives from the leaf is not known).

Under ``torch.compile``, Dynamo creates factory leaves itself and passes them in as graph inputs, and
graph-breaks on ``requires_grad_()``, ``requires_grad = True`` and ``nn.Parameter``: it runs them eagerly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch._C._functionalization as functionalization
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import _disable_current_modes

from ..errors import UnsupportedError, user_source_line
from ..ir.sizes import extent
from .context import (
    _AS_INPUTS,
    _REQUIRES_GRAD,
    INFERENCE_REQUIRES_GRAD_ERROR,
    from_fun,
    geometry,
    inference_in_eager,
    shares_version_counter,
    static,
)
from .inplace import VIEW_OF_MODIFIED_BASE, analysis


@dataclasses.dataclass(frozen=True)
class NewLeaf:
    """How the runtime makes one slot (Note [New leaves]): a fresh tensor, or a detached alias of
    graph input ``source`` (the whole tensor when ``geometry`` is None)."""

    geometry: tuple | None      # (size, stride, storage offset); None: the source's own
    dtype: torch.dtype
    device: torch.device
    source: int | None = None   # graph input whose storage the leaf shares
    written: bool = False       # the graph writes the leaf's value into the slot (returned, fresh)
    parameter: bool = False     # made by nn.Parameter(...): the slot is an nn.Parameter too


def make_slot(leaf: NewLeaf, inputs: list) -> torch.Tensor:
    """A new leaf that requires grad, as Note [New leaves] describes."""
    with torch.no_grad():
        if leaf.source is not None:
            base = inputs[leaf.source]
            slot = base if leaf.geometry is None else base.as_strided(*leaf.geometry)
        else:
            size, stride, offset = leaf.geometry
            if offset == 0:
                slot = torch.empty_strided(size, stride, dtype=leaf.dtype, device=leaf.device)
            else:
                storage = torch.empty(extent(size, stride, offset) if all(size) else 0, dtype=leaf.dtype,
                                      device=leaf.device)
                slot = storage.as_strided(size, stride, offset)
    slot = slot.detach()
    return torch.nn.Parameter(slot) if leaf.parameter else slot.requires_grad_()


def slot_examples(leaves: tuple, fakes: list) -> list:
    """Fake example inputs for the slots, for the graph compilers."""
    if not leaves or not fakes:
        return []
    from torch._guards import detect_fake_mode

    with detect_fake_mode(fakes) or torch._subclasses.fake_tensor.FakeTensorMode():
        return [make_slot(leaf, fakes) for leaf in leaves]


_PARAMETER_REFUSED = ("an nn.Parameter made inside the compiled function from a tensor it did not compute is "
                      "not supported")


def _refuse_moved_leaves(leaves: list, sources: list) -> None:
    """Fuzz seed 800158: ``t0 = a[-1]; t0.requires_grad_(); a[0] = t0.sum()``. The in-place write into
    ``t0``'s base, recorded by autograd, regenerates ``t0`` as a view of the written base: eager moves the
    leaf into the graph interior, and a backward that reaches the old leaf raises. The slot, a leaf of its
    own, would take that gradient instead (or none): refused by name."""
    for leaf, where in zip(leaves, sources, strict=True):
        try:
            moved = leaf.grad_fn is not None
        except (RuntimeError, IndexError):   # a view whose grad_fn eager refuses to regenerate: its own error, later
            continue
        if moved:
            raise UnsupportedError("a leaf made inside the compiled function (requires_grad_()) is a view whose base "
                                   "is then written in place with autograd recording it: eager moves the leaf into "
                                   "the graph interior, and a backward reaching it raises", source=where,
                                   hint="make the leaf from a clone (t.clone().requires_grad_()), or pass "
                                        'on_unsupported="eager"')


class LeafBinder(torch.overrides.TorchFunctionMode):
    """Records the leaves the function creates, in order (``leaves``); leaves other calls alone."""

    def __init__(self, inputs: list):
        super().__init__()
        self.inputs = {id(t) for t in inputs if isinstance(t, torch.Tensor)}
        self.leaves: list[torch.Tensor] = []
        self.edges: list[list] = []   # each leaf's gradient edges, held from its creation (see LeafSlots.wrt)
        self.sources: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor._make_subclass and len(args) > 2 and args[2]:
            raise UnsupportedError(_PARAMETER_REFUSED, source=user_source_line(),
                                   hint='create it outside and pass it in (or close over it), or pass '
                                        'on_unsupported="eager"')
        if func is torch.Tensor.requires_grad_:
            tensor, wanted = _requires_grad_args(*args, **kwargs)
            if self._new_leaf(tensor, wanted):
                return self._bind(tensor)
        elif getattr(func, "__self__", None) is _REQUIRES_GRAD and getattr(func, "__name__", "") == "__set__":
            tensor, wanted = args[0], args[1]   # t.requires_grad = True
            if self._new_leaf(tensor, wanted):
                self._bind(tensor)
                return None
        elif kwargs.get("requires_grad"):   # a factory: torch.ones(3, requires_grad=True), x.new_zeros(...)
            made = func(*args, **{k: v for k, v in kwargs.items() if k != "requires_grad"})
            return self._bind(made) if self._new_leaf(made, True) else made
        if self.leaves:
            self._note_edges((*args, *kwargs.values()))
        return func(*args, **kwargs)

    def _note_edges(self, args: tuple) -> None:
        """The gradient edge each leaf among ``args`` feeds now: ``t.data = y`` (traced as a ``set_``) gives a
        leaf a new gradient accumulator, where eager's keeps one (fuzz seed 4202850)."""
        for arg in args:
            for t in arg if isinstance(arg, (list, tuple)) else (arg,):
                if not isinstance(t, torch.Tensor):
                    continue
                for leaf, edges in zip(self.leaves, self.edges, strict=True):
                    if t is leaf and t.requires_grad and torch.is_grad_enabled():   # else no op records it
                        try:
                            edge = torch.autograd.graph.get_gradient_edge(t)
                        except (RuntimeError, AttributeError):   # a call from inside a dispatch handler (no
                            continue   # functional mode, or autograd, on) is no user op: the next one notes it
                        if all(edge.node is not e.node for e in edges):
                            edges.append(edge)

    def _new_leaf(self, tensor, wanted) -> bool:
        return bool(wanted) and isinstance(tensor, torch.Tensor) and not tensor.requires_grad \
            and id(tensor) not in self.inputs and id(tensor) not in getattr(_AS_INPUTS, "ids", ())

    def _bind(self, tensor: torch.Tensor) -> torch.Tensor:
        if inference_in_eager(tensor) and not torch.is_inference_mode_enabled():   # eager's error, at the call (fuzz
            raise RuntimeError(INFERENCE_REQUIRES_GRAD_ERROR)                 # --semantics12 seed 14841966)
        checks = analysis()
        if checks is not None:
            checks.note_new_leaf(tensor)
        with torch._C.DisableTorchFunction():
            tensor.requires_grad_()
        self.leaves.append(tensor)
        self.edges.append([torch.autograd.graph.get_gradient_edge(tensor)])
        self.sources.append(user_source_line())
        return tensor


def _requires_grad_args(tensor, requires_grad: bool = True):
    return tensor, requires_grad


class LeafSlots:
    """The user's flat function with one slot input per new leaf after its own inputs (Note [New
    leaves]). Called with no slots, it finds the leaves (``found``); with them, it binds them."""

    def __init__(self, fn: Callable, num_inputs: int):
        self.fn = fn
        self.num_inputs = num_inputs
        self.found: tuple[NewLeaf, ...] = ()
        self.made: list[torch.Tensor] = []       # the leaves of the latest call
        self.edges: list[list] = []              # their gradient edges
        self.slots: list[torch.Tensor] = []      # the slots of the latest call
        self.originals: list = []                # the inputs' geometries before the latest call
        self._callers: list = []                 # the caller's geometries, where the trace passes copies

    def caller_inputs(self, tensors: list) -> None:
        """The tensors the next call's inputs stand for: a trace passes copies of the inputs that
        require grad (offset 0), while views of an input alias the caller's tensor (its offset)."""
        self._callers = [geometry(from_fun(t)) if isinstance(t, torch.Tensor) else None for t in tensors]

    def __call__(self, *args):
        inputs, slots = list(args[:self.num_inputs]), list(args[self.num_inputs:])
        binder = LeafBinder(inputs)
        originals = self.originals = self._callers or [geometry(from_fun(t)) if isinstance(t, torch.Tensor) else None
                                                       for t in inputs]
        with binder:
            outs = self.fn(*inputs)
        self.made, self.edges, self.slots = binder.leaves, binder.edges, slots
        if not slots:
            _refuse_moved_leaves(binder.leaves, binder.sources)
            self.found = tuple(_describe(leaf, where, outs, inputs, originals)
                               for leaf, where in zip(binder.leaves, binder.sources, strict=True))
            return outs
        if len(binder.leaves) != len(slots):
            raise UnsupportedError("the function created a different number of leaves when traced again")
        with torch.no_grad():
            for slot, leaf, info in zip(slots, binder.leaves, self.found, strict=True):
                if info.written:
                    slot.copy_(leaf)
        by_leaf = {id(leaf): slot for leaf, slot in zip(binder.leaves, slots, strict=True)}
        return [by_leaf.get(id(out), out) for out in outs]

    def geometry_on_input(self, out, slot: int) -> tuple | None:
        """(size, stride, offset) of ``out``, a view of the leaf behind ``slot``, in the storage of the input
        that leaf aliases (the slot shares it at run time); None for a fresh leaf's slot."""
        leaf = self.found[slot - self.num_inputs]
        return None if leaf.source is None else _view_of_input(out, self.originals[leaf.source])

    def wrt(self, tensor) -> list:
        """What the joint differentiates for graph input ``tensor``, whose gradient is the sum: a slot's
        leaf, by every gradient edge it fed (``t.data = y``, traced as a ``set_``, gives the leaf a new
        accumulator for the ops after it, where eager's ``.data =`` keeps one; fuzz seed 4202850), else
        ``tensor`` itself."""
        for slot, leaf, edges in zip(self.slots, self.made, self.edges, strict=True):
            if slot is tensor:
                current = _gradient_edge(leaf)
                extra = [current] if current is not None and all(current.node is not e.node for e in edges) else []
                return [*edges, *extra]
        return [tensor]

    def slot_of_view(self, out) -> int | None:
        """The slot input (graph input index) whose leaf ``out`` is an autograd view of."""
        base = out._base
        for k, leaf in enumerate(self.made):
            if base is leaf and k < len(self.slots):
                return self.num_inputs + k
        return None


def _describe(leaf: torch.Tensor, where: str | None, outs: list, inputs: list, originals: list) -> NewLeaf:
    """The NewLeaf for ``leaf``; refuses what Note [New leaves] cannot express. ``originals``: each
    input's geometry before the function ran."""
    if not leaf.requires_grad:   # the slot would still require grad, and return it
        raise UnsupportedError("requires_grad_(False) on a leaf created inside the compiled function is not "
                               "supported", source=where,
                               hint='create it without requires_grad, or pass on_unsupported="eager"')
    if any(isinstance(t, FunctionalTensor) and torch._functionalize_was_storage_changed(t.elem)
           and shares_version_counter(t, leaf) for t in inputs):   # Note [Inputs given another storage]
        raise UnsupportedError("a leaf created inside the compiled function from an input given another storage "
                               "(set_(), .data =) is not supported: its slot is made before the graph runs, on "
                               "the input's old storage", source=where,
                               hint='make the leaf from a clone, or pass on_unsupported="eager"')
    storage = StorageWeakRef(leaf.untyped_storage())
    source = next((i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)
                   and StorageWeakRef(t.untyped_storage()) == storage), None)
    if any(isinstance(t, FunctionalTensor) and torch._functionalize_was_storage_changed(t.elem)
           and StorageWeakRef(t.untyped_storage()) == storage and not shares_version_counter(t, leaf)
           for t in inputs):
        # fuzz seed 401603: ``b.set_(t0); t0.requires_grad_()``: eager's b then shares the leaf's storage
        raise UnsupportedError("an input given the storage of a leaf created inside the compiled function (set_(), "
                               ".data =) is not supported: the leaf's slot is made before the graph runs, so the "
                               "input would not share it", source=where,
                               hint='set_() the input onto a clone, or pass on_unsupported="eager"')
    returned = False
    for out in outs:
        if source is None and isinstance(out, torch.Tensor) and out is not leaf \
                and StorageWeakRef(out.untyped_storage()) != storage and shares_version_counter(out, leaf):
            # the leaf is a view of an output given other data since (``t2 = t1.view(-1).requires_grad_();
            # t1.data = ...``): eager's two still share a version counter, which a fresh slot does not
            # (fuzz --semantics12 seed 14961841)
            raise UnsupportedError("a leaf created inside the compiled function (requires_grad_(), "
                                   "requires_grad=True) shares its version counter with another output (a view "
                                   "of it, or its base, given other data by .data = or set_()): that sharing is "
                                   "not supported", source=where,
                                   hint='return a clone of one of them, or pass on_unsupported="eager"')
        if not isinstance(out, torch.Tensor) or StorageWeakRef(out.untyped_storage()) != storage:
            continue
        if out is leaf or out._base is leaf:
            returned = True
        elif source is None or leaf._base is not None and out.requires_grad:
            # A fresh slot shares no storage; views of a leaf that is itself a view hang off its base.
            raise UnsupportedError("a leaf created inside the compiled function (requires_grad_(), "
                                   "requires_grad=True) shares its storage with another output: that aliasing "
                                   "is not supported", source=where,
                                   hint='return a clone of one of them, or pass on_unsupported="eager"')
    size, stride, offset = geometry(leaf)
    if source is not None:   # x.detach() and views of x: on the caller's geometry
        size, stride, offset = _view_of_input(leaf, originals[source]) or (size, stride, offset)
    parameter = bool(getattr(leaf, "_is_param", False))   # nn.Parameter(t) of a tensor subclass marks it so
    if source is not None:
        same = originals[source] == (size, stride, offset)
        if not same and not static(size, stride, offset):
            raise _symbolic(where)
        return NewLeaf(None if same else (size, stride, offset), leaf.dtype, leaf.device, source=source,
                       parameter=parameter)
    if not static(size, stride, offset):
        raise _symbolic(where)
    return NewLeaf((size, stride, offset), leaf.dtype, leaf.device, written=returned, parameter=parameter)


def _view_of_input(leaf, original: tuple | None) -> tuple | None:
    """The geometry of ``leaf``, a view of an input, on the caller's tensor: its view ops replayed on
    the input's geometry before the call. A view made after a write to the input has, under
    functionalization, the geometry of the written value (offset 0, contiguous), not the caller's."""
    if original is None or not isinstance(leaf, FunctionalTensor) or not static(*original):
        return None
    try:
        sequence = list(functionalization.get_view_meta_sequence(leaf.elem))
    except (RuntimeError, AttributeError):
        return None
    size, stride, offset = original
    with _disable_current_modes():
        base = torch.empty(extent(size, stride, offset) if all(size) else 0, dtype=leaf.dtype, device="meta")
        try:
            view = functionalization.apply_view_meta_sequence(base.as_strided(size, stride, offset), sequence)
        except RuntimeError:   # a view op the caller's geometry does not admit (a view of an expanded input)
            return None
    return geometry(view) if static(*geometry(view)) else None


def _symbolic(where: str | None) -> UnsupportedError:
    return UnsupportedError("a leaf created inside the compiled function with symbolic sizes is not supported: "
                            "the runtime makes it before the graph runs", source=where,
                            hint='pass dynamic=False, or create the leaf outside, or pass on_unsupported="eager"')


def _gradient_edge(leaf):
    """``leaf``'s gradient edge now (None where it requires no grad). A view made a leaf whose base was written after
    (fuzz --semantics12 seed 12801471: ``t0 = a.unbind(0)[0]; t0.requires_grad_(); a[-1] = t0.sum()``) has a grad_fn
    eager refuses to read: every use of it after the call raises in eager, which the step's leaf, a graph input of
    its own, cannot follow; refused by name (it raised autograd's error at the call)."""
    if not leaf.requires_grad:
        return None
    try:
        return torch.autograd.graph.get_gradient_edge(leaf)
    except RuntimeError as exc:
        if VIEW_OF_MODIFIED_BASE in str(exc):
            raise UnsupportedError("a view made a leaf by requires_grad_() whose base is written after it was made "
                                   "cannot be compiled: eager refuses every later use of it (its grad_fn, is_leaf, "
                                   "a backward through it), which the step's leaf cannot follow",
                                   hint="call requires_grad_() on a clone of the view, or pass "
                                        'on_unsupported="eager"') from exc
        raise
