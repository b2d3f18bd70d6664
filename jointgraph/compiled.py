"""CompiledFunction: the callable aot_function returns; a guard-keyed cache of entries."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.multiprocessing.reductions import StorageWeakRef

from .api import COMPILE_LOCK, build_entry
from .cache import function_source
from .capture.captured import CapturedSources, lift_captured
from .capture.guards import ClosureGuard, ambient_state, closure_guard
from .capture.inplace import ExpandedInputWritten
from .capture.inputs import (
    _PLAIN_TENSOR_TYPES,
    dynamic_key,
    leaf_names,
    static_key,
    unflattener,
)
from .capture.recompile import GuardKey, guard_failures
from .capture.subclasses import SubclassEntry, SubclassOutputs, any_subclass
from .errors import UnsupportedError
from .logs import compile_log, recompiles_log
from .options import CompileOptions
from .runtime.aliasing import AliasedInputs, SyntheticBases
from .runtime.epilogue import RefusedCall
from .runtime.expanded import ExpandedEntry, expanded_groups, expanded_leaf_refusal

_top_hooks = torch._C._autograd._top_saved_tensors_default_hooks


def aliased_leaf_refusal(exc: RuntimeError, leaves: list) -> UnsupportedError | None:
    """An entry is traced first on its inputs as distinct tensors (Note [Aliased inputs] in runtime/aliasing.py).
    ``exc``, eager's error for an in-place op on an input that is a leaf requiring grad (or a view of one) raised
    there after a write autograd recorded into another input, need not be eager's where those two share a storage
    in this call: ``b.requires_grad_(); a[0].mul_(b); b[...] = 1`` with ``b = a[0]`` makes ``b`` a view with a
    history in eager (fuzz seed 9100260), whose in-place op runs. The refusal by name there; None elsewhere."""
    found = getattr(exc, "after_a_recorded_write", None)
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    if found is None or found[2] != len(tensors):
        return None
    target, written, _ = found

    def storage(t: torch.Tensor):
        return StorageWeakRef(t.untyped_storage()) if t.numel() > 0 else None

    shared = storage(tensors[target])
    # an empty written input shares no memory (no storage to compare: fuzz seed 14914997)
    if shared is None or not any((other := storage(tensors[w])) is not None and other == shared for w in written):
        return None
    return UnsupportedError(f"tracing on the arguments as distinct tensors raised {str(exc).splitlines()[0]!r}, "
                            "but arguments share a storage, and eager's write through one can make another a view "
                            "with a history (no leaf); not supported",
                            hint='pass distinct tensors (e.g. .clone()), call requires_grad_() before the compiled '
                                 'function, or pass on_unsupported="eager"')


class _EagerEntry:
    """Runs the original function (on_unsupported="eager")."""

    def __init__(self, fn: Callable, spec):
        self.fn = fn
        self.spec = spec
        self._unflatten = unflattener(spec)

    plans = ()   # it runs the function as it is: no plan

    def __call__(self, leaves: list) -> Any:
        args, kwargs = self._unflatten(leaves[:self.spec.num_leaves])
        return self.fn(*args, **kwargs)


class CompiledFunction:
    """A function compiled per guard key (Note [Guards] in capture/inputs.py)."""

    def __init__(self, fn: Callable, options: CompileOptions):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.options = options
        self._static: dict[tuple, list] = {}
        self._dynamic: dict[tuple, list] = {}
        # Note [Aliased inputs] in runtime/aliasing.py
        self._synthetic = SyntheticBases(fn, self._make_inner)
        self._num_entries = 0
        self._warned: set[str] = set()
        self._positional_specs: dict[int, Any] = {}
        self._guard: ClosureGuard | None = None   # found on the first call (Note [Guards])
        self._captured = CapturedSources()   # Note [Captured tensors] in capture/captured.py

    @property
    def entries(self) -> list:
        return [e for es in (*self._static.values(), *self._dynamic.values()) for e in es]

    @property
    def plans(self) -> list:
        """The ``Plan`` of every compiled entry, oldest first (entries run eagerly have none)."""
        return [p for e in sorted(self.entries, key=lambda e: getattr(e, "number", 0)) for p in e.plans]

    def __repr__(self) -> str:
        name = self._name
        entries = self.entries
        dynamic = sum(len(es) for es in self._dynamic.values())
        return (f"<jointgraph compiled {name}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
                + (f" ({dynamic} symbolic)" if dynamic else "")
                + f", partitioner={self.options.partitioner!r}>")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not kwargs:  # fast path: positional plain tensors are leaves, their spec depends on the count only
            for arg in args:
                if type(arg) not in _PLAIN_TENSOR_TYPES:
                    break
            else:
                spec = self._positional_specs.get(len(args))
                if spec is None:
                    spec = self._positional_specs[len(args)] = pytree.tree_flatten((args, kwargs))[1]
                return self.call_flat(list(args), spec)
        leaves, spec = pytree.tree_flatten((args, kwargs))
        return self.call_flat(leaves, spec)

    def call_flat(self, leaves: list, spec, leaf_roles=None) -> Any:
        grad_enabled = torch.is_grad_enabled()
        if self._captured.getters:   # Note [Captured tensors]: read where they were found
            leaves = [*leaves, *self._captured.read()]
        context = self._context()
        key = (static_key(leaves, grad_enabled), context)
        entry = self._lookup(leaves, spec, key, grad_enabled, context)
        if entry is None:
            with COMPILE_LOCK:   # threads calling first at once compile once (Note [Guards])
                entry = self._lookup(leaves, spec, key, grad_enabled, context)
                if entry is None:
                    entry, leaves = self._compile(leaves, spec, grad_enabled, leaf_roles)
        return self._run(entry, leaves, spec)

    def _context(self) -> tuple:
        """Note [Guards]: the ambient torch state, the saved-tensor hooks, the closure values, the
        ``training`` flags of the modules captured tensors were found in."""
        guard = self._guard
        if guard is None:
            guard = self._guard = closure_guard(self.fn)
        return ambient_state(), _top_hooks(False), guard.read(), self._captured.training()

    def _lookup(self, leaves: list, spec, key: tuple, grad_enabled: bool, context: tuple) -> Any:
        for entry in self._static.get(key, ()):
            if entry.spec is spec or entry.spec == spec:
                return entry
        if self._dynamic:
            for entry in self._dynamic.get((dynamic_key(leaves, grad_enabled), context), ()):
                if entry.spec == spec and entry.guard(leaves):
                    return entry
        return None

    def _run(self, entry, leaves: list, spec) -> Any:
        try:
            try:
                return entry(leaves)
            except AliasedInputs as aliased:
                if len(leaves) > spec.num_leaves:
                    raise UnsupportedError("an argument shares storage with a tensor the function captured "
                                           "(Note [Captured tensors]) and one of them is mutated in place",
                                           hint='pass distinct tensors (e.g. .clone()), or on_unsupported="eager"') \
                        from aliased
                return self._synthetic(leaves, spec, entry.layout, aliased)   # its refusals too, below
        except RefusedCall as exc:   # nothing ran: the call can still run eagerly
            if self.options.on_unsupported != "eager":
                raise
            warnings.warn(f"jointgraph: running {getattr(self.fn, '__name__', self.fn)} eagerly: {exc}", stacklevel=4)
            return _EagerEntry(self.fn, spec)(leaves)

    def _compile(self, leaves: list, spec, grad_enabled: bool, leaf_roles) -> tuple[Any, list]:
        """Compile an entry for ``leaves``; return it and the leaves it runs on (with the captured
        tensors found while tracing)."""
        guard = closure_guard(self.fn)
        if guard.names != self._guard.names:   # a function it reaches was rebound: other values to guard
            self._guard = guard
            self._static.clear()
            self._dynamic.clear()
        hooks = _top_hooks(False)
        reasons = self._recompile_reasons(leaves, spec, grad_enabled)
        dynamic = self._wants_dynamic(reasons)
        start = time.perf_counter()
        shape_guard = None
        try:
            if guard.refused is not None:
                raise guard.refused
            try:
                if any_subclass(leaves):
                    raise SubclassOutputs()
                given = leaves
                entry, leaves, signature = self._build(leaves, spec, leaf_roles, dynamic, hooks)
                if dynamic and not isinstance(entry, _EagerEntry) \
                        and (shape_guard := _shape_guard(entry, signature)) is None:
                    compile_log.info("compiling %s again with static sizes: its symbolic sizes cannot be guarded "
                                     "(aliased inputs, a view's base)", self._name)
                    dynamic = False
                    entry, leaves, signature = self._build(given, spec, leaf_roles, False, hooks)
            except SubclassOutputs:   # subclass arguments or results: Note [Tensor subclasses]
                entry, signature, dynamic = self._subclass_entry(spec, leaf_roles), None, False
            except ExpandedInputWritten:   # Note [Expanded inputs written in place] in runtime/expanded.py
                groups = expanded_groups(leaves[:spec.num_leaves])
                if not groups and (refusal := expanded_leaf_refusal(leaves[:spec.num_leaves])) is not None:
                    raise refusal from None
                if not groups:
                    raise
                refusing = dataclasses.replace(self.options, on_unsupported="raise")
                entry = ExpandedEntry(self.fn, spec, groups, lambda inner: CompiledFunction(inner, refusing),
                                      eager=self.options.on_unsupported == "eager")
                signature, dynamic = None, False
            except RuntimeError as exc:
                if (refusal := aliased_leaf_refusal(exc, leaves[:spec.num_leaves])) is not None:
                    raise refusal from exc
                raise
        except UnsupportedError as exc:
            if self.options.on_unsupported != "eager":
                raise
            warnings.warn(f"jointgraph: running {getattr(self.fn, '__name__', self.fn)} eagerly: {exc}",
                          stacklevel=4)
            entry = _EagerEntry(self.fn, spec)
            dynamic = False
        context = self._context()   # after the build: it may have found captured tensors (more leaves)
        entry.spec = spec
        self._num_entries += 1
        entry.number = self._num_entries
        skey = static_key(leaves, grad_enabled)
        entry.guard_key = GuardKey(skey, context, (), self._guard.names)
        if compile_log.isEnabledFor(logging.INFO):
            compile_log.info("compiled %s (entry %d%s) in %.3f s", self._name, self._num_entries,
                             ", symbolic sizes" if dynamic else "", time.perf_counter() - start)
        if dynamic and not isinstance(entry, _EagerEntry):
            entry.guard = shape_guard   # computed after the build, which dynamic entries all come from
            self._dynamic.setdefault((dynamic_key(leaves, grad_enabled), context), []).append(entry)
        else:
            self._static.setdefault((skey, context), []).append(entry)
        return entry, leaves

    def _build(self, leaves: list, spec, leaf_roles, dynamic: bool, hooks) -> tuple[Any, list, Any]:
        """build_entry, lifting the captured tensors it finds (Note [Captured tensors])."""
        known = len(self._captured.getters)
        source = function_source(self.fn) if self.options.cache is not False else None   # jointgraph/cache

        def build(signature, flat_fn, out_box, tensors):
            if len(self._captured.getters) != known:   # entries compiled before take fewer leaves
                self._static.clear()
                self._dynamic.clear()
            entry = build_entry(flat_fn, out_box, signature, tensors, self.options, dynamic=dynamic,
                                saved_hooks=hooks, source=source)
            return entry, signature

        (entry, signature), leaves = lift_captured(self.fn, leaves, spec, leaf_roles, self._captured, build)
        return entry, leaves, signature

    def _make_inner(self, inner: Callable) -> CompiledFunction:
        """A compiled function for ``inner``, a rewrite of this one's (aliased or expanded inputs)."""
        return CompiledFunction(inner, self.options)

    def _subclass_entry(self, spec, leaf_roles) -> SubclassEntry:
        """Note [Tensor subclasses]: plain functions compiled per structure, with static sizes."""
        options = dataclasses.replace(self.options, dynamic=False, cache=False)
        return SubclassEntry(self.fn, spec, leaf_roles, lambda plain_fn: CompiledFunction(plain_fn, options))

    @property
    def _name(self) -> str:
        return getattr(self.fn, "__name__", None) or type(self.fn).__name__

    def _recompile_reasons(self, leaves: list, spec, grad_enabled: bool) -> list[str]:
        """Why this call missed the latest entry (Note [Guards]); logged on ``jointgraph.recompiles``."""
        warns = self._num_entries >= self.options.recompile_limit and "limit" not in self._warned
        if not (warns or recompiles_log.isEnabledFor(logging.INFO)):
            return []   # nobody reads the reasons: skip the work
        latest = max(self.entries, key=lambda e: getattr(e, "number", 0), default=None)
        if latest is None or getattr(latest, "guard_key", None) is None:
            return []
        names = tuple(leaf_names(pytree.tree_unflatten(leaves[:spec.num_leaves], spec)))
        key = GuardKey(static_key(leaves, grad_enabled), self._context(), names, self._guard.names)
        reasons = guard_failures(latest.guard_key, key)
        recompiles_log.info("recompiling %s (entry %d): %s", self._name, self._num_entries + 1, "; ".join(reasons))
        return reasons

    def _wants_dynamic(self, reasons: list[str]) -> bool:
        if self.options.dynamic is not None:
            return self.options.dynamic
        # dynamic=None: static first; symbolic once a shape changes past the recompile limit.
        if self._num_entries >= self.options.recompile_limit:
            if "limit" not in self._warned:
                self._warned.add("limit")
                warnings.warn(f"jointgraph: {self._name} has been compiled {self._num_entries} times "
                              f"(recompile_limit={self.options.recompile_limit}); compiling with symbolic sizes "
                              f"from now on. Last recompile: {'; '.join(reasons) or 'unknown'}. "
                              "See JOINTGRAPH_LOGS=recompiles for every recompile's reason", stacklevel=5)
            return True
        return False


def _shape_guard(entry, signature) -> Callable[[list], bool] | None:
    """The ShapeEnv's guards on the symbolic sizes, as a callable over leaves; None where a guard is on a symbol no
    graph input's geometry gives (a fake view's base, or an aliased inputs' synthetic base: PyTorch asserts, or names
    the base ``__meta_utils_unknown_tensor0`` in code that fails when evaluated, fuzz seeds 13700001, 13700022)."""
    shape_env = entry.fake_mode.shape_env
    fakes = entry.fakes
    positions = signature.tensor_leaf_positions
    try:
        code = shape_env.produce_guards_expression(fakes) if fakes else None
    except AssertionError:   # "sources must not be empty for symbol ..."
        return None
    if not code:
        return lambda leaves: True
    if _UNKNOWN_SOURCE in code:
        return None
    return lambda leaves: shape_env.evaluate_guards_expression(code, [leaves[p] for p in positions])


_UNKNOWN_SOURCE = "__meta_utils_unknown"   # meta_utils' name for a tensor it was given no source for
