"""Peak-memory simulator of one training step (forward graph, then backward graph).

Note [Memory simulation model]
------------------------------
Bytes are counted per *storage*, as the caching allocator sees them:

- A view op (its schema's first return carries alias info, e.g. ``aten.view``,
  ``aten.t``, ``aten.expand``, ``aten.split``) and ``aten._unsafe_view`` allocate
  nothing: their output shares its input's storage. A multi-output node owns one
  storage per tensor element; ``getitem`` aliases the element.
- A fresh storage is live from the node that creates it until the last use of
  every node aliasing it (FX codegen drops each value after its last use; the
  backward is boxed, so saved tensors are freed as they are consumed).
- Graph inputs (parameters, primals, buffers) are held by the caller: live all
  step, never freed, at the bytes their storage has at entry (a parameter FSDP2 freed,
  0 bytes, costs nothing until the graph fills it). Saved tensors that are (views of)
  inputs cost nothing extra. ``entry_bytes`` is what they hold before the step starts.
- *Resharded* inputs (Note [Inputs the caller reshards] in capture/fsdp.py) are not held:
  the caller gathers them right before the forward (bytes above ``entry_bytes``; its
  all-gather buffer, kind ``communication``, lives through the forward), frees them and the
  buffer when the forward ends, saved or not, and gathers them again right before the
  backward (the buffer freed right after), where they live to the end of the step. Timeline
  entries ``RESHARDED_GATHERED`` (first in each phase) and ``RESHARDED_FREED`` (after the
  forward's last node) show them arrive and leave.
- A node that allocates is counted at its extent (shape, strides, offset), not at its fake
  storage's current size: the fill of a freed parameter (``copy`` into it) is a full tensor.
- Forward outputs stay live to the end of the forward. Saved tensors carry their
  storage into the backward. User outputs and mutated-input values are dropped
  when the backward starts (simplification: the user's loss is small), and the
  tangents are allocated in their place.
- Gradients (backward outputs) start absent (``zero_grad(set_to_none=True)``)
  and stay live to the end of the step.
- A timeline entry is the live bytes right after the node ran: its output is
  allocated and inputs whose last use it was are not freed yet, which is the
  high-water mark of that node. ``peak_bytes`` is the maximum over the timeline.
- Workspace memory inside an op is not counted.
- With Inductor as a graph's compiler (``compilers``), a pointwise node whose every user is a
  pointwise or reduction node of the same graph, and which is no graph output, is fused into
  its consumers: it allocates nothing, and its inputs live until its consumers' last use
  (Note [Inductor's fused buffers]).
- ``timeline_by_kind`` splits each entry's live bytes by what the storage is for the step:
  ``inputs`` (parameters, primals, buffers), ``communication`` (the caller's all-gather
  buffer), ``gradients`` (backward outputs), ``saved``
  (storages that carry a saved value into the backward, counted as saved from their
  allocation in the forward) and ``temporaries`` (everything else: intermediates, user
  outputs, tangents). The kinds of an entry sum to its live bytes.
"""

from __future__ import annotations

import dataclasses
import functools
import operator

import torch
import torch.fx

from ..ir import NO_RESHARDING, Resharding, Role
from ..ir.graph import output_node
from ..ir.graph_utils import is_pointwise, shares_storage, tensor_bytes
from ..ir.sizes import extent, size_hint

MEMORY_KINDS = ("inputs", "communication", "gradients", "saved", "temporaries")
# Timeline entries of the caller's resharding (Note [Inputs the caller reshards] in capture/fsdp.py)
RESHARDED_GATHERED = "resharded inputs gathered"
RESHARDED_FREED = "resharded inputs freed"


