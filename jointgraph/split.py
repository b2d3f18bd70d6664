"""Split a JointGraph into forward and backward GraphModules, given the values to save."""

from __future__ import annotations

import dataclasses

import torch
import torch.fx
from torch.fx.immutable_collections import immutable_list

from .errors import UnsupportedError
from .ir import Decision, Role, SavedValue
from .ir.effects import must_run
from .ir.graph import lazy_graph_module, output_node, placeholders
from .ir.graph_utils import (
    SavedChoice,
    aliases_input,
    ancestors,
    is_symbolic_scalar,
    size_hint,
    storage_root,
    tangent_dependent,
    tensor_bytes,
    unsaved_inputs,
)
from .ir.hook_ops import is_hook_call


@dataclasses.dataclass
class SplitGraphs:
    """Forward and backward graphs of one training step.

    Forward outputs: user tensors, mutated-input values, saved tensors, saved sizes.
    Backward inputs: saved sizes, saved tensors, tangents (boxed: one list).
    Backward outputs: one gradient (or None) per forward input.
    """

    forward: torch.fx.GraphModule
    backward: torch.fx.GraphModule | None
    saved: list[SavedValue]
    num_saved_tensors: int
    num_saved_sizes: int
    hooks_inlined: bool = False   # ambient saved-tensor hooks are in the graphs (jointgraph.hooks)


def split(joint_gm: torch.fx.GraphModule, choices: list[SavedChoice], *, has_backward: bool) -> SplitGraphs:
    """Forward = ancestors of the forward outputs and of the saved values; backward = what the
    gradients need given the saved values and tangents. A forward node the backward needs
    but that is not saved is recomputed in the backward (the caller decided so).
    """
    graph = joint_gm.graph
    out = output_node(graph)
    roles = out.meta["roles"]
    values = list(out.args[0])
    backward_roles = (Role.GRADIENT, Role.BACKWARD_MUTATION)
    fw_values = [v for v, r in zip(values, roles, strict=True) if r not in backward_roles]
    fw_roles = [r for r in roles if r not in backward_roles]
    grad_values = [v for v, r in zip(values, roles, strict=True) if r in backward_roles]
    grad_roles = [r for r in roles if r in backward_roles]

    saved_sizes = [c for c in choices if is_symbolic_scalar(c.node)]
    saved_tensors = [c for c in choices if not is_symbolic_scalar(c.node)]
    input_phs = [n for n in placeholders(graph) if n.meta["role"] is not Role.TANGENT]
    tangent_phs = [n for n in placeholders(graph) if n.meta["role"] is Role.TANGENT]

    # Forward side effects with no users (error checks such as _linalg_check_errors) still run.
    from_tangents = tangent_dependent(graph)
    checks = [n for n in graph.nodes if n.op == "call_function" and not n.users and must_run(n)
              and n.meta.get("phase") != "backward" and n not in from_tangents]
    fw_needed = ancestors([*fw_values, *(c.node for c in choices), *checks])
    fw_outputs = [*fw_values, *(c.node for c in saved_tensors), *(c.node for c in saved_sizes)]
    fw_out_roles = [*fw_roles, *[Role.SAVED_TENSOR] * len(saved_tensors), *[Role.SAVED_SIZE] * len(saved_sizes)]
    forward = _extract(joint_gm, input_phs, fw_needed, fw_outputs, fw_out_roles, stop=set())

    backward = None
    if has_backward:
        bw_inputs = [*(c.node for c in saved_sizes), *(c.node for c in saved_tensors), *tangent_phs]
        stop = set(bw_inputs)
        # A hook whose result nothing reads still runs (Note [Hooks inside the function]).
        hooks = [n for n in graph.nodes if is_hook_call(n) and not n.users]
        bw_needed = _backward_closure([*grad_values, *hooks], stop)
        backward = _extract(joint_gm, bw_inputs, bw_needed, grad_values, grad_roles,
                            stop=stop, input_roles=[Role.SAVED_SIZE] * len(saved_sizes)
                            + [Role.SAVED_TENSOR] * len(saved_tensors) + [Role.TANGENT] * len(tangent_phs))
    stored: dict[torch.fx.Node, str] = {}   # storage root -> the saved value that pays for it
    saved = [_saved_value(c, stored) for c in [*saved_tensors, *saved_sizes]]
    if has_backward:
        saved += _recomputed_values(graph, bw_needed, stop, from_tangents)
    return SplitGraphs(forward, backward, saved, len(saved_tensors), len(saved_sizes))


def _recomputed_values(graph: torch.fx.Graph, bw_needed: set, stop: set, tangent_side: set) -> list[SavedValue]:
    """The forward values the backward recomputes instead of receiving (decision RECOMPUTE).

    Listed are the recomputed nodes a backward computation reads directly, each with
    the saved values its recompute chain starts from (the backward inputs reached from
    it without passing through another backward input).
    """
    order = [n for n in graph.nodes if n in bw_needed]
    # sources[n]: the backward inputs n's recompute chain reads, in one pass in graph order.
    sources: dict[torch.fx.Node, frozenset] = {}
    empty: frozenset = frozenset()
    result = []
    for node in order:
        if node in stop:
            sources[node] = frozenset((node.name,))
            continue
        if node in tangent_side:
            continue
        inputs = node.all_input_nodes
        if not inputs:
            chain = empty
        elif len(inputs) == 1:
            chain = sources.get(inputs[0], empty)
        else:
            chain = frozenset().union(*(sources.get(a, empty) for a in inputs))
        sources[node] = chain
        if node.meta.get("phase") == "backward" or node.op != "call_function" or not any(
                u in tangent_side or u.meta.get("phase") == "backward" for u in node.users if u in bw_needed):
            continue
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        result.append(SavedValue(node.name, tuple(size_hint(s) for s in val.shape), val.dtype, 0, Decision.RECOMPUTE,
                                 f"recomputed in the backward from {', '.join(sorted(chain)) or 'constants'}"))
    return result


