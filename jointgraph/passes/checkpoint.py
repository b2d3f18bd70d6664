"""Honour activation checkpointing: recompute regions, keep their boundaries, replay their randomness.

Note [Activation checkpointing]
-------------------------------
Checkpointed regions reach the joint graph in two forms.

* Through ``aot_function`` / ``aot_module``, ``torch.utils.checkpoint`` (non-reentrant,
  with or without a selective policy) runs for real while the backward is traced, so
  the region's recomputation appears as backward-phase nodes (Note [Phases]) that
  repeat forward nodes: *twins*. The partitioners keep backward work in the backward,
  so the recomputation stays where the user put it. A twin of a random op would draw
  fresh randomness at run time; it is rewritten to replay the forward's RNG state
  (``run_and_save_rng_state`` in the forward, ``run_with_rng_state`` in the backward),
  which is what ``preserve_rng_state=True`` promises. Twins pair by op and arguments: where
  several forward draws look alike (``torch.rand(4, 8)`` in two regions) the backward, which
  recomputes the last region first, cannot tell whose draw it replays, and refuses by name.
  The forward values twins read (the region's inputs, what eager's checkpoint keeps) are
  tagged to be saved. Through ``aot_module``, or ``aot_function`` over a module it closes
  over, the recomputation reads the module's parameters again after ``functional_call`` (or
  ``CaptureMode``) let them go: ``RealInputs`` (capture/captured.py) keeps them the graph's
  inputs while the backward is traced.
* Through ``torch.compile``, Dynamo wraps a region in ``tag_activation_checkpoint``. PyTorch's
  own path caches every op's result while compiling, and refuses an in-place op on one
  (``nn.ReLU(inplace=True)`` after a ``Linear``), which eager's recomputation runs: such a
  graph is traced again with its regions without a ``context_fn`` in the first form
  (jointgraph/dynamo.py, ``_checkpointed_regions_as_eager``). Otherwise, and for a region with
  a selective policy, PyTorch's path stands: tracing it tags the region's forward nodes with
  ``meta["recompute"]`` (a ``CheckpointPolicy``) and an ``ac_graph_id``. The partitioners recompute nodes
  tagged MUST/PREFER_RECOMPUTE and save nodes tagged MUST/PREFER_SAVE. A region's
  node read by a forward node outside its region is the boundary between two regions
  (or a region and the rest): it is retagged to be saved, so a later region's
  recomputation does not recompute the earlier region too. A random node tagged for
  recompute gets a replaying backward twin, so recomputation never changes randomness.
"""

from __future__ import annotations

import operator

import torch
import torch.fx
from torch._prims.rng_prims import run_and_save_rng_state, run_with_rng_state
from torch.utils.checkpoint import CheckpointPolicy

from ..errors import UnsupportedError
from ..ir.graph_utils import is_random
from .cse import _freeze

_BACKWARD = "backward"


