"""The on-disk compile cache: a warm start runs a compiled entry without tracing or planning.

The pipeline makes one call to look an entry up (``lookup``) and, on a miss, one to store
it (``CacheRequest.save``). Keys: Note [Cache key] (key.py) and Note [Source fingerprint]
(fingerprint.py); entries: Note [Cache entry format] (serialize.py); files: Note [Cache
storage] (store.py). What cannot be keyed stably bypasses the cache, its reason logged
once on the ``jointgraph.cache`` logger.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import torch

from .fingerprint import Unhashable, fingerprint
from .key import entry_key, graph_source
from .serialize import dumps, entry_payload, loads, restore
from .store import DiskStore, cache_option_from_env, default_dir, log
from .symbolic import StableNames, add_guards, guards_here, is_symbolic, stable_guards
from .vals import ValMaker

# Bypass reasons already logged by this process: each is logged once.
_REPORTED: set[str] = set()


def open_store(cache: bool | str | os.PathLike) -> DiskStore | None:
    """The store the ``cache`` option names: None (off), the default directory, or a directory."""
    if cache is False:
        return None
    return DiskStore(default_dir() if cache is True else Path(cache))


def function_source(fn: Any) -> str | Unhashable:
    """``fingerprint(fn)``, or the reason it has none."""
    try:
        return fingerprint(fn)
    except Unhashable as exc:
        return exc


def dynamo_source(gm: torch.fx.GraphModule) -> str | Unhashable:
    try:
        return graph_source(gm)
    except Unhashable as exc:
        return exc


@dataclasses.dataclass
class CacheRequest:
    """One key in one store; ``save`` stores what a miss compiled. For symbolic sizes (Note
    [Cached symbolic sizes]): ``fakes`` the fake graph inputs to trace on, ``fake_mode`` theirs,
    ``names`` their symbols' stable names read before the trace, ``guards_from`` the ShapeEnv's
    guard count then."""

    store: DiskStore
    key: str
    fakes: list | None = None
    fake_mode: Any = None
    names: StableNames | None = None
    guards_from: int = 0

    def save(self, plan, layout) -> None:
        start = time.perf_counter()
        try:
            guards = None
            if self.names is not None:
                guards = stable_guards(self.fake_mode.shape_env, self.guards_from, self.names)
            body = dumps(entry_payload(plan, layout, self.names, guards))
        except Unhashable as exc:
            bypass(self.store, str(exc), self.key)
            return
        try:
            self.store.write(self.key, body)
        except OSError as exc:
            log.warning("jointgraph cache: cannot write %s (%s)", self.store.path(self.key), exc)
            return
        plan.timings["cache_store"] = time.perf_counter() - start
        self.store.record("store", self.key, f"{len(body)}")


@dataclasses.dataclass
class CacheHit:
    """A loaded entry; ``fakes``: for symbolic sizes, the fake graph inputs its ShapeEnv guards."""

    plan: Any
    layout: Any
    fakes: list | None = None


def lookup(cache, source, signature, tensors: list, options, *, dynamic: bool, saved_hooks, ambient: tuple,
           fakes: list | None = None, resharding=None) -> tuple[CacheRequest | None, CacheHit | None]:
    """(request, the entry on a hit else None). The request is None when the cache is off or
    bypassed (the reason logged once). ``fakes``: the fake graph inputs when the caller has them
    (Dynamo); under ``dynamic`` they are made here (Note [Cached symbolic sizes])."""
    store = open_store(cache)
    if store is None or source is None:
        return None, None
    try:
        if isinstance(source, Unhashable):
            raise source
        from ..ir import Role

        if Role.CAPTURED in signature.roles:
            raise Unhashable("the function captures tensors (Note [Captured tensors]): they are found by tracing")
        if dynamic and fakes is None:
            fakes = _symbolic_fakes(tensors)
        symbolic = fakes if fakes is not None and is_symbolic(fakes) else None
        names = StableNames(symbolic) if symbolic is not None else None
        fake_mode = _fake_mode_of(symbolic) if symbolic is not None else None
        key = entry_key(source, signature, tensors, options, symbolic=names and names.form(symbolic), dynamic=dynamic,
                        saved_hooks=saved_hooks, grad_enabled=torch.is_grad_enabled(), ambient=ambient,
                        resharding=resharding)
    except Unhashable as exc:
        bypass(store, str(exc))
        return None, None
    shape_env = fake_mode.shape_env if fake_mode is not None else None
    request = CacheRequest(store, key, symbolic, fake_mode, names, len(shape_env.guards) if names is not None else 0)
    start = time.perf_counter()
    body = store.read(key)
    if body is None:
        store.record("miss", key)
        return request, None
    try:
        payload = loads(body)
        guards = guards_here(payload["guards"], names, shape_env) if names is not None else []
        if guards is None:   # an isomorphic graph whose trace guarded on a size this call's sizes fail
            store.record("miss", key, "a stored guard fails on these sizes")
            return request, None
        plan, layout = restore(payload, options, ValMaker(fake_mode, names))
        add_guards(guards, shape_env)
    except Exception as exc:  # noqa: BLE001 - an entry that does not load is a miss, rewritten
        log.warning("jointgraph cache: ignoring entry %s: it does not load (%s); it is recompiled and rewritten",
                    store.path(key), exc)
        store.record("corrupt", key, type(exc).__name__)
        return request, None
    plan.timings["cache_load"] = time.perf_counter() - start
    store.record("hit", key)
    return request, CacheHit(plan, layout, symbolic)


def _symbolic_fakes(tensors: list) -> list:
    """The graph inputs fake-ified with symbolic sizes, as the trace of a miss makes them."""
    from ..capture.inputs import fakeify
    from ..capture.unbacked import make_fake_mode

    return fakeify(tensors, make_fake_mode(dynamic=True), dynamic=True)


def _fake_mode_of(values: list):
    """The fake mode holding the symbolic sizes of ``values``; Unhashable when none is found."""
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(values)
    if fake_mode is None or fake_mode.shape_env is None:
        raise Unhashable("the symbolic sizes of the inputs belong to no fake mode with a ShapeEnv")
    return fake_mode


def bypass(store: DiskStore | None, reason: str, key: str = "") -> None:
    if reason not in _REPORTED:
        _REPORTED.add(reason)
        log.info("jointgraph cache bypassed: %s", reason)
    if store is not None:
        store.record("bypass", key, reason)


__all__ = ["CacheRequest", "DiskStore", "Unhashable", "bypass", "cache_option_from_env", "default_dir",
           "dynamo_source", "function_source", "lookup", "open_store"]
