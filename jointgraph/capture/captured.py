"""Tensors a function reads from its closure, its globals or a module it reaches: lifted to graph inputs.

Note [Captured tensors]
-----------------------
``jointgraph.aot_function(lambda x: model(x).sum())`` reads ``model.weight``, a real tensor,
while its arguments are fake: the trace would crash in the fake-tensor machinery, or bake the
weight in as a constant so that no gradient reaches it. Instead every real tensor the
function touches is lifted into a graph input of role ``CAPTURED``:

* **Discovery.** The function is traced under ``CaptureMode`` (a TorchFunctionMode, active
  while the user's function runs, not during the backward it derives). Every real (not fake,
  not functional) tensor in the arguments of a torch function is swapped for its graph input.
  A real tensor the entry does not know yet is recorded and swapped for an uninitialized
  stand-in of the same geometry so that the run can go on; when the function returns, the
  trace is abandoned with ``Recapture`` and compiled again with the new tensors as extra
  graph inputs (at most ``MAX_RECAPTURES`` rounds). A function that reads no real tensor
  pays nothing but the mode.
* **Where each tensor is read from.** ``capture_sources`` looks for each captured tensor,
  by identity, in the closure cells and globals of the function and of the Python functions
  it reaches (as capture/guards.py does), in the parameters and buffers of the modules found
  there (and of a bound method's ``self``): its *source* is that cell, global, or the
  module attribute path (``model.layers.0.weight``), re-read on every call. A tensor found
  nowhere (reached through a container, an object attribute, a method's defaults) is held by
  reference: the compiled function keeps reading that tensor object, with its in-place updates,
  even if the program would now reach a different one.
* **Guards.** The tensors read from the sources are appended to the call's flat leaves, so the
  guard of Note [Guards] (capture/inputs.py) covers them as it covers arguments: shape,
  strides, dtype, device, ``requires_grad``, and which of them are the same object (a
  captured tensor passed as an argument too is one graph input). A different tensor object
  bound to the same name with the same metadata is simply passed in its place; with other
  metadata the function compiles again. The ``training`` flags of the modules found are part
  of the guard too (``model.eval()`` recompiles). Captured tensors keep static sizes under
  ``dynamic=True``.
* **Semantics.** A captured tensor is a graph input like an argument: gradients reach
  captured parameters (``model.weight.grad`` accumulates as in eager), and in-place updates
  (BatchNorm running statistics) land on the captured tensor through the input-mutation
  epilogue (Note [Input mutations]).
* **Refused.** A captured tensor subclass or non-strided tensor raises ``UnsupportedError``
  naming it; a real tensor reached where the mode does not see it (a custom autograd
  Function's backward, an operator called below ``__torch_function__``) raises
  ``UnsupportedError`` from the tracer's error translation (capture/context.py).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor, is_fake
from torch._subclasses.functional_tensor import FunctionalTensor

from ..errors import UnsupportedError, user_source_line

MAX_RECAPTURES = 4
_MAX_DEPTH = 4
_TRACED = (FakeTensor, FunctionalTensor)


class Recapture(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The traced function read real tensors the entry did not lift: compile again with them."""

    def __init__(self, tensors: list[torch.Tensor]):
        super().__init__(f"{len(tensors)} captured tensor(s) to lift")
        self.tensors = tensors


def _is_real(t: Any) -> bool:
    """A tensor with real data: not fake, not a functional tensor (the Python subclass, or the C++
    wrapper autograd and custom Functions may hand back as a plain ``Tensor``)."""
    return isinstance(t, torch.Tensor) and not isinstance(t, _TRACED) and not torch._is_functional_tensor(t) \
        and not is_fake(t)