def honour_checkpoints(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Apply Note [Activation checkpointing] to a joint graph.

    Expects: a joint graph with ``meta["phase"]`` on backward nodes and, for Dynamo
    regions, ``meta["recompute"]`` tags. Guarantees: every random op that will run
    again in the backward replays the forward's RNG state; region boundaries are
    tagged to be saved; values are unchanged.
    """
    graph = gm.graph
    changed = False
    if any(_is_backward(n) for n in graph.nodes):   # twins exist only with a backward
        changed = _replay_random_twins(graph)
    if any("recompute" in n.meta for n in graph.nodes):
        changed |= _tagged_regions(graph)
    if changed:
        graph.lint()
        gm.recompile()
    return gm


def _is_backward(node: torch.fx.Node) -> bool:
    return node.meta.get("phase") == _BACKWARD


def _replay_random_twins(graph: torch.fx.Graph) -> bool:
    """Match backward recomputation to forward nodes; make random twins replay the forward's RNG."""
    originals: dict[tuple, list[torch.fx.Node]] = {}
    twin_of: dict[torch.fx.Node, torch.fx.Node] = {}
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        key = _key(node, twin_of)
        if key is None:
            continue
        if not _is_backward(node):
            originals.setdefault(key, []).append(node)
            continue
        candidates = originals.get(key)
        if not candidates:
            continue
        if is_random(node) and len(candidates) > 1:
            # Several forward draws look alike (``torch.rand(4, 8)`` in each region, dropout of one input in two
            # regions): the backward recomputes the regions last first, and nothing here tells whose draw this
            # is, so a guess would replay another region's mask (review of 86c7fd8: silently wrong gradients)
            raise UnsupportedError(
                f"a random op ({node.target}) recomputed in the backward has {len(candidates)} forward draws with "
                "the same arguments (in several checkpointed regions, or in and outside one): which one it must "
                "replay is not known", hint="give each region's random op distinct arguments (a generator, or an "
                "input of the region), compile with torch.compile(backend=\"jointgraph\"), or pass "
                'on_unsupported="eager"')
        original = candidates.pop(0) if is_random(node) else candidates[0]
        twin_of[node] = original
        for arg in node.all_input_nodes:
            if not _is_backward(arg) and arg.op == "call_function" and "recompute" not in arg.meta:
                arg.meta["recompute"] = CheckpointPolicy.PREFER_SAVE   # the region's input: keep it
        if is_random(node):
            state, _ = _save_rng_state(graph, original)
            with graph.inserting_before(node):
                replay = graph.call_function(run_with_rng_state, (state, node.target, *node.args), node.kwargs)
            replay.meta.update(node.meta)
            node.replace_all_uses_with(replay)
            graph.erase_node(node)
            twin_of[replay] = original
            changed = True
    return changed


def _key(node: torch.fx.Node, twin_of: dict) -> tuple | None:
    def mapped(value):
        if isinstance(value, torch.fx.Node):
            return twin_of.get(value, value)
        if isinstance(value, (list, tuple)):
            return type(value)(mapped(v) for v in value)
        return value

    try:
        key = (node.target, _freeze(mapped(node.args)), _freeze(mapped(node.kwargs)))
        hash(key)
    except TypeError:
        return None
    return key


def _save_rng_state(graph: torch.fx.Graph, random_node: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node]:
    """Rewrite a forward random node to also return the RNG state it drew from.

    Returns (state, value): the saved generator state and the node now holding the value.
    """
    val = random_node.meta["val"]
    example = val[0] if isinstance(val, (tuple, list)) else val
    with graph.inserting_before(random_node):
        pair = graph.call_function(run_and_save_rng_state, (random_node.target, *random_node.args),
                                   random_node.kwargs)
        state = graph.call_function(operator.getitem, (pair, 0))
        value = graph.call_function(operator.getitem, (pair, 1))
    state_val = _state_like(example)
    pair.meta.update(random_node.meta)
    pair.meta["val"] = (state_val, val)
    state.meta["val"] = state_val
    value.meta.update(random_node.meta)
    for new in (pair, state):
        new.meta.pop("recompute", None)
    state.meta["recompute"] = CheckpointPolicy.MUST_SAVE
    random_node.replace_all_uses_with(value)
    graph.erase_node(random_node)
    return state, value


def _state_like(example: torch.Tensor) -> torch.Tensor:
    """A fake generator-state tensor for ``example``'s device, as run_and_save_rng_state returns."""
    real = torch.cuda.get_rng_state() if example.device.type == "cuda" else torch.get_rng_state()
    mode = example.fake_mode if hasattr(example, "fake_mode") else None
    if mode is None:
        return real
    with mode:
        return torch.empty(real.shape, dtype=real.dtype)


def _policy(node: torch.fx.Node):
    return node.meta.get("recompute")


def _tagged_regions(graph: torch.fx.Graph) -> bool:
    """Dynamo regions: keep boundaries, and give random recomputed nodes replaying twins."""
    recompute = (CheckpointPolicy.MUST_RECOMPUTE, CheckpointPolicy.PREFER_RECOMPUTE)
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or _is_backward(node) or _policy(node) not in recompute:
            continue
        region = node.meta.get("ac_graph_id")
        outside = [u for u in node.users if u.op == "call_function" and not _is_backward(u)
                   and (_policy(u) not in recompute or u.meta.get("ac_graph_id") != region)]
        if outside and node.target is not operator.getitem:
            node.meta["recompute"] = CheckpointPolicy.PREFER_SAVE
        elif is_random(node):
            _replace_backward_uses_with_replay(graph, node)
            changed = True
    return changed


def _replace_backward_uses_with_replay(graph: torch.fx.Graph, node: torch.fx.Node) -> None:
    backward_users = [u for u in node.users if _is_backward(u)]
    element_users = [u for u in node.users if u.target is operator.getitem and not _is_backward(u)]
    if not backward_users and not any(_is_backward(v) for u in element_users for v in u.users):
        return
    target, args, kwargs, meta = node.target, node.args, node.kwargs, dict(node.meta)
    state, value = _save_rng_state(graph, node)
    first_backward = next(n for n in graph.nodes if _is_backward(n))
    with graph.inserting_before(first_backward):
        replay = graph.call_function(run_with_rng_state, (state, target, *args), kwargs)
    replay.meta.update(meta)
    replay.meta["phase"] = _BACKWARD
    replay.meta.pop("recompute", None)
    for user in list(value.users):
        if _is_backward(user):
            user.replace_input_with(value, replay)
        elif user.target is operator.getitem:
            with graph.inserting_after(replay):
                element = graph.call_function(operator.getitem, (replay, user.args[1]))
            element.meta.update(user.meta)
            element.meta["phase"] = _BACKWARD
            element.meta.pop("recompute", None)
            for consumer in list(user.users):
                if _is_backward(consumer):
                    consumer.replace_input_with(user, element)
