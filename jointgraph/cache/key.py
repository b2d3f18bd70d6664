"""The cache key of a compiled entry: everything that determines it, nothing that varies between runs.

Note [Cache key]
----------------
``entry_key`` is the SHA-256 of:

* the *source*: ``fingerprint(fn)`` for ``aot_function`` / ``aot_module`` (Note [Source
  fingerprint]: code, closure values, globals, module attributes and parameter metadata),
  or ``graph_source(gm)`` for a graph Dynamo handed over (its generated code, the targets it
  calls, the bytes of its tensor constants);
* the graph inputs: per input its shape, strides, storage offset (under symbolic sizes their
  symbolic form over stable names, Note [Cached symbolic sizes]), dtype, device,
  ``requires_grad``, whether it is a leaf, its tensor type, and which inputs share a storage;
  the non-tensor leaves specialized into the graph (by value); the flat signature (leaf
  positions, duplicates, roles, names); which inputs the caller reshards (Note [Inputs the
  caller reshards]: the plan's timeline depends on it);
* the guard state: grad mode, the ambient state of Note [Guards] (default dtype,
  deterministic mode, autocast per device and dtype), static or symbolic;
* every option but ``cache`` itself; a custom ``fw_compiler`` / ``bw_compiler`` needs a
  ``jointgraph.hooks.cache_hash`` mark; a ``SavedTensorPolicy`` by value;
* the ambient saved-tensor hooks by their stable hashes (``jointgraph.hooks.cache_hash``,
  a GraphModule's ``user_cache_hash`` node meta);
* the environment: the Python, torch (version and git revision) and jointgraph versions, a
  digest of jointgraph's own source files (an edited checkout never reads stale entries),
  the entry format, and the properties of each device the inputs live on.

Anything without a stable hash raises ``Unhashable`` with the reason; the caller bypasses.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import operator
import platform
import sys
from pathlib import Path

import torch

from .fingerprint import Unhashable, fingerprint
from .store import FORMAT


@functools.lru_cache(maxsize=1)
def environment() -> tuple:
    """Python, torch and jointgraph versions, and the digest of jointgraph's source files."""
    import jointgraph

    package = Path(jointgraph.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    return (sys.version, torch.__version__, torch.version.git_version, getattr(jointgraph, "__version__", None),
            digest.hexdigest(), FORMAT)


@functools.lru_cache(maxsize=16)
def device_properties(device: str) -> tuple:
    """What code generated for ``device`` may depend on."""
    dev = torch.device(device)
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        return (props.name, props.major, props.minor, props.total_memory, torch.version.cuda)
    if dev.type == "cpu":
        capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: None)()
        return (platform.machine(), capability)
    return (dev.type,)


def tensor_key(tensors: list, symbolic: list | None) -> list:
    """Per graph input: its metadata and which earlier input shares its storage. With ``symbolic``
    (``StableNames.form`` of the inputs of a symbolic compile) the sizes are that form instead
    (Note [Cached symbolic sizes])."""
    storages: dict[int, int] = {}
    key = [symbolic] if symbolic is not None else []
    for i, t in enumerate(tensors):
        if isinstance(t, (torch.SymInt, torch.SymFloat, torch.SymBool)) and symbolic is not None:
            key.append(("symbolic", type(t).__name__))
            continue
        if not isinstance(t, torch.Tensor):
            key.append(("value", fingerprint(t)))
            continue
        sizes = (*t.shape, *t.stride(), t.storage_offset())
        if symbolic is not None:
            sizes = ()
        elif any(not isinstance(s, int) for s in sizes):
            raise Unhashable("an input has symbolic sizes but the compile is static")
        try:
            storage = t.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            storage = id(t)
        shared = storages.setdefault(storage, i) if storage else i
        key.append((sizes, str(t.dtype), str(t.device), t.requires_grad, t.is_leaf, type(t).__name__, shared,
                    device_properties(str(t.device))))
    return key


def options_key(options) -> list:
    key = []
    for field in dataclasses.fields(options):
        if field.name == "cache":
            continue
        value = getattr(options, field.name)
        if callable(value) and not isinstance(value, str):
            stable = getattr(value, "__jointgraph_cache_hash__", None)
            if stable is None:
                raise Unhashable(f"option {field.name} is a custom compiler without a stable hash "
                                 "(mark it with jointgraph.hooks.cache_hash(compiler, key))")
            value = ("cache_hash", stable)
        key.append((field.name, fingerprint(value)))
    return key


def hooks_key(saved_hooks) -> tuple | None:
    if saved_hooks is None:
        return None
    from ..hooks import hook_cache_key

    keys = []
    for which, hook in zip(("pack", "unpack"), saved_hooks, strict=True):
        stable = hook_cache_key(hook)
        if stable is None:
            raise Unhashable(f"the ambient saved-tensor {which} hook {getattr(hook, '__qualname__', hook)!r} has "
                             "no stable hash (mark it with jointgraph.hooks.cache_hash(hook, key))")
        keys.append(stable)
    return tuple(keys)


def entry_key(source: str, signature, tensors: list, options, *, symbolic: list | None, dynamic: bool, saved_hooks,
              grad_enabled: bool, ambient: tuple, resharding=None) -> str:
    """The key of Note [Cache key]; raises ``Unhashable``. ``symbolic``: the symbolic form of the
    inputs of a compile with symbolic sizes (Note [Cached symbolic sizes])."""
    parts = [dynamic,
        environment(), source,
        (signature.num_leaves, signature.tensor_leaf_positions, sorted(signature.duplicate_of.items()),
         [(i, fingerprint(v)) for i, v in sorted(signature.constants.items())], [r.name for r in signature.roles],
         signature.names),
        tensor_key(tensors, symbolic), resharding.key() if resharding else None, grad_enabled, repr(ambient),
        options_key(options), hooks_key(saved_hooks),
    ]
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def graph_source(gm: torch.fx.GraphModule) -> str:
    """The source part of the key for a graph Dynamo captured: its code, targets and constants."""
    digest = hashlib.sha256(gm.code.encode())
    for node in gm.graph.nodes:
        if node.op == "call_module":
            raise Unhashable(f"the Dynamo graph calls submodule {node.target!r}")
        if node.op == "call_function":
            digest.update(fingerprint(node.target).encode())
        elif node.op == "get_attr":
            value = operator.attrgetter(node.target)(gm)
            if not isinstance(value, torch.Tensor) or value.is_sparse:
                raise Unhashable(f"the Dynamo graph holds {type(value).__name__} {node.target!r}")
            flat = value.detach().cpu().contiguous()
            digest.update(repr((node.target, tuple(flat.shape), flat.dtype)).encode())
            digest.update(flat.reshape(-1).view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
    return digest.hexdigest()
