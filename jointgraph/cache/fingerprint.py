"""A stable digest of the Python a compiled function runs: code, closures, globals, modules.

Note [Source fingerprint]
-------------------------
``aot_function`` / ``aot_module`` key the on-disk cache on the function *before* tracing it,
so that a warm start traces nothing. The digest covers everything the trace of ``fn`` can
read through Python:

* a Python function: its bytecode, constants (nested code objects included), names,
  argument layout, defaults, closure cell values, and the value of every global its code
  (or a function or lambda it defines) names; for a global that is a user module, the
  module attributes the code names (``mylib.helper``), hashed the same way;
* a bound method: its function and ``self``; a ``functools.partial``: its function and arguments;
* an ``nn.Module``: its class, every plain attribute (``self.heads = 4``, a config object),
  its hooks, its submodules and the names, shapes, dtypes and ``requires_grad`` of its
  parameters and buffers (their values are graph inputs, not part of the graph);
* a class defined outside torch, the standard library and installed packages: its bases and
  every attribute of its ``__dict__`` (so a changed method body changes the digest);
* scalars, strings, dtypes, devices, enums and containers of them: by type and value;
* other objects: their class and ``__dict__`` (a dataclass, a ``PretrainedConfig``).

Code that cannot change without a version change is named, not read: functions and classes of
torch (the digest of the environment carries torch's version), of jointgraph (carries the
digest of jointgraph's own source), of the standard library (the Python version), and of an
installed distribution (its version). Everything else is read.

What cannot be hashed stably raises ``Unhashable`` naming it, and the cache is bypassed:
a real tensor in a closure, a global or a module attribute (it would be a captured tensor,
found only by tracing), an object without a ``__dict__`` that is none of the above (a C
extension object, a file, a lock), an ``import`` of a user module inside the function, a
generator, or an object graph past ``MAX_ITEMS`` values.
"""

from __future__ import annotations

import copyreg
import enum
import functools
import hashlib
import importlib.metadata
import sys
import sysconfig
import types
from typing import Any

import torch

from ..capture.guards import global_names

MAX_ITEMS = 200_000
_ATOMS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented))
_TORCH_SCALARS = (torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size)
_BUILTIN_CALLABLES = (types.BuiltinFunctionType, types.BuiltinMethodType, types.WrapperDescriptorType,
                      types.MethodDescriptorType, types.ClassMethodDescriptorType, types.GetSetDescriptorType,
                      types.MemberDescriptorType, torch._ops.OpOverload, torch._ops.OpOverloadPacket,
                      torch._ops.HigherOrderOperator)
# Attributes that differ between identical processes and say nothing about the graph
# (transformers' GenerationConfig keeps the hash() of its own repr).
_PER_PROCESS = frozenset({"_original_object_hash"})
_NN_SKIP = frozenset({"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set"})


class Unhashable(Exception):  # noqa: N818 - a bypass reason, not an error the user sees
    """Something the compiled function reads has no stable digest: the cache is bypassed."""


def fingerprint(*values: Any) -> str:
    """The hex digest of ``values`` (see Note [Source fingerprint]); raises ``Unhashable``."""
    walker = _Walker()
    for value in values:
        walker.visit(value, "fn")
    return walker.digest.hexdigest()


@functools.cache
def _named_by_version(module_name: str) -> str | None:
    """A version string when code of ``module_name`` cannot change without one, else None."""
    top = module_name.partition(".")[0]
    if top in ("torch", "torchgen", "functorch") or top in getattr(sys, "stdlib_module_names", ()) \
            or top in ("builtins", "_operator", "_functools"):
        return f"{top}-{sys.version_info[:2]}"
    if top == "jointgraph":
        return "jointgraph"   # the environment digest carries jointgraph's source digest
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None) or ""
    roots = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    if not any(path.startswith(root) for root in roots):
        return None   # a user module, or an editable install: read its code
    try:   # the distribution named as the package (scanning every distribution's files costs ~1 s)
        return f"{top}={importlib.metadata.version(top)}"
    except Exception:  # noqa: BLE001 - no such distribution: read the code instead
        return None


def _versioned(obj: Any) -> str | None:
    module = getattr(obj, "__module__", None)
    return _named_by_version(module) if isinstance(module, str) else None


