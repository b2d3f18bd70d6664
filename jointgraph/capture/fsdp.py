"""Which graph inputs FSDP2 frees between the forward and the backward.

Note [Inputs the caller reshards]
---------------------------------
With ``fully_shard`` on a block (and ``reshard_after_forward``, the default for every
module but the root), FSDP2 all-gathers the block's parameters right before its forward
into *unsharded parameters*, frees their storage (``resize_(0)``) once the forward returns,
and all-gathers them again right before the block's backward. A compiled block receives
those unsharded parameters as plain graph inputs, so the plan would count them live for
the whole step ("already live") and count them in what is live before the step starts.

An input is *resharded* when its storage is the storage of an unsharded parameter of an
FSDP2 parameter group that reshards after the forward. It is found by identity, not by
name: every live FSDP2 state (``torch.distributed._composable_state``'s module-to-state
map, the registry ``fully_shard`` itself uses) lists its parameter groups, each group says
whether it reshards after the forward (``post_forward_mesh_info``) and holds its
``FSDPParam``s, each with its unsharded parameter.

FSDP2 fills a group's unsharded parameters from one flat all-gather output (every rank's
padded shard; none on one rank). With a synchronous all-gather (gloo; NCCL without
prefetching streams is the same) it keeps that buffer through the forward, to free it after
the next all-gather's copy-out or at the root's post-forward, and frees it right after the
copy-out in the backward. ``Resharding.gather_bytes`` is its size.

The entry points (``aot_function`` / ``aot_module`` and the ``torch.compile`` backend) read
a ``Resharding`` off the real inputs at compile time and hand it to ``build_plan``,
which passes it to the simulator and the budget planner. The simulator (Note [Memory simulation model]) counts those
inputs and the buffer as the caller's: gathered at the forward's entry, freed after it,
gathered again for the backward; the budget planner verifies its candidates with that same
simulator. It changes no graph and nothing at run time: FSDP2's hooks free and gather,
outside our graphs. It is part of the cache key (a plan's timeline depends on it). Dynamo
shares one compiled graph among the instances of a block class (its guards do not look at
FSDP's state), so that graph's plan describes the block it was compiled for: with FSDP2
applied the same way to every block, as usual, it describes them all.

Only FSDP2's private state says which tensors these are; if a PyTorch release renames it,
no input is found resharded (the plan then counts them live all step, as before) and a
test fails (tests/test_fsdp_memory.py), never a result.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.multiprocessing.reductions import StorageWeakRef

from ..ir import NO_RESHARDING, Resharding

_FSDP_STATE_MODULE = "torch.distributed.fsdp._fully_shard._fsdp_state"


def resharding_of(tensors: Sequence) -> Resharding:
    """Which of ``tensors`` (real graph inputs) are FSDP2 unsharded parameters freed after the forward
    and gathered again before the backward, and the bytes of the all-gather output they are filled
    from (Note [Inputs the caller reshards])."""
    if _FSDP_STATE_MODULE not in sys.modules:   # FSDP2 never imported: no fully_shard module exists
        return NO_RESHARDING
    position: dict[StorageWeakRef, list[int]] = {}
    for i, t in enumerate(tensors):
        storage = _storage(t) if isinstance(t, torch.Tensor) and not is_fake(t) else None
        if storage is not None:
            position.setdefault(storage, []).append(i)
    if not position:
        return NO_RESHARDING
    inputs: set[int] = set()
    gather_bytes = 0
    for group in _resharded_groups():
        found = [position.get(storage) for p in _unsharded_params(group) if (storage := _storage(p)) is not None]
        if any(found):
            inputs.update(i for hits in found if hits for i in hits)
            gather_bytes += _gather_buffer_bytes(group)
    return Resharding(frozenset(inputs), gather_bytes)


def _resharded_groups() -> list:
    """The parameter groups of every live FSDP2 state that reshard after the forward."""
    from torch.distributed._composable_state import _module_state_mapping
    from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState

    groups = []
    for ref in list(_module_state_mapping.values()):
        state = ref()
        if isinstance(state, FSDPState):
            groups += [g for g in getattr(state, "_fsdp_param_groups", ())
                       if getattr(g, "post_forward_mesh_info", None) is not None]
    return groups


def _unsharded_params(group) -> list[torch.Tensor]:
    params = (getattr(p, "_unsharded_param", None) for p in group.fsdp_params)
    return [p for p in params if isinstance(p, torch.Tensor) and not is_fake(p)]


def _gather_buffer_bytes(group) -> int:
    """The one flat all-gather output FSDP2 fills the group's unsharded parameters from: every rank's
    padded shard. On one rank there is none (the parameters are initialized from the shards)."""
    world = getattr(getattr(group, "mesh_info", None), "shard_mesh_size", 1)
    if world <= 1:
        return 0
    total = 0
    for param in group.fsdp_params:
        shard = param._sharded_param_data
        dtype = getattr(param, "param_dtype", None) or shard.dtype
        total += shard.numel() * dtype.itemsize
    return total * world


def _storage(t: torch.Tensor) -> StorageWeakRef | None:
    try:
        return StorageWeakRef(t.untyped_storage())
    except (RuntimeError, NotImplementedError):   # a tensor subclass without a storage of its own (DTensor)
        return None
