"""What runs around the user's function while it is traced: functional wrappers, grad mode,
refusals of what would happen at trace time only, and the translation of tracer failures
into UnsupportedError. Eager's checks of in-place ops are in ``inplace.py``.
"""

from __future__ import annotations

import contextlib
import threading

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


_REQUIRES_GRAD = torch._C.TensorBase.__dict__["requires_grad"]   # the descriptor of `t.requires_grad = ...`


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
        elif getattr(func, "__self__", None) is _REQUIRES_GRAD and getattr(func, "__name__", "") == "__set__":
            self._check_requires_grad(*args)   # t.requires_grad = True
        if (kwargs or {}).get("requires_grad") or func is torch.Tensor._make_subclass and len(args) > 2 and args[2]:
            raise UnsupportedError("a tensor created inside the compiled function with requires_grad=True (or an "
                                   "nn.Parameter made there) is not supported: it would be a new leaf at every call",
                                   source=user_source_line(),
                                   hint="create it outside and pass it in (or close over it), or pass "
                                        'on_unsupported="eager"')
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


def geometry(t: torch.Tensor) -> tuple:
    """(size, stride, storage offset) of ``t``."""
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def static(size, stride, offset) -> bool:
    """Every size, stride and the offset are plain ints (no symbols)."""
    return all(isinstance(v, int) for v in (*size, *stride, offset))


def extent(size, stride, offset) -> int:
    """Storage elements a geometry reaches, from the storage's start (for a non-empty geometry)."""
    return offset + sum((n - 1) * st for n, st in zip(size, stride, strict=True)) + 1


def has_internal_overlap(t: torch.Tensor) -> bool:
    """Eager's definite overlap (MemOverlap::Yes): a dimension of stride 0 and size > 1."""
    return any(st == 0 and sz > 1 for sz, st in zip(t.shape, t.stride(), strict=True))


def _dense(t: torch.Tensor) -> bool:
    return torch._prims_common.is_non_overlapping_and_dense_or_false(t)



_PYTHON_KEYS = (torch._C.DispatchKey.Python, torch._C.DispatchKey.PythonTLSSnapshot)


class _RngStateGuard:
    """Stands in for ``torch.random.default_generator`` while tracing (Note [Seeding inside the
    function] in ir/rng.py): reading and setting the state (``torch.get_rng_state``,
    ``torch.set_rng_state``, ``torch.manual_seed``, ``torch.random.fork_rng``) are recorded as
    effect ops that act on the real generator at run time, on every call. ``torch.seed()``
    (a non-deterministic seed) is refused."""

    def __init__(self, real):
        self._real = real
        self._tracing_thread = threading.get_ident()

    def _record(self, op, *args):
        """Call ``op`` so that the tracer records it, also under ``no_dispatch()`` (torch.testing's
        ``freeze_rng_state`` reads and restores the state with the Python dispatch key excluded)."""
        excluded = [k for k in _PYTHON_KEYS if torch._C._dispatch_tls_is_dispatch_key_excluded(k)]
        for key in excluded:
            torch._C._dispatch_tls_set_dispatch_key_excluded(key, False)
        try:
            return op(*args)
        finally:
            for key in excluded:
                torch._C._dispatch_tls_set_dispatch_key_excluded(key, True)

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _ours(self) -> bool:
        return threading.get_ident() == self._tracing_thread   # another thread's eager code runs as is

    def manual_seed(self, seed):
        if not self._ours():
            return self._real.manual_seed(seed)
        if not isinstance(seed, int):
            raise UnsupportedError(f"torch.manual_seed with a {type(seed).__name__} seed inside the compiled "
                                   "function is not supported: only a Python int is recorded",
                                   source=user_source_line(), hint="pass a Python int, or seed outside the function")
        self._record(torch.ops.jointgraph.rng_manual_seed, seed)
        return self

    def get_state(self):
        if not self._ours():
            return self._real.get_state()
        return self._record(torch.ops.jointgraph.rng_get_state)

    def set_state(self, state):
        if not self._ours():
            return self._real.set_state(state)
        self._record(torch.ops.jointgraph.rng_set_state, state)
        return self

    def seed(self):
        if not self._ours():
            return self._real.seed()
        raise UnsupportedError("torch.seed() (a non-deterministic seed) inside the compiled function is not "
                               "supported: the seed it draws is not reproducible",
                               source=user_source_line(),
                               hint='call torch.manual_seed(n) instead, or pass on_unsupported="eager"')


@contextlib.contextmanager
def rng_state_as_effects():
    """Record the global generator's state changes as graph effects while tracing."""
    from ..ir import rng  # noqa: F401  (registers the ops)

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
            hint="compute it outside the compiled function; a size may stay symbolic (torch.zeros(n.item()) "
                 'compiles, int(n.item()) asks for the value); or pass on_unsupported="eager"') from exc
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