def _backward_closure(roots, stop: set) -> set:
    seen = ancestors(roots, stop)
    missing = unsaved_inputs(seen, stop)
    if missing:
        raise AssertionError(f"backward needs input {missing[0].name} but it was not saved")
    return seen


def _extract(root: torch.fx.GraphModule, inputs: list, needed: set, outputs: list, out_roles: list,
             *, stop: set, input_roles: list | None = None) -> torch.fx.GraphModule:
    graph = root.graph
    new = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for i, node in enumerate(inputs):
        ph = new.placeholder(node.name)
        ph.meta.update(node.meta)
        ph.meta["role"] = input_roles[i] if input_roles else node.meta["role"]
        env[node] = ph
    lookup = env.__getitem__
    static = not any(_is_symbolic(ph.meta.get("val")) for ph in graph.find_nodes(op="placeholder"))
    for node in graph.nodes:
        if node in env or node not in needed or node.op in ("placeholder", "output"):
            continue
        env[node] = _copy_node(new, node, lookup, static=static)
    result = new.output(tuple(env[v] if isinstance(v, torch.fx.Node) else v for v in outputs))
    result.meta["roles"] = list(out_roles)
    return lazy_graph_module(root, new)  # copies the tensor constants the new graph reads


def _is_symbolic(val) -> bool:
    if isinstance(val, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in val.shape)
    return isinstance(val, _SYMBOLIC)


def _copy_node(new: torch.fx.Graph, node: torch.fx.Node, lookup, *, static: bool = False) -> torch.fx.Node:
    """``new.node_copy(node, lookup)``, without the per-node pytree walk of ``create_node``.

    Note [Fast node copy]: ``Graph.create_node`` walks every call's arguments with pytree
    to warn about raw symbolic scalars; on a transformer's joint graph that walk was most
    of the split. Here the node is created without arguments and they are set after,
    the way ``Node.__init__`` sets them (users and inputs stay right); arguments
    holding a raw SymInt/SymFloat/SymBool still go through ``node_copy``, so its warning stays;
    a graph whose inputs have static sizes (``static``) holds none, and is not searched.
    """
    args = torch.fx.node.map_arg(node.args, lookup)
    kwargs = torch.fx.node.map_arg(node.kwargs, lookup)
    if not static and (_has_raw_symbolic(args) or _has_raw_symbolic(kwargs)):
        return new.node_copy(node, lookup)
    copy = add_node(new, node.op, node.target, args, kwargs, node.name, node.type)
    copy.meta.update(node.meta)   # a fresh dict: assigning .meta would re-index the node
    return copy


def add_node(graph: torch.fx.Graph, op: str, target, args: tuple, kwargs: dict, name: str,
             type_expr=None) -> torch.fx.Node:
    """``graph.create_node(op, target, args, kwargs, name, type_expr)`` without its walk of the
    arguments (Note [Fast node copy]): for arguments known to hold no raw symbolic scalar."""
    node = graph.create_node(op, target, None, None, name, type_expr)
    if not (args or kwargs):
        pass
    elif _UPDATE_ARGS:   # what Node.__init__ does with the arguments it is given
        node._update_args_kwargs(args, kwargs)
    else:
        node.args, node.kwargs = args, kwargs
    return node


# Assigning ``node.args`` then ``node.kwargs`` updates twice, each time re-indexing the node in the
# graph's lookup table (by op and target, which do not change here).
_UPDATE_ARGS = hasattr(torch.fx.Node, "_update_args_kwargs")
_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
_PLAIN = frozenset({torch.fx.Node, int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                    torch.memory_format})
_SEQUENCES = frozenset({tuple, list, immutable_list})


def _has_raw_symbolic(value) -> bool:
    kind = type(value)
    if kind in _PLAIN:
        return False
    if kind in _SEQUENCES:
        for item in value:
            if type(item) not in _PLAIN and _has_raw_symbolic(item):
                return True
        return False
    if isinstance(value, dict):
        return any(_has_raw_symbolic(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return any(_has_raw_symbolic(v) for v in value)
    return isinstance(value, _SYMBOLIC)


def _saved_value(choice: SavedChoice, stored: dict) -> SavedValue:
    """The SavedValue of a choice; ``nbytes`` counts each storage once (``stored`` tracks which
    saved value already pays for a storage), and nothing for inputs, which are live anyway."""
    val = choice.node.meta.get("val")
    if isinstance(val, torch.Tensor):
        shape = tuple(size_hint(s) for s in val.shape)
        nbytes = tensor_bytes(val)
        reason = choice.reason
        root = storage_root(choice.node)
        if aliases_input(choice.node):   # an input or a view of one: live anyway, no extra bytes
            nbytes = 0
        elif root in stored:
            nbytes, reason = 0, f"{reason} (a view of {stored[root]}: shares its storage)"
        else:
            stored[root] = choice.node.name
            nbytes = max(nbytes, tensor_bytes(root.meta.get("val")))
        return SavedValue(choice.node.name, shape, val.dtype, nbytes, choice.decision, reason)
    if val is None:
        raise UnsupportedError(f"backward needs {choice.node.name}, which has no value metadata")
    return SavedValue(choice.node.name, (), None, 8, choice.decision, choice.reason)


__all__ = ["Decision", "SplitGraphs", "split"]
