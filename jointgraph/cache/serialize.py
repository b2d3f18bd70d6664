"""A compiled entry as bytes and back: graphs as nodes plus constants, the layout, the plan.

Note [Cache entry format]
-------------------------
An entry holds what a warm start needs to run without tracing or planning:

* the forward and backward graphs before any graph compiler ran, node by node (op, name,
  target, arguments, the node metadata the runtime and the report read: roles, phases, and
  each ``val`` as a spec, Note [Cached node values]), plus the real tensors the graphs hold
  as constants;
* the ``EntryLayout`` (the runtime's index lists, output plan, signature, pytree specs);
* the ``Plan`` less its graphs: saved values with decisions and reasons, the simulated
  timeline and peak, the trace and partition timings of the cold run;
* for symbolic sizes, the guards the trace added, over stable names (Note [Cached symbolic
  sizes]).

It is pickled with ATen operators written by name (``aten::mm.default``). Anything else
that does not pickle (a graph holding an opaque Python object, a symbolic size in the layout) raises
``Unhashable`` and the entry is not stored.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import io
import operator
import pickle
import warnings
from typing import Any

import torch
import torch.fx

from ..ir import Plan
from ..ir.graph import lazy_graph_module
from ..split import _PLAIN, add_node
from .fingerprint import Unhashable
from .symbolic import StableNames
from .vals import LazyMeta, ValMaker, val_spec

_SIMPLE = (type(None), bool, int, float, str, enum.Enum, torch.dtype, torch.device)
_DROPPED_META = frozenset({"val", "tensor_meta", "nn_module_stack", "source_fn_stack", "fwd_nn_module_stack",
                           "fwd_source_fn_stack", "from_node"})


@dataclasses.dataclass(frozen=True)
class _Ref:
    """A node argument: the node named ``name``."""

    name: str


def _op(namespace: str, name: str, overload: str):
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)


def _op_packet(namespace: str, name: str):
    return getattr(getattr(torch.ops, namespace), name)


def _py(module: str, qualname: str):
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, torch._ops.OpOverload):
            namespace, name = obj._schema.name.split("::")
            return _op, (namespace, name, obj._overloadname)
        if isinstance(obj, torch._ops.OpOverloadPacket):
            namespace, name = obj._qualified_op_name.split("::")
            return _op_packet, (namespace, name)
        if isinstance(obj, torch._ops.HigherOrderOperator):
            raise Unhashable(f"the graph calls the higher-order operator {obj.name()}")
        if isinstance(obj, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise Unhashable("the entry's layout or plan holds a symbolic size (only the graphs' own sizes are "
                             "written over stable names, Note [Cached symbolic sizes])")
        if callable(obj) and not isinstance(obj, type) and getattr(obj, "__module__", None) in (
                "_operator", "operator", "builtins", "math"):
            return _py, (obj.__module__, obj.__qualname__)
        return NotImplemented


def dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Unhashable:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever does not pickle: not cacheable
        raise Unhashable(f"the compiled entry holds an object that does not serialize ({exc})") from None
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    with warnings.catch_warnings():   # unpickling a pytree LeafSpec warns about its own deprecated check
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        return pickle.loads(data)  # noqa: S301 - our own checksummed files (store.py)


# ### Graphs


def _simple(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_simple(v) for v in value)
    return isinstance(value, _SIMPLE)


def graph_state(gm: torch.fx.GraphModule | None, names: StableNames | None) -> dict | None:
    """The nodes and constants of ``gm`` (Note [Cache entry format]); symbolic sizes over ``names``."""
    if gm is None:
        return None
    nodes, constants = [], {}
    for node in gm.graph.nodes:
        if node.op in ("call_module",):
            raise Unhashable(f"the graph calls a submodule ({node.target})")
        if node.op == "get_attr":
            value = operator.attrgetter(node.target)(gm)
            if not isinstance(value, torch.Tensor):
                raise Unhashable(f"the graph holds {type(value).__name__} {node.target!r}, not a tensor")
            constants[node.target] = value.detach().clone() if not value.is_leaf else value.detach()
        meta = {k: v for k, v in node.meta.items() if k not in _DROPPED_META and _simple(v)}
        if "val" in node.meta:
            meta["val"] = val_spec(node.meta["val"], names.rename if names is not None else None)
        args = torch.fx.node.map_arg(node.args, lambda n: _Ref(n.name))
        kwargs = torch.fx.node.map_arg(node.kwargs, lambda n: _Ref(n.name))
        nodes.append((node.op, node.name, node.target, args, kwargs, meta))
    return {"nodes": nodes, "constants": constants}


def graph_module(state: dict | None, maker: ValMaker, *, lazy: bool) -> torch.fx.GraphModule | None:
    """Rebuild a GraphModule from ``graph_state``'s output; ``val`` metadata made by ``maker``, on
    first read when ``lazy`` (Note [Cached node values])."""
    if state is None:
        return None
    graph = torch.fx.Graph()
    made: dict[str, torch.fx.Node] = {}
    for op, name, target, args, kwargs, meta in state["nodes"]:
        args = _resolve(args, made)
        kwargs = _resolve(kwargs, made)
        node = add_node(graph, op, target, args, kwargs, name)   # no raw SymInt: dumps refuses them
        if node.name != name:
            raise ValueError(f"cache entry: node {name!r} came back as {node.name!r}")
        if lazy:
            node.meta = LazyMeta(meta, maker)
        else:
            node.meta.update(meta)
            if "val" in meta:
                node.meta["val"] = maker.make(meta["val"])
        made[name] = node
    root = torch.nn.Module()
    for target, value in state["constants"].items():
        _set_attr(root, target, value)
    return lazy_graph_module(root, graph)


def _resolve(value: Any, made: dict) -> Any:
    kind = type(value)
    if kind is _Ref:
        return made[value.name]
    if kind is tuple or kind is list:
        return kind([_resolve(v, made) if type(v) not in _PLAIN else v for v in value])
    if kind in _PLAIN:
        return value
    if isinstance(value, (tuple, list)):   # immutable_list and other subclasses
        return kind(_resolve(v, made) for v in value)
    if isinstance(value, dict):
        return {k: _resolve(v, made) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(_resolve(value.start, made), _resolve(value.stop, made), _resolve(value.step, made))
    return value


def _set_attr(root: torch.nn.Module, target: str, value: torch.Tensor) -> None:
    *path, last = target.split(".")
    module = root
    for part in path:
        if not hasattr(module, part):
            module.add_module(part, torch.nn.Module())
        module = getattr(module, part)
    module.register_buffer(last, value)


# ### Entries


def entry_payload(plan: Plan, layout, names: StableNames | None = None, guards: list | None = None) -> dict:
    """What an entry stores (Note [Cache entry format]); ``names`` and ``guards`` for symbolic sizes
    (Note [Cached symbolic sizes])."""
    plan_state = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)
                  if f.name not in ("forward", "backward", "options")}
    return {"forward": graph_state(plan.forward, names), "backward": graph_state(plan.backward, names),
            "layout": layout, "plan": plan_state, "guards": guards or []}


def restore(payload: dict, options, maker: ValMaker) -> tuple[Plan, Any]:
    """(Plan with rebuilt graphs, EntryLayout) from ``entry_payload``'s output; node values made by
    ``maker``, lazily when both graph compilers are "eager" (Note [Cached node values])."""
    lazy = options.fw_compiler == "eager" and options.bw_compiler == "eager"
    forward = graph_module(payload["forward"], maker, lazy=lazy)
    backward = graph_module(payload["backward"], maker, lazy=lazy)
    plan = Plan(forward=forward, backward=backward, options=options, **payload["plan"])
    plan.timings = {f"cold_{k}": v for k, v in plan.timings.items()}   # the run that compiled it
    return plan, payload["layout"]
