"""Run the hooks registered inside the compiled function (Note [Hooks inside the function]
in ir/hook_ops.py): on the caller's inputs before each call, and from the backward graph.

Note [Hooks eager does not reach]
---------------------------------
Eager runs a hook on ``y`` only when the backward reaches ``y``: some output that depends
on ``y`` received a gradient, and some input that ``y`` feeds needs one
(``torch.autograd.grad(loss, [x])`` leaves the other inputs' branches alone). The compiled
backward is one node, called with zeros for the outputs the backward never reached; so
an entry with hooks in its graph turns off autograd's zero-filling, fills the zeros
itself, and skips (passes the gradient through) each hook whose tangents were all absent
or whose gradients no input needs (the engine will not execute the node that input's
gradient goes to; where it cannot say, a leaf under ``torch.autograd.grad``, the input is
taken as needed, and the hook runs). Which tangents and inputs
each hook touches is read off the backward graph once, at compile time (``hook_reach``):
by data flow, which is autograd's path unless a backward ignores its gradient (a custom
Function returning constants), where the hook's sets are empty and it always runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
import torch.fx

from ..ir import Role
from ..ir.graph import output_roles, output_values, placeholders, tangent_sources
from ..ir.hook_ops import is_hook_call


@dataclasses.dataclass(frozen=True)
class HookReach:
    """The tangents (positions among the backward's tangents) whose gradient reaches hook
    ``index``, and the graph inputs whose gradient it feeds."""

    index: int
    tangents: tuple[int, ...]
    inputs: tuple[int, ...]


def hook_reach(backward: torch.fx.GraphModule) -> tuple[HookReach, ...]:
    """Per hook call of ``backward`` (a graph from ``split``), what it reaches (Note [Hooks eager
    does not reach])."""
    graph = backward.graph
    calls = [n for n in graph.nodes if is_hook_call(n)]
    if not calls:
        return ()
    from_tangent = tangent_sources(graph)
    feeds: dict[torch.fx.Node, set] = {n: set() for n in graph.nodes}
    for position, (value, role) in enumerate(zip(output_values(graph), output_roles(graph), strict=True)):
        if isinstance(value, torch.fx.Node) and role is Role.GRADIENT:
            feeds[value].add(position)
    for node in reversed(graph.nodes):   # each node passes what it feeds to its inputs
        for source in node.all_input_nodes:
            feeds[source] |= feeds[node]
    return tuple(HookReach(n.args[1], tuple(sorted(from_tangent[n])), tuple(sorted(feeds[n]))) for n in calls)


class HookCalls:
    """The hooks of one backward call: ``run(index, grad)`` is what a hook op does."""

    __slots__ = ("hooks", "skipped")

    def __init__(self, hooks: tuple[Callable, ...], skipped: frozenset[int]):
        self.hooks = hooks
        self.skipped = skipped

    def run(self, index: int, grad: torch.Tensor) -> torch.Tensor:
        if index in self.skipped:
            return grad.clone()
        hook = self.hooks[index]
        return as_gradient(hook(grad), grad, hook)


def skipped_hooks(reach: tuple[HookReach, ...], present: list[bool], needed: set[int]) -> frozenset[int]:
    """Hooks eager would not run: no tangent of theirs is ``present``, or no input they feed is
    ``needed`` (Note [Hooks eager does not reach]). An empty set says nothing (a backward that
    ignores its gradient cuts the data flow, not autograd's path): such a hook runs."""
    return frozenset(r.index for r in reach
                     if r.tangents and not any(present[t] for t in r.tangents)
                     or r.inputs and not any(i in needed for i in r.inputs))


def inputs_needed(next_functions: tuple, edges: tuple[tuple[int, int], ...]) -> set[int]:
    """The graph inputs among ``edges`` (``EntryHooks.edges``) whose gradient the running backward
    needs: the engine executes the node it flows to (``next_functions``: the step node's edges).
    Where the engine cannot say (a leaf under ``torch.autograd.grad``), needed."""
    needed = set()
    for k, i in edges:
        node = next_functions[k][0]
        if node is not None:
            try:
                if _will_execute(node):
                    needed.add(i)
            except RuntimeError:
                needed.add(i)
    return needed


_will_execute = torch._C._will_engine_execute_node


def as_gradient(result, grad: torch.Tensor, hook: Callable) -> torch.Tensor:
    """The gradient after a hook returned ``result`` for ``grad``, with eager's checks on a
    replacement; a fresh tensor with ``grad``'s layout (the op's output never aliases its input)."""
    if result is None:
        return grad.clone()
    name = getattr(hook, "__name__", type(hook).__name__)
    if not isinstance(result, torch.Tensor):
        raise TypeError(f"hook '{name}' returned an incorrect value (expected Tensor or None "
                        f"(got {type(result).__name__}))")
    if result.dtype != grad.dtype or result.device != grad.device:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was {grad.dtype} on {grad.device} "
                           f"got {result.dtype} on {result.device})")
    if result.shape != grad.shape:
        raise RuntimeError(f"hook '{name}' has changed the size of value (was {list(grad.shape)} "
                           f"got {list(result.shape)})")
    if result.stride() != grad.stride() or result.untyped_storage()._cdata == grad.untyped_storage()._cdata:
        return torch.empty_like(grad).copy_(result)
    return result


def register_input_hooks(inputs: list, input_hooks: tuple) -> None:
    """The prologue: each hook the function registered on an input, registered on the caller's
    tensor, as the user's code did (``InputHook`` in capture/hooks_inside.py)."""
    for hook in input_hooks:
        tensor = inputs[hook.input_index]
        if hook.kind == "retain_grad":
            tensor.retain_grad()
        elif hook.kind == "post_accumulate_grad":
            tensor.register_post_accumulate_grad_hook(hook.fn)
        else:
            tensor.register_hook(hook.fn)


@dataclasses.dataclass(frozen=True)
class EntryHooks:
    """A compiled entry's hooks: ``fns[k]`` for hook op ``k``, the input prologue, what each op
    reaches, and ``edges``: (position among the step node's edges, graph input) of each input some
    hook feeds (the node has an edge per tensor input)."""

    fns: tuple[Callable, ...]
    prologue: tuple
    reach: tuple[HookReach, ...]
    edges: tuple[tuple[int, int], ...] = ()


def entry_hooks(table, forward: torch.fx.GraphModule, backward: torch.fx.GraphModule | None) -> EntryHooks | None:
    """The EntryHooks of a trace's HookTable (capture/hooks_inside.py), None without hooks;
    ``forward``'s placeholders are the step node's inputs (the new-leaf slots included)."""
    if not table:
        return None
    reach = hook_reach(backward) if backward is not None else ()
    fed = {i for r in reach for i in r.inputs}
    tensors = [i for i, n in enumerate(placeholders(forward.graph)) if isinstance(n.meta["val"], torch.Tensor)]
    edges = tuple((k, i) for k, i in enumerate(tensors) if i in fed)
    return EntryHooks(tuple(table.hooks), table.prologue(), reach, edges)
