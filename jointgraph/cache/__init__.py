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
    """One key in one store; ``save`` stores what a miss compiled."""

    store: DiskStore
    key: str

    def save(self, plan, layout) -> None:
        start = time.perf_counter()
        try:
            body = dumps(entry_payload(plan, layout))
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


def lookup(cache, source, signature, tensors: list, options, *, dynamic: bool, saved_hooks,
           ambient: tuple, resharding=None) -> tuple[CacheRequest | None, Any]:
    """(request, (Plan, EntryLayout) on a hit else None). The request is None when the cache is
    off or bypassed (the reason logged once)."""
    store = open_store(cache)
    if store is None or source is None:
        return None, None
    try:
        if isinstance(source, Unhashable):
            raise source
        from ..ir import Role

        if Role.CAPTURED in signature.roles:
            raise Unhashable("the function captures tensors (Note [Captured tensors]): they are found by tracing")
        key = entry_key(source, signature, tensors, options, dynamic=dynamic, saved_hooks=saved_hooks,
                        grad_enabled=torch.is_grad_enabled(), ambient=ambient, resharding=resharding)
    except Unhashable as exc:
        bypass(store, str(exc))
        return None, None
    request = CacheRequest(store, key)
    start = time.perf_counter()
    body = store.read(key)
    if body is None:
        store.record("miss", key)
        return request, None
    try:
        plan, layout = restore(loads(body), options)
    except Exception as exc:  # noqa: BLE001 - an entry that does not load is a miss, rewritten
        log.warning("jointgraph cache: ignoring entry %s: it does not load (%s); it is recompiled and rewritten",
                    store.path(key), exc)
        store.record("corrupt", key, type(exc).__name__)
        return request, None
    plan.timings["cache_load"] = time.perf_counter() - start
    store.record("hit", key)
    return request, (plan, layout)


def bypass(store: DiskStore | None, reason: str, key: str = "") -> None:
    if reason not in _REPORTED:
        _REPORTED.add(reason)
        log.info("jointgraph cache bypassed: %s", reason)
    if store is not None:
        store.record("bypass", key, reason)


__all__ = ["CacheRequest", "DiskStore", "Unhashable", "bypass", "cache_option_from_env", "default_dir",
           "dynamo_source", "function_source", "lookup", "open_store"]