@dataclasses.dataclass
class SimulationResult:
    """Simulated peak and the live bytes after each node: (phase, node name, bytes).

    ``timeline_by_kind[i]`` splits ``timeline[i]``'s bytes by ``MEMORY_KINDS``."""

    peak_bytes: int
    timeline: list[tuple[str, str, int]]
    timeline_by_kind: list[dict[str, int]] = dataclasses.field(default_factory=list)
    entry_bytes: int = 0        # live before the step: the inputs the caller holds
    resharded_bytes: int = 0    # inputs the caller gathers for the forward and again for the backward
    gather_bytes: int = 0       # the caller's all-gather buffer, counted with them (0 when none is gathered)


class _Storage:
    """One allocation. ``pinned`` storages are never freed within the current phase."""

    __slots__ = ("kind", "nbytes", "pinned")

    def __init__(self, nbytes: int, pinned: bool = False, kind: str = "temporaries"):
        self.nbytes = nbytes
        self.pinned = pinned
        self.kind = kind


class _Ledger:
    """Live bytes, with every allocation and free logged so the kinds can be split afterwards
    (a storage's kind is known only once the step is over)."""

    def __init__(self) -> None:
        self.live = 0
        self.events: list[tuple[_Storage, int]] = []
        self.marks: list[int] = []   # len(events) when each timeline entry was recorded

    def alloc(self, storage: _Storage) -> None:
        self.live += storage.nbytes
        self.events.append((storage, storage.nbytes))

    def free(self, storage: _Storage) -> None:
        self.live -= storage.nbytes
        self.events.append((storage, -storage.nbytes))

    def record(self, timeline: list, phase: str, name: str) -> None:
        timeline.append((phase, name, self.live))
        self.marks.append(len(self.events))

    def by_kind(self) -> list[dict[str, int]]:
        totals = dict.fromkeys(MEMORY_KINDS, 0)
        out, done = [], 0
        for mark in self.marks:
            for storage, delta in self.events[done:mark]:
                totals[storage.kind] += delta
            done = mark
            out.append(dict(totals))
        return out


def simulate(forward: torch.fx.GraphModule, backward: torch.fx.GraphModule | None,
             compilers: tuple[str, str] = ("eager", "eager"), *,
             resharding: Resharding = NO_RESHARDING) -> SimulationResult:
    """Simulate one training step whose (forward, backward) graphs ``compilers`` run, the inputs
    ``resharding`` names freed by the caller between them; see Note [Memory simulation model]."""
    timeline: list[tuple[str, str, int]] = []
    storage_of: dict = {}
    ledger = _Ledger()
    gathered: list[_Storage] = []   # the resharded inputs' storages
    for node in forward.graph.nodes:
        if node.op == "placeholder":
            for key, nbytes in _tensor_parts(node, allocates=False):
                storage_of[key] = _Storage(nbytes, pinned=True, kind="inputs")
                ledger.alloc(storage_of[key])
                if node.meta.get("input_index") in resharding.inputs:
                    gathered.append(storage_of[key])
    gather = _Storage(resharding.gather_bytes if gathered else 0, kind="communication")
    entry = ledger.live - sum(s.nbytes for s in gathered)
    if gathered:   # the caller's all-gather: its buffer lives through the forward
        ledger.alloc(gather)
        ledger.record(timeline, "forward", RESHARDED_GATHERED)
    input_storages = {id(s) for s in storage_of.values()}
    fw_out = output_node(forward.graph)
    fw_values = list(fw_out.args[0])
    kept = _run_graph(forward.graph, "forward", storage_of, ledger, timeline,
                      keep=[v for v in fw_values if isinstance(v, torch.fx.Node)], compiler=compilers[0])
    result = functools.partial(SimulationResult, entry_bytes=entry, resharded_bytes=sum(s.nbytes for s in gathered),
                               gather_bytes=gather.nbytes)
    if backward is None:
        return result(_peak(timeline, ledger.live), timeline, ledger.by_kind())

    saved_nodes = [v for v, r in zip(fw_values, fw_out.meta["roles"], strict=True) if r is Role.SAVED_TENSOR]
    saved_storages = {id(storage_of[v]) for v in saved_nodes if v in storage_of}
    for storage in kept:  # user outputs / mutated inputs: dropped when the backward starts
        if id(storage) in saved_storages and id(storage) not in input_storages:
            storage.kind = "saved"
        elif id(storage) not in input_storages:
            ledger.free(storage)
    if gathered:   # freed after the forward, saved or not
        for storage in [*gathered, gather]:
            ledger.free(storage)
        ledger.record(timeline, "forward", RESHARDED_FREED)
    bw_storage = _backward_inputs(backward.graph, iter(saved_nodes), storage_of, ledger)
    if gathered:   # gathered again before the backward; the buffer is freed after the copy-out
        for storage in [*gathered, gather]:
            ledger.alloc(storage)
        ledger.record(timeline, "backward", RESHARDED_GATHERED)
        ledger.free(gather)
    for storage in bw_storage.values():
        storage.pinned = id(storage) in input_storages
    bw_values = [v for v in output_node(backward.graph).args[0] if isinstance(v, torch.fx.Node)]
    gradients = _run_graph(backward.graph, "backward", bw_storage, ledger, timeline, keep=bw_values,
                           compiler=compilers[1])
    for storage in gradients:
        if id(storage) not in input_storages:
            storage.kind = "gradients"
    return result(_peak(timeline, ledger.live), timeline, ledger.by_kind())


