"""What runs around the user's function while it is traced: functional wrappers, grad mode,
refusals of what would happen at trace time only, eager's in-place overlap checks, and the
translation of tracer failures into UnsupportedError.

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
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
)
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

from ..errors import UnsupportedError, source_from_traceback, user_source_line

try:  # the name moved between releases
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode as _DataDependentGuard
except ImportError:  # pragma: no cover
    _DataDependentGuard = RuntimeError

_REAL_TENSOR_REACHED = "Please convert all Tensors to FakeTensors first"   # FakeTensorMode on a real tensor
_FAKE_DATA_ACCESS = "data is not allocated yet"   # c10's message when a kernel reads a fake tensor's data
_DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException, _DataDependentGuard)
_FUNCTIONALIZATION_LIMITS = ("functionalization",)   # RuntimeErrors functionalization raises on what it cannot express

INTERNAL_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single "
                    "memory location. Please clone() the tensor before performing the operation.")
PARTIAL_OVERLAP = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
                   "single memory location. Please clone() the tensor before performing the operation.")


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

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is self._fsdp_copy and func is not None:
            super().__torch_dispatch__(torch.ops.aten.copy_.default, types, tuple(args), kwargs)
            return None
        return super().__torch_dispatch__(func, types, args, kwargs)


def _fsdp_copy():
    """``fsdp.copy_`` once ``torch.distributed.fsdp`` registered it, else None."""
    namespace = getattr(torch.ops, "fsdp", None)
    return getattr(getattr(namespace, "copy_", None), "default", None) if namespace is not None else None


def to_fun(x):
    return FunctionalTensor.to_functional(x) if isinstance(x, torch.Tensor) else x


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
    return torch.enable_grad() if with_backward else torch.no_grad()


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


class RefuseTraceTimeHooks(torch.overrides.TorchFunctionMode):
    """Refuse autograd hooks registered inside the traced function.

    A hook on an intermediate would run once, on fake tensors, while the backward is
    traced, and never again at run time (PyTorch's own aot_function does exactly
    that). Until hooks are carried into the graph, they are refused. So is
    ``requires_grad_()`` on an intermediate that does not require grad: it would make
    it a new leaf at run time, which the graph cannot (an input's is a prologue).
    """

    def __init__(self, inputs: list = ()):
        super().__init__()
        self.inputs = {id(t) for t in inputs}

    _REFUSED = {torch.Tensor.register_hook: "Tensor.register_hook", torch.Tensor.retain_grad: "Tensor.retain_grad",
                torch.Tensor.register_post_accumulate_grad_hook: "Tensor.register_post_accumulate_grad_hook"}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.requires_grad_:
            self._check_requires_grad(*args, **(kwargs or {}))
        name = self._REFUSED.get(func)
        if name is not None:
            raise UnsupportedError(f"{name} on a tensor inside the compiled function is not supported: the hook "
                                   "would run at trace time only", source=user_source_line(),
                                   hint="register the hook outside the compiled function (on its inputs or "
                                        'outputs), or pass on_unsupported="eager"')
        return func(*args, **(kwargs or {}))

    def _check_requires_grad(self, tensor, requires_grad: bool = True) -> None:
        if not requires_grad or tensor.requires_grad or id(tensor) in self.inputs \
                or id(tensor) in getattr(_AS_INPUTS, "ids", ()):
            return
        raise UnsupportedError("requires_grad_() on a tensor computed inside the compiled function (not an input) "
                               "is not supported: it would become a new leaf at run time", source=user_source_line(),
                               hint="call requires_grad_() on an input, or return the tensor and call it outside, "
                                    'or pass on_unsupported="eager"')


# In-place methods that change metadata or autograd state only: no element is written.
_METADATA_ONLY = frozenset({
    "requires_grad_", "retain_grad", "share_memory_", "record_stream", "detach_", "t_", "transpose_", "swapdims_",
    "swapaxes_", "unsqueeze_", "squeeze_", "as_strided_", "resize_", "resize_as_", "set_",
})
# Writes eager allows into a tensor whose elements overlap (it checks neither overlap).
_OVERLAP_UNCHECKED = frozenset({
    "fill_", "zero_", "masked_fill_", "index_put_", "index_fill_", "put_", "masked_scatter_", "fill_diagonal_",
    "index_add_", "index_copy_", "scatter_add_", "scatter_reduce_", "bernoulli_", "random_", "exponential_",
    "geometric_", "cauchy_", "log_normal_",
})
_EXPANDS = frozenset({torch.Tensor.expand, torch.Tensor.expand_as, torch.Tensor.broadcast_to, torch.broadcast_to})
_FILLS = frozenset({"fill_", "zero_"})
_DUNDER_WRITES = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__",
                            "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__",
                            "__imatmul__"})
_DATA = torch._C.TensorBase.__dict__["data"]   # the descriptor whose __get__ is `x.data`


def _is_in_place(name: str) -> bool:
    """A method that writes its tensor's elements (``add_``, ``copy_``), not only its metadata."""
    return name.endswith("_") and not name.startswith("_") and name not in _METADATA_ONLY


def has_internal_overlap(t: torch.Tensor) -> bool:
    """Eager's definite overlap (MemOverlap::Yes): a dimension of stride 0 and size > 1."""
    return any(st == 0 and sz > 1 for sz, st in zip(t.shape, t.stride(), strict=True))


def _dense(t: torch.Tensor) -> bool:
    return torch._prims_common.is_non_overlapping_and_dense_or_false(t)


def _partial_overlap(out: torch.Tensor, other: torch.Tensor) -> bool:
    """Eager's MemOverlapStatus::Partial between a written tensor and a read one.

    Geometry is read from the tensors functionalization holds (views of one current value),
    not from the functional wrappers, whose offsets go stale after a write to the base."""
    if other is out or out.numel() == 0 or other.numel() == 0:
        return False
    out, other = from_fun(out), from_fun(other)
    if not (_dense(out) and _dense(other)):
        return False
    if _storage_id(out) != _storage_id(other):
        return False
    a0, a1 = out.storage_offset() * out.element_size(), (out.storage_offset() + out.numel()) * out.element_size()
    b0 = other.storage_offset() * other.element_size()
    b1 = (other.storage_offset() + other.numel()) * other.element_size()
    return a0 < b1 and b0 < a1 and (a0, a1) != (b0, b1)


class _ByTensor:
    """Values keyed by live tensors (by identity: tensors compare elementwise, and ids are reused)."""

    def __init__(self):
        self._items: dict[int, tuple] = {}

    def __setitem__(self, t: torch.Tensor, value) -> None:
        self._items[id(t)] = (weakref.ref(t), value)

    def get(self, t: torch.Tensor, default=None):
        ref, value = self._items.get(id(t), (None, default))
        return value if ref is not None and ref() is t else default


def _storage_id(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


class EagerInPlaceChecks(torch.overrides.TorchFunctionMode):
    """Note [Eager's in-place checks].

    ``analyze``: the metadata pass also raises eager's errors and records what the caller's
    tensors need (writes through ``.data``, storages swapped by ``t.data = y``); the joint trace,
    which follows the same program, only needs the rewrite of writes into ``expand``s.
    """

    def __init__(self, analyze: bool = True):
        super().__init__()
        self.analyze = analyze
        self._expanded = _ByTensor()       # expand result -> its source
        self._data_aliases = _ByTensor()   # x.data and views of it (``.data`` counts its own versions) -> True
        self._storages = _ByTensor()       # any result -> its storage when made
        # Storages written through a .data alias / through any other tensor (eager bumps those versions).
        self.written_via_data: set = set()
        self.written_directly: set = set()

    def track(self, tensors: list) -> None:
        """Watch ``tensors`` (the inputs) as results are watched: a storage swapped under them is refused."""
        for t in tensors:
            self._storages[t] = _storage_id(t)

    def check_storage_kept(self, t: torch.Tensor) -> None:
        """Refuse a tensor whose storage was swapped behind functionalization's back (``t.data = y``
        on an intermediate): the wrapper would keep reading the old value."""
        storage = self._storages.get(t)
        if storage is not None and _storage_id(t) != storage:
            raise UnsupportedError("assigning to .data of a tensor inside the compiled function is not supported: "
                                   "the traced program would keep reading its old value", source=user_source_line(),
                                   hint="use `with torch.no_grad(): t.copy_(y)` for a same-shaped value, or a new "
                                        'variable, or pass on_unsupported="eager"')

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = args[0] if args and isinstance(args[0], torch.Tensor) else None
        in_place = target is not None and _is_in_place(name)
        if in_place:
            source = self._expanded.get(target)
            if source is not None and (name in _FILLS or (not has_internal_overlap(target)
                                                          and source.dim() == target.dim())):
                self._record_write(source)
                func(source, *args[1:], **kwargs)   # the expanded tensor's memory is exactly its source's
                return target
            if self.analyze:
                self._check_write(name, target, args[1:], kwargs)
        if self.analyze:
            if in_place or target is not None and name in _DUNDER_WRITES:   # also x[i] = v, x += v
                self._record_write(target)
            for arg in args:
                if isinstance(arg, torch.Tensor):
                    self.check_storage_kept(arg)
        result = func(*args, **kwargs)
        if isinstance(result, torch.Tensor):
            self._track(func, name, target, result)
        return result

    def _check_write(self, name: str, target: torch.Tensor, rest: tuple, kwargs: dict) -> None:
        if name not in _OVERLAP_UNCHECKED:
            self._check(target, rest, kwargs)
        elif has_internal_overlap(target):
            raise UnsupportedError(f"{name} into a tensor whose elements overlap in memory cannot be compiled "
                                   "(eager's result depends on the order its kernel writes them)",
                                   source=user_source_line(), hint='write into a clone, or pass on_unsupported="eager"')

    def _track(self, func, name: str, target, result: torch.Tensor) -> None:
        if func in _EXPANDS and target is not None:
            self._expanded[result] = target
        if not self.analyze:
            return
        self._storages[result] = _storage_id(result)
        if target is not None and (name == "__get__" and getattr(func, "__self__", None) is _DATA
                                   or self._data_aliases.get(target) and result is not target
                                   and _storage_id(result) == _storage_id(target)):
            self._data_aliases[result] = True   # x.data, or a view of it

    def _record_write(self, target: torch.Tensor) -> None:
        if self.analyze:
            written = self.written_via_data if self._data_aliases.get(target) else self.written_directly
            written.add(_storage_id(target))

    def only_via_data(self, t: torch.Tensor) -> bool:
        """``t``'s storage was written in place only through ``.data`` aliases: eager leaves its version
        unchanged (``.data`` counts its own versions)."""
        storage = _storage_id(t)
        return storage in self.written_via_data and storage not in self.written_directly

    @staticmethod
    def _check(target: torch.Tensor, rest: tuple, kwargs: dict) -> None:
        if has_internal_overlap(target):
            raise RuntimeError(INTERNAL_OVERLAP)
        for other in (*rest, *kwargs.values()):
            if isinstance(other, torch.Tensor) and _partial_overlap(target, other):
                raise RuntimeError(PARTIAL_OVERLAP)


class _RngStateGuard:
    """Stands in for ``torch.random.default_generator`` while tracing: reading the state is
    allowed, setting it (``torch.manual_seed``, ``torch.set_rng_state``) is refused, since it
    would run once at trace time and the compiled graph would draw from the caller's state."""

    def __init__(self, real):
        self._real = real
        self._tracing_thread = threading.get_ident()

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _refuse(self, name, *args, **kwargs):
        if threading.get_ident() != self._tracing_thread:   # another thread's eager code: not ours to refuse
            return getattr(self._real, name)(*args, **kwargs)
        raise UnsupportedError("setting the random number generator state (torch.manual_seed, torch.set_rng_state) "
                               "inside the compiled function is not supported: it would happen at trace time only",
                               source=user_source_line(),
                               hint='seed outside the compiled function, or pass on_unsupported="eager"')

    manual_seed = functools.partialmethod(_refuse, "manual_seed")
    set_state = functools.partialmethod(_refuse, "set_state")
    seed = functools.partialmethod(_refuse, "seed")


@contextlib.contextmanager
def refuse_rng_state_changes():
    real = torch.random.default_generator
    torch.random.default_generator = _RngStateGuard(real)
    try:
        yield
    finally:
        torch.random.default_generator = real


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
            hint='compute it outside the compiled function, or pass on_unsupported="eager"') from exc
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
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.") from exc
    except RuntimeError as exc:
        message = str(exc)
        if "cannot mutate tensors with frozen storage" in message:
            raise UnsupportedError(
                "an in-place write to a tensor whose storage another tensor took with set_() cannot be compiled "
                "(functionalization freezes that storage)", source=source_from_traceback(exc),
                hint='use the tensor set_() was given, or a clone, or pass on_unsupported="eager"') from exc
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
