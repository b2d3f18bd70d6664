"""Autograd hooks the traced function registers (Note [Hooks inside the function] in ir/hook_ops.py).

``HooksInside`` sees ``Tensor.register_hook``, ``Tensor.register_post_accumulate_grad_hook``
and ``Tensor.retain_grad`` while the function runs on fake tensors, and fills a
``HookTable``: a hook on an intermediate becomes a hook op in the backward graph; one on an
input becomes a prologue the runtime runs on the caller's tensor. What would run at trace
time only, or see a trace-time value, is refused; so are module backward hooks, which
autograd sets up on ``grad_fn`` objects while the module runs (``Node`` methods no mode sees).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

import torch
from torch._subclasses.fake_tensor import is_fake

from ..errors import UnsupportedError, user_source_line
from ..ir.hook_ops import HOOK_OP
from .captured import _cell_getter

_REGISTER_HOOK = torch.Tensor.register_hook
_POST_ACCUMULATE = torch.Tensor.register_post_accumulate_grad_hook
_RETAIN_GRAD = torch.Tensor.retain_grad
_KINDS = {_REGISTER_HOOK: "hook", _POST_ACCUMULATE: "post_accumulate_grad", _RETAIN_GRAD: "retain_grad"}


@dataclasses.dataclass
class InputHook:
    """A hook the function registered on graph input ``input_index``; ``kind`` is "hook",
    "post_accumulate_grad" or "retain_grad" (``fn`` None)."""

    input_index: int
    kind: str
    fn: Callable | None
    removed: bool = False   # its handle's remove() was called inside the function


@dataclasses.dataclass
class HookTable:
    """The hooks one trace registered: ``hooks[k]`` is what hook op ``k`` of the backward runs."""

    hooks: list[Callable] = dataclasses.field(default_factory=list)
    input_hooks: list[InputHook] = dataclasses.field(default_factory=list)

    def prologue(self) -> tuple[InputHook, ...]:
        return tuple(h for h in self.input_hooks if not h.removed)

    def __bool__(self) -> bool:
        return bool(self.hooks) or any(not h.removed for h in self.input_hooks)


class _InputHookHandle:
    """What ``register_hook`` on an input returns inside the function: ``remove()`` drops it."""

    def __init__(self, hook: InputHook):
        self._hook = hook

    def remove(self) -> None:
        self._hook.removed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class HooksInside(torch.overrides.TorchFunctionMode):
    """Record the autograd hooks registered while the traced function runs into ``table``."""

    def __init__(self, inputs: list, table: HookTable):
        super().__init__()
        self.table = table
        self._inputs = {id(t): i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
        self._grad_fns = {id(t): t.grad_fn for t in inputs if isinstance(t, torch.Tensor)}
        self._module_check = None

    def __enter__(self):
        thread = threading.get_ident()

        def refuse_backward_hooks(module: torch.nn.Module, args) -> None:
            if threading.get_ident() == thread:
                _refuse_module_backward_hooks(module)

        self._module_check = torch.nn.modules.module.register_module_forward_pre_hook(refuse_backward_hooks)
        return super().__enter__()

    def __exit__(self, *exc):
        self._module_check.remove()
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kind = _KINDS.get(func)
        if kind is None:
            return func(*args, **(kwargs or {}))
        tensor, *rest = args
        fn = rest[0] if rest else (kwargs or {}).get("hook")
        index = self._inputs.get(id(tensor))
        if index is not None:
            return self._on_input(func, tensor, index, kind, fn)
        return self._on_intermediate(func, tensor, kind, fn)

    def _on_input(self, func, tensor: torch.Tensor, index: int, kind: str, fn):
        if kind == "retain_grad":
            if not tensor.requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        else:
            func(tensor, _no_op).remove()   # eager's own checks: requires grad, a leaf for post-accumulate
            _refuse_trace_values(fn)
        if tensor.grad_fn is not self._grad_fns[id(tensor)]:
            raise UnsupportedError(f"Tensor.{func.__name__} on input {index} after the function modified it in "
                                   "place is not supported: the hook would be registered on the caller's tensor "
                                   "before the call, so it would receive the gradient of the old value",
                                   source=user_source_line(),
                                   hint="register the hook before modifying the input, or on a clone of it")
        hook = InputHook(index, kind, fn)
        self.table.input_hooks.append(hook)
        return None if kind == "retain_grad" else _InputHookHandle(hook)

    def _on_intermediate(self, func, tensor: torch.Tensor, kind: str, fn):
        if kind == "hook":
            _refuse_trace_values(fn)
            index = len(self.table.hooks)
            handle = func(tensor, _hook_call(index))   # eager's checks, then the engine calls it while traced
            self.table.hooks.append(fn)
            return handle
        if kind == "post_accumulate_grad":
            func(tensor, _no_op).remove()   # eager's error on a non-leaf (the usual case)
        elif not tensor.requires_grad or tensor.is_leaf:
            return func(tensor)   # eager's error, or nothing to do (a leaf keeps its .grad anyway)
        what = "Tensor.retain_grad" if kind == "retain_grad" else "Tensor.register_post_accumulate_grad_hook"
        raise UnsupportedError(
            f"{what} on a tensor computed inside the compiled function is not supported: its gradient lives "
            "inside the compiled backward graph, which does not hand it out to set .grad",
            source=user_source_line(),
            hint="register a hook instead (y.register_hook(lambda g: store.append(g))), return the tensor and call "
                 'retain_grad() on the output outside, or pass on_unsupported="eager"')


def _refuse_module_backward_hooks(module: torch.nn.Module) -> None:
    """Module backward hooks are set up on the ``grad_fn`` of the module's inputs and outputs while
    it runs (``Node.register_hook`` / ``register_prehook``, methods no mode sees): traced, they would
    run once, at trace time, on fake gradients."""
    from torch.nn.modules import module as module_globals

    if not (module._backward_hooks or module._backward_pre_hooks or module_globals._global_backward_hooks
            or module_globals._global_backward_pre_hooks):
        return
    raise UnsupportedError(f"backward hooks on module {type(module).__name__} (register_full_backward_hook, "
                           "register_full_backward_pre_hook, register_backward_hook, or a global one) inside the "
                           "compiled function are not supported: they would run once, when the function is traced",
                           source=user_source_line(),
                           hint="use Tensor.register_hook on the module's output or input inside the function, "
                                'or remove the hook while compiling, or pass on_unsupported="eager"')


def _hook_call(index: int) -> Callable:
    def run_hook(grad: torch.Tensor) -> torch.Tensor:   # traced: one hook op in the backward graph
        return HOOK_OP(grad, index)
    return run_hook


def _no_op(*args) -> None:
    return None


def _refuse_trace_values(fn) -> None:
    """A hook that closes over a tensor of the trace (a fake or functional tensor) would compute
    with it at run time: refuse it, naming the variable."""
    if not callable(fn):
        return   # eager's own TypeError comes from the registration
    for name, value in _closed_over(fn):
        values = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else (value,)
        if any(isinstance(v, torch.autograd.graph.Node) for v in values):
            raise UnsupportedError(
                f"a hook registered inside the compiled function holds autograd nodes of the traced function "
                f"({name!r}; torch.autograd.graph.register_multi_grad_hook does): at run time they belong to no "
                "backward, so the hook would never fire", source=user_source_line(),
                hint="register one hook per tensor (y.register_hook), or register_multi_grad_hook on the "
                     'outputs outside the compiled function, or pass on_unsupported="eager"')
        if any(isinstance(v, torch.Tensor) and is_fake(v) for v in values):
            raise UnsupportedError(
                f"a hook registered inside the compiled function reads the tensor {name!r}, computed inside the "
                "function: the hook runs at every backward, but the compiled function keeps the value of the "
                "call that traced it", source=user_source_line(),
                hint="compute what the hook needs from the gradient it is given, or register the hook outside "
                     'the compiled function, or pass on_unsupported="eager"')


def _closed_over(fn) -> list[tuple[str, object]]:
    """(name, value) of what ``fn`` keeps: closure cells, defaults, a bound method's object,
    a functools.partial's arguments."""
    found: list[tuple[str, object]] = []
    inner = getattr(fn, "func", None)
    if inner is not None and hasattr(fn, "args"):   # functools.partial
        found += [(f"argument {i}", a) for i, a in enumerate(fn.args)]
        found += list((getattr(fn, "keywords", None) or {}).items())
        found += _closed_over(inner)
    self_ = getattr(fn, "__self__", None)
    if self_ is not None:
        found.append(("self", self_))
        fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    found += [(name, _cell_getter(cell)())   # an empty cell reads None
              for name, cell in zip(code.co_freevars if code else (), getattr(fn, "__closure__", None) or (),
                                    strict=False)]
    found += [(f"default {i}", d) for i, d in enumerate(getattr(fn, "__defaults__", None) or ())]
    found += list((getattr(fn, "__kwdefaults__", None) or {}).items())
    return found