def _backward_inputs(graph: torch.fx.Graph, saved_sources, storage_of: dict, ledger: _Ledger) -> dict:
    """Storages of the backward's placeholders: a saved tensor carries its forward storage, a
    tangent is allocated (saved sizes have no storage)."""
    bw_storage: dict = {}
    for node in graph.nodes:
        if node.op != "placeholder":
            continue
        if node.meta.get("role") is Role.SAVED_TENSOR:
            source = next(saved_sources)
            if source in storage_of:
                bw_storage[node] = storage_of[source]
        else:
            for key, nbytes in _tensor_parts(node, allocates=False):
                bw_storage[key] = _Storage(nbytes)
                ledger.alloc(bw_storage[key])
    return bw_storage


def _peak(timeline: list, live: int) -> int:
    return max([live, *(entry[2] for entry in timeline)])


def _run_graph(graph: torch.fx.Graph, phase: str, storage_of: dict, ledger: _Ledger, timeline: list,
               *, keep: list, compiler: str = "eager") -> list[_Storage]:
    """Walk ``graph`` in order, allocating and freeing storages; storages of ``keep`` stay live.
    Returns the kept storages."""
    nodes = list(graph.nodes)
    index = {node: i for i, node in enumerate(nodes)}
    fused = fused_nodes(graph) if compiler == "inductor" else set()
    created = {node: [] if node in fused else _assign_storage(node, storage_of)
               for node in nodes if node.op == "call_function"}
    # Each storage dies at the last use of any node aliasing it; a fused node's use is its consumers'.
    last_use: dict = {}
    for node in reversed(nodes):
        last_use[node] = max((last_use[u] if u in fused else index[u] for u in node.users if u.op != "output"),
                             default=index[node])
    death: dict[int, tuple[int, _Storage]] = {}
    for node in nodes:
        if node.op == "output":
            continue
        last = last_use[node]
        for key in _keys(node):
            storage = storage_of.get(key)
            if storage is not None and last >= death.get(id(storage), (-1, None))[0]:
                death[id(storage)] = (last, storage)
    kept = {id(storage_of[k]): storage_of[k] for v in keep for k in _keys(v) if k in storage_of}
    frees: list[list[_Storage]] = [[] for _ in nodes]
    for sid, (last, storage) in death.items():
        if not storage.pinned and sid not in kept:
            frees[last].append(storage)
    for i, node in enumerate(nodes):
        if node.op == "call_function":
            for storage in created[node]:
                ledger.alloc(storage)
            ledger.record(timeline, phase, node.name)
        for storage in frees[i]:
            ledger.free(storage)
    return list(kept.values())