class _RealSwap(torch.overrides.TorchFunctionMode):
    """Swap every real tensor a torch function receives (``_swap``)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(map(_holds_real, args)) or any(map(_holds_real, kwargs.values())):
            args = tuple(self._swap_any(a) for a in args)
            kwargs = {k: self._swap_any(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)

    def _swap_any(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)) and any(map(_is_real, value)):
            return type(value)(self._swap(v) for v in value)
        return self._swap(value)

    def _swap(self, t: Any) -> Any:
        raise NotImplementedError


class RealInputs(_RealSwap):
    """While the backward is traced: each real tensor the call was given (a parameter, a captured tensor)
    swapped for the traced input standing for it. A ``torch.utils.checkpoint`` region recomputed there
    reads them again, after ``functional_call`` (``aot_module``) and ``CaptureMode`` have let them go."""

    def __init__(self, inputs: dict[int, torch.Tensor]):
        super().__init__()
        self.inputs = inputs   # id(real tensor) -> the traced input

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.autograd.grad and _traced_backward_call(*args, **(kwargs or {})):
            return self._gradients(*args, **(kwargs or {}))
        return super().__torch_function__(func, types, args, kwargs)

    def _gradients(self, outputs, inputs, grad_outputs, retain_graph=None, allow_unused=False, **_):
        # A mode is off while it handles a call, and autograd.grad is one: the backward, where a recomputed region
        # reads the real tensors, would run without it. So the trace's call runs the engine itself, as grad does.
        from torch.autograd.graph import _engine_run_backward

        with self:
            return _engine_run_backward(tuple(outputs), tuple(grad_outputs), bool(retain_graph), False,
                                        tuple(inputs), allow_unused, accumulate_grad=False)

    def _swap(self, t: Any) -> Any:
        return self.inputs.get(id(t), t) if _is_real(t) else t


def _traced_backward_call(outputs=None, inputs=None, grad_outputs=None, retain_graph=None, allow_unused=False,
                          create_graph=False, only_inputs=True, is_grads_batched=False,
                          materialize_grads=False) -> bool:
    """``autograd.grad`` called as the trace calls it: sequences of outputs and inputs, a tangent per output."""
    return isinstance(outputs, (list, tuple)) and isinstance(inputs, (list, tuple)) \
        and isinstance(grad_outputs, (list, tuple)) and len(grad_outputs) == len(outputs) \
        and all(isinstance(g, torch.Tensor) for g in grad_outputs) \
        and not create_graph and not is_grads_batched and not materialize_grads


class CaptureMode(_RealSwap):
    """Swap every real tensor a torch function receives for its graph input (Note [Captured tensors])."""

    def __init__(self, lifted: dict[int, torch.Tensor]):
        super().__init__()
        self.lifted = lifted                       # id(real tensor) -> graph input
        self.found: dict[int, torch.Tensor] = {}   # real tensors not lifted yet
        self._stand_ins: dict[int, torch.Tensor] = {}

    def _swap(self, t: Any) -> Any:
        if not _is_real(t):
            return t
        lifted = self.lifted.get(id(t))
        if lifted is not None:
            return lifted
        check_capturable(t, "a tensor the compiled function captured")
        self.found.setdefault(id(t), t)
        stand_in = self._stand_ins.get(id(t))
        if stand_in is None:   # any value will do: this trace is abandoned (Recapture)
            with torch._C.DisableTorchFunction():   # ours, not the user's: no mode may refuse it
                stand_in = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device,
                                               requires_grad=t.requires_grad)
            self._stand_ins[id(t)] = stand_in
        return stand_in


def _holds_real(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(map(_is_real, value))
    return _is_real(value)


def check_capturable(t: torch.Tensor, what: str) -> None:
    """Refuse, naming it, a captured tensor that cannot be a graph input."""
    from .inputs import _PLAIN_TENSOR_TYPES

    if type(t) not in _PLAIN_TENSOR_TYPES or t.layout != torch.strided:
        kind = type(t).__name__ if type(t) not in _PLAIN_TENSOR_TYPES else f"layout {t.layout}"
        raise UnsupportedError(
            f"{what} ({kind}, shape {tuple(t.shape)}) cannot be lifted into a graph input: jointgraph lifts "
            "plain strided tensors only", source=user_source_line(),
            hint='pass it as an argument (as a plain tensor), or pass on_unsupported="eager"')


def run_captured(fn: Callable, args: tuple, kwargs: dict, lifted: dict[int, torch.Tensor]) -> Any:
    """Call ``fn`` with real tensors swapped for their graph inputs; Recapture if it read new ones."""
    mode = CaptureMode(lifted)
    with mode:
        result = fn(*args, **kwargs)
    if mode.found:
        raise Recapture(list(mode.found.values()))
    return result


def lift_captured(fn: Callable, leaves: list, spec, leaf_roles: list | None, sources: CapturedSources,
                  build: Callable) -> tuple[Any, list]:
    """Run ``build(signature, flat_fn, out_box, tensors)`` on ``leaves`` (the call's, then those read
    from ``sources``), adding to ``sources`` the tensors each trace finds; return its result and
    the leaves it ran on (Note [Captured tensors])."""
    from ..ir import Role
    from .inputs import flat_signature, leaf_names, make_flat_fn

    num_args = spec.num_leaves
    for _ in range(MAX_RECAPTURES):
        captured = leaves[num_args:]
        roles = None if leaf_roles is None and not captured else \
            [*(leaf_roles or [Role.PRIMAL] * num_args), *[Role.CAPTURED] * len(captured)]
        names = leaf_names(pytree.tree_unflatten(leaves[:num_args], spec)) + sources.names
        signature = flat_signature(leaves, roles, names)
        tensors = [leaves[p] for p in signature.tensor_leaf_positions]
        flat_fn, out_box = make_flat_fn(fn, spec, signature, captured)
        try:
            return build(signature, flat_fn, out_box, tensors), leaves
        except Recapture as found:
            sources.add(fn, found.tensors)
            leaves = [*leaves[:num_args], *sources.read()]
    raise UnsupportedError(f"the function kept reading new captured tensors after {MAX_RECAPTURES} compiles",
                           hint='pass the tensors as arguments, or pass on_unsupported="eager"')


# ### Where captured tensors are read from


@dataclasses.dataclass
class CapturedSources:
    """How to read the captured tensors of a function on each call (Note [Captured tensors]).

    ``read()`` returns the tensors, in lifting order; ``training()`` the ``training`` flags of
    the modules they were found in; ``names`` are readable names for the graph inputs.
    """

    getters: list[Callable[[], Any]] = dataclasses.field(default_factory=list)
    names: list[str] = dataclasses.field(default_factory=list)
    modules: list[torch.nn.Module] = dataclasses.field(default_factory=list)

    def read(self) -> list:
        return [get() for get in self.getters]

    def training(self) -> tuple:
        modules = self.modules   # read on every call: nothing to build when no module was found
        return tuple([m.training for m in modules]) if modules else ()

    def add(self, fn: Callable, tensors: list[torch.Tensor]) -> None:
        """Find where ``fn`` reads each of ``tensors``; hold the ones found nowhere by reference."""
        roots = _roots(fn)
        wanted = {id(t): t for t in tensors}
        found: dict[int, tuple[str, Callable]] = {}
        for name, get, value in roots:
            if id(value) in wanted and id(value) not in found:
                found[id(value)] = (name, get)
            elif isinstance(value, torch.nn.Module):
                self._search_module(name, get, value, wanted, found)
        for t in tensors:
            name, get = found.get(id(t)) or (f"captured_{len(self.getters)}", _held(t))
            self.getters.append(get)
            self.names.append("".join(c if c.isalnum() else "_" for c in name))

    def _search_module(self, name: str, get: Callable, module: torch.nn.Module, wanted: dict, found: dict) -> None:
        hit = False
        tensors = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
        for path, t in tensors:
            if id(t) in wanted and id(t) not in found:
                found[id(t)] = (f"{name}.{path}", _attribute_getter(get, path))
                hit = True
        if hit and all(m is not module for m in self.modules):
            self.modules.extend(module.modules())


def _held(t: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: t


def _attribute_getter(get_root: Callable, path: str) -> Callable[[], Any]:
    parts = path.split(".")

    def get() -> Any:
        value = get_root()
        try:
            for part in parts:
                value = getattr(value, part)
        except AttributeError:
            return None   # removed: a constant leaf, so the guard misses and the function compiles again
        return value

    return get


def _roots(fn: Callable) -> list[tuple[str, Callable, Any]]:
    """(name, getter, current value) of the tensors, modules and generators in the closure cells and
    globals ``fn`` may read, following the Python functions it reaches (a bound method's ``self`` included)."""
    from .guards import global_names

    roots: list[tuple[str, Callable, Any]] = []
    seen: set[int] = set()

    def visit(f: Any, depth: int) -> None:
        if isinstance(f, functools.partial):
            visit(f.func, depth)
            return
        owner = getattr(f, "__self__", None)
        if isinstance(owner, torch.nn.Module):
            roots.append(("self", _constant(owner), owner))
        f = getattr(f, "__func__", f)
        if not isinstance(f, types.FunctionType) or id(f) in seen or depth > _MAX_DEPTH:
            return
        seen.add(id(f))
        for name, cell in zip(f.__code__.co_freevars, f.__closure__ or (), strict=True):
            add(name, _cell_getter(cell), depth)
        module_globals = f.__globals__
        for name in sorted(global_names(f.__code__)):
            if name in module_globals:
                add(name, functools.partial(_read_global, module_globals, name), depth)

    def add(name: str, get: Callable, depth: int) -> None:
        value = get()
        if isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
            visit(value, depth + 1)
        elif isinstance(value, (torch.Tensor, torch.nn.Module, torch._C.Generator)):
            roots.append((name, get, value))

    visit(fn, 0)
    return roots


def _constant(value: Any) -> Callable[[], Any]:
    return lambda: value


def _cell_getter(cell) -> Callable[[], Any]:
    def get() -> Any:
        try:
            return cell.cell_contents
        except ValueError:   # not bound yet
            return None
    return get


def _read_global(module_globals: dict, name: str) -> Any:
    return module_globals.get(name)
