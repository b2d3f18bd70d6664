"""Guards beyond the arguments: ambient torch state and the Python values a function reads.

See Note [Guards] in capture/inputs.py. ``ambient_state()`` is the global torch state a trace
bakes in (autocast, default dtype, deterministic mode); ``closure_guard(fn)`` finds the
closure cells and globals of ``fn`` (and of the Python functions it reaches through them)
that hold Python values specialized into the graph, and reads them per call.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import operator
import types
from collections.abc import Callable
from typing import Any

import torch

from ..errors import UnsupportedError

# ### Ambient torch state

_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", lambda: True)
_deterministic = torch._C._get_deterministic_algorithms
_deterministic_warn_only = torch._C._get_deterministic_algorithms_warn_only
_default_dtype = torch.get_default_dtype


def _autocast_devices() -> tuple[str, ...]:
    devices = []
    for device in ("cpu", "cuda", "xpu", "mps", "hpu", "mtia", "xla"):
        try:
            torch.is_autocast_enabled(device)
        except RuntimeError:
            continue
        devices.append(device)
    return tuple(devices)


_AUTOCAST_DEVICES = _autocast_devices()


def _autocast_state() -> tuple:
    return tuple((device, torch.get_autocast_dtype(device)) for device in _AUTOCAST_DEVICES
                 if torch.is_autocast_enabled(device))


def ambient_state() -> tuple:
    """The global state a trace depends on: default dtype, deterministic mode, autocast per device.

    About 0.2 µs per call when autocast is off (one C call says none is on).
    """
    return (_default_dtype(), _deterministic() and (_deterministic_warn_only(), ),
            _any_autocast() and _autocast_state())


# ### Python values read from closures and globals

_SCALARS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.layout,
            torch.memory_format, enum.Enum, type(Ellipsis))
_ATOMS = frozenset({type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device})
_CALLABLES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, torch._ops.OpOverload,
              torch._ops.OpOverloadPacket)
_MAX_LEAVES = 64      # a container with more values is not guarded value by value
_MAX_DEPTH = 4        # functions reached through functions


@dataclasses.dataclass(frozen=True)
class ClosureGuard:
    """The closure cells and globals of a function whose values are part of its guard.

    ``read()`` returns their current values in a hashable, type-exact form; ``names``
    says what each one is; ``refused`` is the error to raise at compile time for a value
    that cannot be guarded cheaply (None when there is none).
    """

    names: tuple[str, ...]
    read: Callable[[], tuple]
    refused: UnsupportedError | None = None


def closure_guard(fn: Callable) -> ClosureGuard:
    """Find the guardable values ``fn`` reads (see Note [Guards] in capture/inputs.py)."""
    getters: list[tuple] = []   # (read the value, freeze it or None: compare by identity)
    names: list[str] = []
    refused: list[str] = []
    seen: set[int] = set()

    def visit(f: Callable, depth: int) -> None:
        f = getattr(f, "__func__", f)   # bound methods: the function (its ``self`` is not guarded)
        if not isinstance(f, types.FunctionType) or id(f) in seen or depth > _MAX_DEPTH:
            return
        seen.add(id(f))
        ours = (f.__module__ or "").startswith("jointgraph.")   # our wrappers: follow, guard nothing of theirs
        code = f.__code__
        for name, cell in zip(code.co_freevars, f.__closure__ or (), strict=True):
            consider(f"{name!r} (closure of {f.__qualname__})", _cell_getter(cell), depth, ours)
        module_globals = f.__globals__
        for name in sorted(global_names(code)):
            if name in module_globals:
                consider(f"global {name!r} (read by {f.__qualname__})", _global_getter(module_globals, name),
                         depth, ours)

    def consider(name: str, get: Callable[[], Any], depth: int, ours: bool) -> None:
        value = _safe(get, None)
        if isinstance(value, (types.FunctionType, types.MethodType)):
            if not ours:
                names.append(name)
                getters.append((get, None))   # by identity: rebinding it to another function recompiles
            visit(value, depth + 1)
            return
        if ours:
            return
        kind = _guardable(value)
        if kind == "value":
            names.append(name)
            getters.append((get, _freeze))
        elif kind == "identity":
            names.append(name)
            getters.append((get, None))
        elif kind == "too large":
            refused.append(name)

    visit(fn, 0)
    if isinstance(fn, functools.partial):
        visit(fn.func, 0)
    error = None
    if refused:
        error = UnsupportedError(
            f"the compiled function reads {refused[0]}, a container of {_MAX_LEAVES}+ Python values: too large "
            "to guard per call, so a change to it could not trigger a recompile",
            hint="pass it as an argument (a tensor, or a tuple), make it a constant inside the function, "
                 'or pass on_unsupported="eager"')
    return ClosureGuard(tuple(names), _reader(tuple(getters)), error)


def _reader(getters: tuple) -> Callable[[], tuple]:
    if not getters:
        return _nothing

    def read() -> tuple:
        values = []
        try:
            for get, freeze in getters:
                value = get()
                values.append(value if freeze is None else freeze(value))
        except (KeyError, ValueError):   # a global deleted, a cell not bound yet
            return tuple([_safe(get, freeze) for get, freeze in getters])
        return tuple(values)

    return read


def _safe(get: Callable[[], Any], freeze) -> Any:
    try:
        value = get()
    except (KeyError, ValueError):
        return _EMPTY
    return value if freeze is None else freeze(value)


def _nothing() -> tuple:
    return ()


def global_names(code: types.CodeType) -> set[str]:
    """Names ``code`` may load as globals, including in the functions and lambdas it defines."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= global_names(const)
    return found


_EMPTY = object()


def _cell_getter(cell) -> Callable[[], Any]:
    return lambda: cell.cell_contents


def _global_getter(module_globals: dict, name: str) -> Callable[[], Any]:
    return functools.partial(operator.getitem, module_globals, name)


def _guardable(value: Any) -> str:
    """"value" (guard on the value), "identity", "too large" (refuse), or "ignore"."""
    if isinstance(value, _CALLABLES):
        return "identity"
    leaves = _scalar_leaves(value, 0)
    if leaves is None:
        return "ignore"   # modules, classes, tensors, objects: not guarded (Note [Guards])
    if leaves > _MAX_LEAVES:
        return "too large"
    return "value"


def _scalar_leaves(value: Any, count: int) -> int | None:
    """How many scalars ``value`` (a scalar or nested tuple/list/dict/set of them) holds; None if not that."""
    if isinstance(value, _SCALARS):
        return count + 1
    if isinstance(value, (tuple, list, set, frozenset)):
        for item in value:
            count = _scalar_leaves(item, count)
            if count is None or count > _MAX_LEAVES:
                return count
        return count + 1
    if isinstance(value, dict):
        for k, item in value.items():
            count = _scalar_leaves(k, count)
            count = None if count is None else _scalar_leaves(item, count)
            if count is None or count > _MAX_LEAVES:
                return count
        return count + 1
    return None


def _freeze(value: Any) -> Any:
    """A hashable, type-exact form: 2, 2.0 and True are different guards."""
    kind = type(value)
    if kind in _ATOMS:
        return kind, value
    if kind in (tuple, list, set, frozenset):
        items = tuple(_freeze(v) for v in value)
        return kind, (tuple(sorted(items, key=repr)) if kind in (set, frozenset) else items)
    if kind is dict:
        return kind, tuple((_freeze(k), _freeze(v)) for k, v in value.items())
    return kind, value