# Note [Inductor's fused buffers]
# -------------------------------
# Inductor lowers a pointwise op to a loop body that its consumers inline: the value is
# never stored unless something forces it into a buffer — being a graph output, or being
# read by an op that is not a loop Inductor generates (a matmul, a view handed to one,
# an op it falls back to). The simulator models the common case: a pointwise node whose
# users are all pointwise or reductions is fused (no buffer). Everything else allocates,
# as it does eagerly. Buffer reuse changes no live bytes and is not modelled; in-place
# reuse of a dying input makes Inductor's peak at most the simulated one.

def fused_nodes(graph: torch.fx.Graph) -> set:
    """The nodes Note [Inductor's fused buffers] models as fused into their consumers."""
    outputs = set(output_node(graph).all_input_nodes)
    return {node for node in graph.nodes if node.op == "call_function" and node not in outputs
            and is_pointwise(node) and node.users and all(is_pointwise(u) or _reduction(u) for u in node.users)}


def _reduction(node: torch.fx.Node) -> bool:
    target = node.target
    return (node.op == "call_function" and isinstance(target, torch._ops.OpOverload)
            and torch.Tag.reduction in target.tags)


def _assign_storage(node: torch.fx.Node, storage_of: dict) -> list[_Storage]:
    """Map ``node``'s storage keys to storages; return the storages it allocates."""
    source = _alias_source(node)
    if source is not None:
        if source in storage_of:
            for key in _keys(node):  # every element of a multi-output view (split) aliases the base
                storage_of[key] = storage_of[source]
        return []
    created = []
    for key, nbytes in _tensor_parts(node):
        storage_of[key] = _Storage(nbytes)
        created.append(storage_of[key])
    return created


def _alias_source(node: torch.fx.Node):
    """The storage key ``node``'s output aliases, or None if it allocates."""
    target = node.target
    if target is operator.getitem:
        return (node.args[0], node.args[1])
    if shares_storage(target):
        base = node.args[0]
        return base if isinstance(base, torch.fx.Node) else None
    return None


def _keys(node: torch.fx.Node) -> list:
    """Storage keys of ``node``: the node itself, or ``(node, i)`` per element of a multi-output node."""
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        return [(node, i) for i in range(len(val))]
    return [node]


def _tensor_parts(node: torch.fx.Node, *, allocates: bool = True) -> list[tuple[object, int]]:
    """(storage key, bytes) per tensor ``node`` holds: an allocation's bytes (``allocates``) or
    an input's bytes at entry."""
    val = node.meta.get("val")
    if node.meta.get("offloaded"):   # a host copy (jointgraph.hooks offload): no device bytes
        return [(key, 0) for key in _keys(node)]
    nbytes = allocated_nbytes if allocates else storage_nbytes
    if isinstance(val, torch.Tensor):
        return [(node, nbytes(val))]
    if isinstance(val, (tuple, list)):
        return [((node, i), nbytes(v)) for i, v in enumerate(val) if isinstance(v, torch.Tensor)]
    return []


def allocated_nbytes(val: torch.Tensor) -> int:
    """Bytes a fresh tensor like ``val`` allocates: its storage, or its extent where the fake's
    storage was resized to nothing after it was made (a freed parameter's fill)."""
    nbytes = storage_nbytes(val)
    if nbytes == 0 and val.numel() > 0:
        return _extent_nbytes(val)
    return nbytes


def storage_nbytes(val: torch.Tensor) -> int:
    """Bytes of ``val``'s storage (size hints for symbolic sizes)."""
    try:
        return size_hint(val.untyped_storage().nbytes())
    except (NotImplementedError, RuntimeError, AttributeError):
        return _extent_nbytes(val)


def _extent_nbytes(val: torch.Tensor) -> int:
    """Bytes from the storage's start to one past ``val``'s last element (its elements' bytes
    when it has no strides)."""
    try:
        hinted = ([size_hint(n) for n in val.shape], [size_hint(st) for st in val.stride()],
                  size_hint(val.storage_offset()))
    except (NotImplementedError, RuntimeError, AttributeError):
        return tensor_bytes(val)
    return extent(*hinted) * val.dtype.itemsize
