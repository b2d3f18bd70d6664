"""Tensor subclasses that implement ``__tensor_flatten__`` / ``__tensor_unflatten__``.

Note [Tensor subclasses]
------------------------
``TwoTensor`` (PyTorch's test subclass) and ``DTensor`` are *wrapper* subclasses: an outer
tensor with no storage of its own, holding plain inner tensors (``a``/``b``; ``_local_tensor``)
and metadata (DTensor's placements, mesh and global shape), whose ``__torch_dispatch__``
turns each ATen op on the outer tensor into ATen ops on the inner ones. The joint graph stays
plain ATen over the inner tensors; the subclass lives around it, in three layers:

* **Flattening** (``flatten``). An argument (or a parameter, through ``aot_module``, or a Dynamo
  graph input) that is such a subclass is replaced by its inner tensors, recursively (a
  subclass inside a subclass), and described by a ``SubclassMeta``: the class, the context
  ``__tensor_flatten__`` returned, the outer size and stride, and non-tensor inner attributes
  (DTensor's device mesh) held as they are. The compiled function over the plain leaves is an
  ordinary ``CompiledFunction``, one per *structure* (``SubclassFunction``): the metas of the
  call's subclass leaves are its guard, so a DTensor with other placements compiles again, as
  does one with another global shape (subclass entries are compiled with static sizes).
* **Inside the trace** (``plain_function``). The traced function takes the plain inner tensors,
  rebuilds each subclass with ``_Wrap`` and calls the user's function on them, so the
  subclass's ``__torch_dispatch__`` runs on fake, functional inner tensors and emits their ATen
  ops into the graph; every subclass the function returns is taken apart with ``_Unwrap``, and
  the output metas leave the trace as a constant output (``OutputLayout``), so each compiled
  entry carries the metas it traced. ``_Wrap`` / ``_Unwrap`` are autograd Functions, so autograd
  runs on the *outer* tensors, as in eager: the traced backward is the subclass's own backward
  (its ``__torch_dispatch__`` again, on the gradients), and a gradient that reaches a subclass
  input is taken apart into the gradients of its inner tensors. The inner tensors are wrapped
  detached: in eager they do not require grad, and reading ``x.a`` gives no gradient to ``x``.
* **At run time** (``SubclassEntry``). Each call takes the subclass arguments apart (with
  ``_Unwrap``, which links the plain inputs to the caller's tensor for autograd) and rebuilds
  each subclass output from the plain outputs and the entry's ``OutputLayout`` (with ``_Wrap``,
  whose backward takes the incoming gradient apart). The gradient of a subclass input is a
  subclass again, built by ``__tensor_unflatten__`` with the metadata the traced backward gave
  it (``GradientMetas``: a Replicate DTensor's gradient is Partial in eager, and here), and
  accumulates in ``x.grad`` as in eager. The traced backward assumed each output's gradient
  has the output's metadata (after ``__coerce_tangent_metadata__``: Partial becomes Replicate);
  a gradient with other metadata (strides aside) is passed to
  ``__coerce_same_metadata_as_tangent__`` when the class has it; one that still differs (or is
  not a subclass) raises ``UnsupportedError``.
* **Which calls.** A call with a subclass argument, or a function over plain tensors whose trace
  returns a subclass (``SubclassOutputs``, raised by ``make_flat_fn``: compiled again this way);
  ``torch.compile`` hands its backend the subclass tensors themselves, and such a graph is
  compiled the same way (dynamo.py); ``jointgraph.plan`` plans the flattened function.

Refused, by name (``UnsupportedError``): changing a subclass input's metadata in place
(``x.t_()``, ``x.resize_()``) and changing the data of a subclass input that requires grad
(``x.add_(1)`` on a non-leaf); a plain input whose gradient is a subclass (``w`` in
``two_tensor * w``: eager gives ``w.grad`` a TwoTensor; our compiled backward returns one plain
gradient per plain input). The data of a subclass input that
does not require grad may be written in place (the input-mutation epilogue writes its inner
tensors). A subclass captured from the function's closure is refused (Note [Captured tensors]):
pass it as an argument. Other differences from eager: a subclass input returned as is comes
back as a new subclass over the same inner tensors, not the same Python object, and an input
written in place bumps its inner tensors' versions, not the outer tensor's.

PyTorch's AOTAutograd does the same desugaring (``_aot_autograd/subclass_utils.py``) with the
autograd Function at the subclass level; ours keeps the plain pipeline untouched and puts the
two boundaries in autograd Functions of their own.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ..errors import UnsupportedError, user_source_line


def is_subclass(value: Any) -> bool:
    """A tensor subclass jointgraph flattens (it implements ``__tensor_flatten__``)."""
    return isinstance(value, torch.Tensor) and is_traceable_wrapper_subclass(value)


def any_subclass(leaves: list) -> bool:
    return any(is_subclass(leaf) for leaf in leaves)


class SubclassOutputs(Exception):  # noqa: N818 - a control-flow signal, not an error
    """A function over plain tensors returned a subclass: compile it with the subclass layer."""


@dataclasses.dataclass(frozen=True)
class SubclassMeta:
    """How to rebuild one subclass tensor from its plain inner tensors (Note [Tensor subclasses]).

    ``inner[k]`` describes attribute ``attrs[k]``: None for a plain tensor, a SubclassMeta for a
    nested subclass, or ``("constant", value)`` for a non-tensor attribute (DTensor's mesh).
    """

    cls: type
    ctx: Any
    attrs: tuple[str, ...]
    inner: tuple[Any, ...]
    outer_size: tuple[int, ...]
    outer_stride: tuple[int, ...]

    @property
    def num_plain(self) -> int:
        return sum(1 if m is None else m.num_plain if isinstance(m, SubclassMeta) else 0 for m in self.inner)

    def key(self) -> tuple:
        """A hashable guard key (a context that cannot be hashed is keyed by its repr)."""
        try:
            hash(self.ctx)
            ctx = self.ctx
        except TypeError:
            ctx = repr(self.ctx)
        inner = tuple(m.key() if isinstance(m, SubclassMeta) else None if m is None else ("constant", id(m[1]))
                      for m in self.inner)
        return self.cls, ctx, self.attrs, inner, self.outer_size, self.outer_stride

    def layout_free(self) -> tuple:
        """The key without strides (outer, or of a tensor meta in the context): what a gradient
        must share with its output."""
        inner = tuple(m.layout_free() if isinstance(m, SubclassMeta) else m is None for m in self.inner)
        return self.cls, _without_strides(self.ctx), self.attrs, inner, self.outer_size


def _without_strides(ctx: Any) -> Any:
    if isinstance(ctx, (tuple, list)) and not hasattr(ctx, "stride"):
        return tuple(_without_strides(c) for c in ctx)
    if all(hasattr(ctx, a) for a in ("shape", "stride", "dtype")) and not isinstance(ctx, torch.Tensor):
        return ("tensor_meta", tuple(ctx.shape), ctx.dtype)   # e.g. DTensor's TensorMeta
    try:
        hash(ctx)
        return ctx
    except TypeError:
        return repr(ctx)


def flatten(t: torch.Tensor) -> tuple[list[torch.Tensor], SubclassMeta]:
    """The plain inner tensors of subclass ``t`` (depth first) and its meta."""
    attrs, ctx = t.__tensor_flatten__()
    plain: list[torch.Tensor] = []
    inner: list[Any] = []
    for name in attrs:
        value = getattr(t, name)
        if is_subclass(value):
            sub, meta = flatten(value)
            plain += sub
            inner.append(meta)
        elif isinstance(value, torch.Tensor):
            plain.append(value)
            inner.append(None)
        else:
            inner.append(("constant", value))
    size, stride = _static(t.shape, "size"), _static(t.stride(), "stride")
    return plain, SubclassMeta(type(t), ctx, tuple(attrs), tuple(inner), size, stride)


def _static(values, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in values)
    except (TypeError, RuntimeError, ValueError) as exc:   # a data-dependent or symbolic outer size
        raise UnsupportedError(f"a tensor subclass with a symbolic outer {what} ({tuple(values)}): jointgraph "
                               "compiles subclasses with static sizes (Note [Tensor subclasses])",
                               source=user_source_line(),
                               hint='return its inner tensors, or pass on_unsupported="eager"') from exc


def unflatten(meta: SubclassMeta, plain: list, start: int = 0) -> tuple[torch.Tensor, int]:
    """Rebuild the subclass ``meta`` describes from ``plain[start:]``; return it and the next index."""
    inner: dict[str, Any] = {}
    for name, m in zip(meta.attrs, meta.inner, strict=True):
        if m is None:
            inner[name] = plain[start]
            start += 1
        elif isinstance(m, SubclassMeta):
            inner[name], start = unflatten(m, plain, start)
        else:
            inner[name] = m[1]
    out = meta.cls.__tensor_unflatten__(inner, meta.ctx, meta.outer_size, meta.outer_stride)
    return out, start


# ### The two boundaries, as autograd Functions


class _Wrap(torch.autograd.Function):
    """Plain inner tensors -> the subclass ``meta`` describes; the backward takes the gradient
    apart with ``inner_of(grad)``."""

    @staticmethod
    def forward(ctx, meta: SubclassMeta, inner_of: Callable, *plain):
        ctx.inner_of = inner_of
        ctx.set_materialize_grads(False)
        out, _ = unflatten(meta, [p.detach() for p in plain])
        return out.detach() if out.requires_grad else out   # a context may carry requires_grad (DTensor)

    @staticmethod
    def backward(ctx, grad):
        if grad is None:
            return None, None, *[None] * len(ctx.needs_input_grad[2:])
        return None, None, *ctx.inner_of(grad)


class _Unwrap(torch.autograd.Function):
    """A subclass -> its plain inner tensors ``plain`` (``flatten(t)``'s, taken by the caller); the
    backward rebuilds the subclass gradient with the meta ``grad_meta()`` gives."""

    @staticmethod
    def forward(ctx, meta: SubclassMeta, grad_meta: Callable, t, plain: list):
        ctx.grad_meta = grad_meta
        ctx.set_materialize_grads(False)
        ctx.specs = [(p.shape, p.dtype, p.device) for p in plain]
        return tuple(p.detach() for p in plain)

    @staticmethod
    def backward(ctx, *grads):
        if all(g is None for g in grads):
            return None, None, None, None
        grads = [torch.zeros(size, dtype=dtype, device=device) if g is None else g
                 for g, (size, dtype, device) in zip(grads, ctx.specs, strict=True)]
        grad, _ = unflatten(ctx.grad_meta(), list(grads))
        return None, None, grad.detach() if grad.requires_grad else grad, None


class GradientMetas:
    """The metadata of the gradient of each subclass input, found while tracing (one table per
    structure): the run time rebuilds the gradient with it, as eager's gradient may differ from
    its input (a Replicate DTensor's gradient is Partial)."""

    def __init__(self):
        self.metas: dict[int, SubclassMeta] = {}

    def record(self, position: int, grad: torch.Tensor) -> list[torch.Tensor]:
        plain, meta = flatten(grad)
        old = self.metas.setdefault(position, meta)
        if old.layout_free() != meta.layout_free():
            raise UnsupportedError(
                f"the gradient of a {meta.cls.__name__} input has other metadata in another compiled entry "
                f"({old.ctx!r} and {meta.ctx!r}) (Note [Tensor subclasses])",
                hint='pass on_unsupported="eager"')
        return plain

    def get(self, position: int, default: SubclassMeta) -> SubclassMeta:
        return self.metas.get(position, default)


def gradient_inner(grad: Any, meta: SubclassMeta) -> list[torch.Tensor]:
    """The plain inner tensors of the gradient of a subclass output described by ``meta``
    (Note [Tensor subclasses]). The gradient's strides may differ (an expanded ``ones``)."""
    if is_subclass(grad):
        plain, got = flatten(grad.detach() if grad.requires_grad else grad)   # a context may hold requires_grad
        if got.layout_free() == meta.layout_free():
            return plain
        coerce = getattr(grad, "__coerce_same_metadata_as_tangent__", None)
        if coerce is not None and got.cls is meta.cls:
            coerced = coerce(meta.ctx)
            if coerced is not None:
                plain, got = flatten(coerced)
                if got.layout_free() == meta.layout_free():
                    return plain
    raise UnsupportedError(
        f"the gradient of a {meta.cls.__name__} output is a {type(grad).__name__} whose metadata differs from the "
        "output's, and cannot be coerced to it: the compiled backward was traced for the output's metadata "
        "(Note [Tensor subclasses])",
        hint='pass a gradient like the output (same subclass and metadata), or on_unsupported="eager"')


# ### The function the pipeline traces


@dataclasses.dataclass(frozen=True)
class OutputLayout:
    """The user's output structure: its pytree spec and, per leaf, None or (the subclass's meta,
    the meta its gradient is traced with).
    Leaves the trace as a constant output, so each compiled entry returns the one it traced."""

    spec: Any
    metas: tuple[tuple[SubclassMeta, SubclassMeta] | None, ...]   # (output's, its gradient's) per leaf


def plain_function(fn: Callable, spec, in_metas: tuple, gradients: GradientMetas) -> Callable:
    """``fn`` over plain leaves: rebuild the subclass arguments, call ``fn``, take its subclass
    outputs apart; returns ``(plain outputs, OutputLayout)``."""
    from .inputs import unflattener

    unflatten_args = unflattener(spec)

    def plain_fn(*plain):
        leaves, k = [], 0
        wrapped = []
        for meta in in_metas:
            if meta is None:
                leaves.append(plain[k])
                k += 1
                continue
            n = meta.num_plain
            leaf = _Wrap.apply(meta, functools.partial(gradients.record, len(leaves)), *plain[k:k + n])
            wrapped.append((leaf, meta, any(getattr(p, "requires_grad", False) for p in plain[k:k + n]),
                            leaf._version))
            leaves.append(leaf)
            k += n
        args, kwargs = unflatten_args(leaves)
        result = fn(*args, **kwargs)
        _check_inputs_unchanged(wrapped)
        out_leaves, out_spec = pytree.tree_flatten(result)
        flat, metas = [], []
        for leaf in out_leaves:
            if is_subclass(leaf):
                inner, meta = flatten(leaf)
                tangent = _tangent_meta(leaf)
                flat.extend(_Unwrap.apply(meta, lambda tangent=tangent: tangent, leaf, inner))
                metas.append((meta, tangent))
            else:
                flat.append(leaf)
                metas.append(None)
        return flat, OutputLayout(out_spec, tuple(metas))

    plain_fn.__name__ = plain_fn.__qualname__ = getattr(fn, "__name__", type(fn).__name__)
    plain_fn.__wrapped__ = fn
    return plain_fn


def _tangent_meta(out: torch.Tensor) -> SubclassMeta:
    """The metadata the traced backward assumes for the gradient of subclass output ``out``: a
    class may coerce it (``__coerce_tangent_metadata__``: a Partial DTensor's gradient is Replicate)."""
    with torch.no_grad():   # a context may hold requires_grad (DTensor): a gradient's does not
        out = out.detach()
        coerce = getattr(out, "__coerce_tangent_metadata__", None)
        return flatten(coerce() if coerce is not None else out)[1]


def _check_inputs_unchanged(wrapped: list) -> None:
    """Refuse what the flattening cannot give back (Note [Tensor subclasses])."""
    for leaf, meta, requires_grad, version in wrapped:
        if tuple(leaf.shape) != meta.outer_size or tuple(leaf.stride()) != meta.outer_stride:
            raise UnsupportedError(
                f"the function changes the metadata of a {meta.cls.__name__} argument in place (size "
                f"{meta.outer_size} -> {tuple(leaf.shape)}): jointgraph passes subclasses flattened into their "
                "inner tensors, and cannot change the caller's subclass (Note [Tensor subclasses])",
                source=user_source_line(), hint='use the out-of-place op, or pass on_unsupported="eager"')
        if requires_grad and leaf._version != version:
            raise UnsupportedError(
                f"the function writes in place to a {meta.cls.__name__} argument that requires grad: jointgraph "
                "cannot record it on the caller's subclass (Note [Tensor subclasses])",
                source=user_source_line(), hint='use the out-of-place op, or pass on_unsupported="eager"')


def refuse_subclass_gradients(grads, names: list[str]) -> None:
    """A plain graph input whose gradient is a subclass (``w`` in ``two_tensor * w``: eager gives
    ``w.grad`` a TwoTensor) is refused: the compiled backward returns plain gradients."""
    for grad, name in zip(grads, names, strict=True):
        if is_subclass(grad):
            raise UnsupportedError(
                f"the gradient of the plain tensor input {name!r} is a {type(grad).__name__} (it meets a "
                f"{type(grad).__name__} in the function; eager gives it a {type(grad).__name__} .grad): jointgraph "
                "returns plain gradients for plain inputs (Note [Tensor subclasses])", source=user_source_line(),
                hint=f"pass it as a {type(grad).__name__} too, or pass on_unsupported=\"eager\"")


# ### Run time


@dataclasses.dataclass
class _Structure:
    """One structure's compiled function and what its calls pass it, computed on its first call;
    ``layout`` / ``unflatten``: the output layout of the entry that ran last, and its unflatten."""

    compiled: Any
    gradients: GradientMetas
    metas: tuple[SubclassMeta | None, ...]
    plain_spec: Any
    roles: list | None
    layout: OutputLayout | None = None
    unflatten: Callable | None = None


class SubclassEntry:
    """The compiled entry of calls with subclass leaves: one plain ``CompiledFunction`` per
    structure (the metas of the subclass leaves; Note [Tensor subclasses])."""

    def __init__(self, fn: Callable, spec, leaf_roles, make_compiled: Callable):
        self.fn = fn
        self.spec = spec
        self.leaf_roles = leaf_roles
        self._make_compiled = make_compiled
        self._functions: dict[tuple, _Structure] = {}

    @property
    def plan(self):
        plans = self.plans
        return plans[-1] if plans else None

    @property
    def plans(self) -> list:
        return [p for structure in self._functions.values() for p in structure.compiled.plans]

    def __call__(self, leaves: list) -> Any:
        from .inputs import unflattener

        spec = self.spec
        leaves = leaves[:spec.num_leaves]   # captured tensors are the plain function's (Note [Captured tensors])
        flat = [flatten(leaf) if is_subclass(leaf) else None for leaf in leaves]
        key = (spec, tuple(f[1].key() if f is not None else None for f in flat))
        found = self._functions.get(key)
        if found is None:
            metas = tuple(f[1] if f is not None else None for f in flat)
            gradients = GradientMetas()
            compiled = self._make_compiled(plain_function(self.fn, spec, metas, gradients))
            found = self._functions[key] = _Structure(compiled, gradients, metas, _plain_spec(metas),
                                                      _plain_roles(metas, self.leaf_roles))
        gradients, metas = found.gradients, found.metas
        grad = torch.is_grad_enabled()

        def inner_of(i: int, leaf: torch.Tensor, inner: list) -> Any:
            if grad and leaf.requires_grad:   # linked to the caller's tensor for autograd
                return _Unwrap.apply(metas[i], functools.partial(gradients.get, i, metas[i]), leaf, inner)
            return inner

        outputs, layout = found.compiled.call_flat(_plain_leaves(leaves, flat, inner_of), found.plain_spec,
                                                   found.roles)
        if layout is not found.layout:
            found.layout, found.unflatten = layout, unflattener(layout.spec)
        return _rebuild_outputs(outputs, layout, found.unflatten)


def _plain_leaves(leaves: list, flat: list, inner_of: Callable) -> list:
    """The call's leaves with each subclass leaf ``i`` (``flat[i]``: its ``flatten``) replaced by
    ``inner_of(i, leaf, its inner tensors)``."""
    plain: list = []
    for i, (leaf, f) in enumerate(zip(leaves, flat, strict=True)):
        if f is None:
            plain.append(leaf)
        else:
            plain.extend(inner_of(i, leaf, f[0]))
    return plain


def _plain_spec(metas: tuple) -> Any:
    """The spec of the plain function's call ``(plain leaves, {})``: as many leaves as the metas give."""
    count = sum(1 if meta is None else meta.num_plain for meta in metas)
    return pytree.tree_flatten(((0,) * count, {}))[1]


def _plain_roles(metas: tuple, leaf_roles) -> list | None:
    """Each plain leaf's role: its leaf's, once per inner tensor of a subclass leaf."""
    if leaf_roles is None:
        return None
    return [role for meta, role in zip(metas, leaf_roles, strict=True)
            for _ in range(1 if meta is None else meta.num_plain)]


def flatten_call(fn: Callable, leaves: list, spec, leaf_roles) -> tuple[Callable, list, Any, list | None]:
    """``fn`` and its call's leaves, flattened (for ``jointgraph.plan``, which runs nothing): the plain
    function, its leaves (inner tensors detached, requiring grad as their subclass), spec and roles."""
    flat = [flatten(leaf) if is_subclass(leaf) else None for leaf in leaves]
    metas = tuple(f[1] if f is not None else None for f in flat)
    plain = _plain_leaves(leaves, flat, lambda i, leaf, inner: [
        p.detach().requires_grad_(leaf.requires_grad and p.is_floating_point()) for p in inner])
    plain_fn = plain_function(fn, spec, metas, GradientMetas())
    return plain_fn, plain, _plain_spec(metas), _plain_roles(metas, leaf_roles)


def _rebuild_outputs(outputs: list, layout: OutputLayout, unflatten: Callable) -> Any:
    leaves, k = [], 0
    for metas in layout.metas:
        if metas is None:
            leaves.append(outputs[k])
            k += 1
            continue
        meta, tangent = metas
        n = meta.num_plain
        leaves.append(_Wrap.apply(meta, functools.partial(gradient_inner, meta=tangent), *outputs[k:k + n]))
        k += n
    return unflatten(leaves)
