"""Why a call missed every compiled entry: the guards of Note [Guards], compared in words.

``guard_failures(old, new)`` compares the guard key of a compiled entry with the key of the
call that missed it and says what changed, in the user's terms::

    input 0: shape (4, 128) -> (8, 128)
    autocast: off -> cpu bfloat16
    global 'scale' (read by step): (float, 0.5) -> (float, 1.0)

A key is ``GuardKey``: the static key of the flat arguments (capture/inputs.py) and the
context (capture/guards.py: ambient state, saved-tensor hooks, closure values, module
training flags).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch


@dataclasses.dataclass(frozen=True)
class GuardKey:
    """What an entry was compiled for: the flat arguments' static key, the context, names."""

    args: tuple          # static_key(leaves, grad_enabled)
    context: tuple       # (ambient_state(), saved-tensor hooks, closure values, training flags)
    leaf_names: tuple[str, ...] = ()
    closure_names: tuple[str, ...] = ()


def guard_failures(old: GuardKey, new: GuardKey) -> list[str]:
    """What differs between ``old`` (an entry's) and ``new`` (a call's), one line per guard."""
    out = _argument_failures(old.args, new.args, new.leaf_names)
    (old_ambient, old_hooks, old_closure, old_training) = old.context
    (new_ambient, new_hooks, new_closure, new_training) = new.context
    out += _ambient_failures(old_ambient, new_ambient)
    if old_hooks != new_hooks:
        out.append(f"saved-tensor hooks: {_hooks(old_hooks)} -> {_hooks(new_hooks)}")
    if old_closure != new_closure:
        names = new.closure_names if len(new.closure_names) == len(new_closure) else ()
        for i, (a, b) in enumerate(zip(old_closure, new_closure, strict=False)):
            if a != b:
                name = names[i] if names else f"closure value {i}"
                out.append(f"{name}: {_value(a)} -> {_value(b)}")
        if len(old_closure) != len(new_closure):
            out.append("the Python values the function reads changed (a function it calls was rebound)")
    if old_training != new_training:
        out.append(f"module training flags: {old_training} -> {new_training}")
    return out or ["argument structure (the pytree of the arguments) changed"]


def _argument_failures(old: tuple, new: tuple, names: tuple[str, ...]) -> list[str]:
    out = []
    if old[0] != new[0]:
        out.append(f"grad mode: {'on' if old[0] else 'off'} -> {'on' if new[0] else 'off'}")
    old_leaves, new_leaves = old[1:], new[1:]
    if len(old_leaves) != len(new_leaves):
        out.append(f"number of flat arguments: {len(old_leaves)} -> {len(new_leaves)}")
    for i, (a, b) in enumerate(zip(old_leaves, new_leaves, strict=False)):
        if a == b:
            continue
        label = f"input {i}" + (f" ({names[i]})" if i < len(names) and names[i] != f"arg{i}" else "")
        out += [f"{label}: {what}" for what in _leaf_changes(a, b)]
    return out


_TENSOR_FIELDS = ("shape", "stride", "dtype", "device", "requires_grad", "same tensor as input")


def _leaf_changes(a: Any, b: Any) -> list[str]:
    tensor_a = isinstance(a, tuple) and len(a) == 6 and isinstance(a[0], torch.Size)
    tensor_b = isinstance(b, tuple) and len(b) == 6 and isinstance(b[0], torch.Size)
    if tensor_a and tensor_b:
        out = []
        for field, x, y in zip(_TENSOR_FIELDS, a, b, strict=True):
            if x == y:
                continue
            if field == "shape":
                out.append(f"shape {tuple(x)} -> {tuple(y)}")
            elif field == "stride" and isinstance(x, tuple) and isinstance(y, tuple):
                out.append(f"stride {x} -> {y}")
            elif field == "same tensor as input":
                out.append(f"is the same tensor as input {x} -> input {y}")
            else:
                out.append(f"{field} {_value(x)} -> {_value(y)}")
        return out
    if tensor_a != tensor_b:
        return [f"{'a tensor' if tensor_a else _value(a)} -> {'a tensor' if tensor_b else _value(b)}"]
    return [f"value {_value(a)} -> {_value(b)}"]


def _ambient_failures(old: tuple, new: tuple) -> list[str]:
    out = []
    if old[0] != new[0]:
        out.append(f"default dtype: {_value(old[0])} -> {_value(new[0])}")
    if old[1] != new[1]:
        out.append(f"deterministic algorithms: {_deterministic(old[1])} -> {_deterministic(new[1])}")
    if old[2] != new[2]:
        out.append(f"autocast: {_autocast(old[2])} -> {_autocast(new[2])}")
    return out


def _autocast(state: Any) -> str:
    if not state:
        return "off"
    return ", ".join(f"{device} {_value(dtype)}" if len(state) > 1 or device != "cpu" else _value(dtype)
                     for device, dtype in state)


def _deterministic(state: Any) -> str:
    if not state:
        return "off"
    return "warn only" if state[0] else "on"


def _hooks(hooks: Any) -> str:
    return "none" if not hooks else f"{len(hooks)} pair(s)"


def _value(v: Any) -> str:
    if isinstance(v, torch.dtype):
        return str(v).replace("torch.", "")
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], type):   # a frozen (type, value)
        return f"{v[0].__name__} {_value(v[1])}" if isinstance(v[1], tuple) else repr(v[1])
    return repr(v)