class _Walker:
    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.seen: dict[int, int] = {}
        self.keep: list = []   # keeps visited objects alive: their ids stay unique
        self.count = 0

    def put(self, *parts: Any) -> None:
        for part in parts:
            self.digest.update(repr(part).encode())
            self.digest.update(b"\x00")

    def visit(self, value: Any, path: str) -> None:
        self.count += 1
        if self.count > MAX_ITEMS:
            raise Unhashable(f"{path}: the objects the function reaches hold more than {MAX_ITEMS} values")
        kind = type(value)
        if kind in _ATOMS or isinstance(value, _TORCH_SCALARS):
            self.put(kind.__name__, value)
            return
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise Unhashable(f"{path} is a symbolic size the function holds (not a graph input's: not keyed)")
        if isinstance(value, enum.Enum):
            self.put("enum", kind.__module__, kind.__qualname__, value.name)
            return
        ref = self.seen.get(id(value))
        if ref is not None:   # shared or cyclic: by position
            self.put("ref", ref)
            return
        self.seen[id(value)] = len(self.seen)
        self.keep.append(value)
        self._visit_object(value, kind, path)

    def _visit_object(self, value: Any, kind: type, path: str) -> None:
        if isinstance(value, (tuple, list)):
            self._container_class(kind, path)
            self.put(len(value))
            for i, item in enumerate(value):
                self.visit(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            self._container_class(kind, path)
            self.put(len(value))
            for k, item in value.items():
                self.visit(k, path)
                self.visit(item, f"{path}[{k!r}]")
        elif isinstance(value, (set, frozenset)):
            self._container_class(kind, path)
            self.put(sorted(fingerprint(v) for v in value))
        elif isinstance(value, torch.Tensor):
            raise Unhashable(f"{path} is a tensor the function captures (found only by tracing; "
                             "pass it as an argument to cache this function)")
        elif isinstance(value, types.FunctionType):
            self._function(value, path)
        elif isinstance(value, types.MethodType):
            self.put("method")
            self.visit(value.__func__, path)
            self.visit(value.__self__, f"{path}.__self__")
        elif isinstance(value, functools.partial):
            self.put("partial")
            self.visit(value.func, path)
            self.visit(value.args, f"{path}.args")
            self.visit(value.keywords, f"{path}.keywords")
        elif isinstance(value, types.ModuleType):
            self.put("module", value.__name__, _named_by_version(value.__name__))
        elif isinstance(value, _BUILTIN_CALLABLES):
            self.put("builtin", getattr(value, "__module__", None), getattr(value, "__qualname__", None) or str(value))
        elif isinstance(value, type):
            self._class(value, path)
        elif isinstance(value, torch.nn.Module):
            self._module(value, path)
        else:
            self._instance(value, kind, path)

    def _container_class(self, kind: type, path: str) -> None:
        if kind in (tuple, list, dict, set, frozenset):
            self.put(kind.__name__)
        else:   # a namedtuple, an OrderedDict
            self.visit(kind, f"{path}.__class__")

    def _function(self, fn: types.FunctionType, path: str) -> None:
        refused = getattr(fn, "__jointgraph_uncacheable__", None)
        if refused is not None:   # its trace has side effects a warm start would skip
            raise Unhashable(refused)
        version = _versioned(fn)
        if version is not None:
            self.put("versioned function", fn.__module__, fn.__qualname__, version)
            if version == "jointgraph":   # our wrappers: what they close over is the user's
                self._cells(fn, path)
            return
        self.put("function", fn.__module__, fn.__qualname__)
        self._code(fn.__code__, path)
        self.visit(fn.__defaults__, f"{path}.__defaults__")
        self.visit(fn.__kwdefaults__, f"{path}.__kwdefaults__")
        self._cells(fn, path)
        names = global_names(fn.__code__)
        module_globals = fn.__globals__
        for name in sorted(names):
            if name not in module_globals:
                self.put("no global", name)
                continue
            value = module_globals[name]
            self.put("global", name)
            self.visit(value, f"{fn.__qualname__}.<global {name}>")
            if isinstance(value, types.ModuleType) and _named_by_version(value.__name__) is None:
                for attr in sorted(names):   # mylib.helper: the attributes the code names
                    if hasattr(value, attr):
                        self.put("attr", attr)
                        self.visit(getattr(value, attr), f"{name}.{attr}")

    def _cells(self, fn: types.FunctionType, path: str) -> None:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
            try:
                contents = cell.cell_contents
            except ValueError:
                contents = _EmptyCell
            self.put("cell", name)
            self.visit(contents, f"{path}.<closure {name}>")

    def _code(self, code: types.CodeType, path: str) -> None:
        if code.co_flags & (0x20 | 0x100 | 0x200):   # generator, coroutine, async generator
            raise Unhashable(f"{path} ({code.co_qualname if hasattr(code, 'co_qualname') else code.co_name}) "
                             "is a generator or coroutine")
        self.put("code", code.co_code, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                 code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount, code.co_flags)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._code(const, path)
            elif isinstance(const, frozenset):   # ``x in {"a", "b"}``: its repr's order varies per process
                self.put("frozenset", sorted(map(repr, const)))
            else:
                self.put(type(const).__name__, const)
        for instr in _imports(code):
            if _named_by_version(instr) is None:
                raise Unhashable(f"{path} imports {instr!r} inside the function (a user module: its code is "
                                 "not read; import it at module level)")

    def _class(self, cls: type, path: str) -> None:
        version = _versioned(cls)
        if version is not None:
            self.put("versioned class", cls.__module__, cls.__qualname__, version)
            return
        self.put("class", cls.__module__, cls.__qualname__)
        self.visit(cls.__bases__, f"{path}.__bases__")
        for name, attr in sorted(cls.__dict__.items(), key=lambda kv: kv[0]):
            if name in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__", "__annotations__",
                        "__dataclass_fields__", "__dataclass_params__", "__match_args__", "__static_attributes__",
                        "__firstlineno__"):
                continue
            self.put("attr", name)
            if isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            elif isinstance(attr, property):
                attr = (attr.fget, attr.fset, attr.fdel)
            self.visit(attr, f"{cls.__qualname__}.{name}")

    def _module(self, module: torch.nn.Module, path: str) -> None:
        self.put("nn.Module")
        self.visit(type(module), path)
        for name, t in [*module._parameters.items(), *module._buffers.items()]:
            if t is None:
                self.put("tensor slot", name, None)
            else:   # a graph input: its metadata, not its values
                self.put("tensor slot", name, tuple(t.shape), t.dtype, t.device.type, t.requires_grad,
                         type(t).__name__, name in module._non_persistent_buffers_set)
        for name, value in sorted(module.__dict__.items(), key=lambda kv: kv[0]):
            if name not in _NN_SKIP:
                self.put("attr", name)
                self.visit(value, f"{path}.{name}")
        for name, child in module._modules.items():
            self.put("child", name)
            self.visit(child, f"{path}.{name}")

    def _instance(self, value: Any, kind: type, path: str) -> None:
        state = getattr(value, "__dict__", None)
        slots = [s for c in kind.__mro__ for s in getattr(c, "__slots__", ())]
        if state is None and not slots:
            self._reduced(value, kind, path)
            return
        self.put("object")
        self.visit(kind, f"{path}.__class__")
        if state is not None:
            items = sorted((kv for kv in state.items() if kv[0] not in _PER_PROCESS), key=lambda kv: str(kv[0]))
            self.visit(dict(items), path)
        for slot in slots:
            self.put("slot", slot)
            self.visit(getattr(value, slot, _EmptyCell), f"{path}.{slot}")


    def _reduced(self, value: Any, kind: type, path: str) -> None:
        """An object without ``__dict__``: by what pickling it would record (a namedtuple's field
        getter), else opaque."""
        try:
            reduced = value.__reduce_ex__(4)
        except Exception:  # noqa: BLE001 - does not pickle: no readable state
            reduced = None
        if not isinstance(reduced, tuple) or len(reduced) < 2 or reduced[0] is copyreg.__newobj__ \
                or getattr(reduced[0], "__name__", "") == "_reconstructor":
            raise Unhashable(f"{path} is an opaque {kind.__module__}.{kind.__qualname__} object "
                             "(no __dict__: its state cannot be read)")
        self.put("reduced")
        self.visit(kind, f"{path}.__class__")
        self.visit(reduced[0], f"{path}.__reduce__")
        self.visit(reduced[1:], f"{path}.__reduce__")


class _EmptyCell:
    """Stands for a closure cell not bound yet."""


def _imports(code: types.CodeType) -> list[str]:
    import dis

    return [ins.argval for ins in dis.get_instructions(code) if ins.opname == "IMPORT_NAME"]
