"""The torch.compile backend: ``backend="jointgraph"`` or ``jointgraph.backend(**options)``."""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from .ir import Role
from .logs import configure_from_env
from .options import CompileOptions, make_options


def backend(**options: Any) -> Callable:
    """A torch.compile backend with the given options (the options of ``jointgraph.aot_function``).

    Example::

        model = torch.compile(model, backend=jointgraph.backend(memory_budget=0.6))
        model(x).sum().backward()
        jointgraph.plans(model)       # the Plan of every graph Dynamo handed over
    """
    configure_from_env()
    opts = make_options(**options)

    def jointgraph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return compile_dynamo_graph(gm, example_inputs, opts)

    return jointgraph


def jointgraph_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The backend registered under the name "jointgraph" (default options)."""
    configure_from_env()
    return compile_dynamo_graph(gm, example_inputs, make_options())


def compile_dynamo_graph(gm: torch.fx.GraphModule, example_inputs: list, options: CompileOptions) -> Callable:
    """Compile a graph Dynamo captured. Dynamo guards the call, so the result is one entry.

    Note [Boxed inputs]: a graph whose inputs hold a list (compiled autograd's backward takes
    all its tensors as one list, which the caller expects the backend to empty so each tensor
    can be freed when consumed) is compiled on its flattened inputs; Dynamo's own wrapper
    (``flatten_graph_inputs``) flattens each call, empties the boxed list, and calls the
    compiled graph with one flat list.
    """
    _data_reads_as_attribute(gm)
    if any(isinstance(x, (list, tuple, dict)) for x in example_inputs):
        from torch._dynamo.utils import flatten_graph_inputs

        def compile_flat(flat_gm, flat_inputs: list) -> Callable:
            compiled = _compile_flat(flat_gm, flat_inputs, options)
            return lambda inputs: compiled(*inputs)

        return flatten_graph_inputs(gm, example_inputs, compile_flat)
    return _compile_flat(gm, example_inputs, options)


def _compile_flat(gm: Callable, example_inputs: list, options: CompileOptions) -> Callable:
    """Compile a flat Dynamo graph; under ``on_unsupported="eager"``, a graph refused at compile time runs as
    Dynamo handed it over (eagerly, with one warning), as a refused call does."""
    from .errors import UnsupportedError

    try:
        return _compile_flat_or_refuse(gm, example_inputs, options)
    except UnsupportedError as exc:
        if options.on_unsupported != "eager":
            raise
        warnings.warn(f"jointgraph: running a Dynamo graph eagerly: {exc}", stacklevel=2)
        return gm


def _compile_flat_or_refuse(gm: Callable, example_inputs: list, options: CompileOptions) -> Callable:
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode

    from . import cache
    from .api import (
        build_plan,
        compile_entry,
        make_layout,
        non_leaf_inputs,
        store_entry,
        views_of_leaves,
        views_of_plain_tensors,
    )
    from .capture.captured import Recapture
    from .capture.context import INFERENCE_REQUIRES_GRAD_ERROR, INFERENCE_WRITE_ERROR
    from .capture.fsdp import resharding_of
    from .capture.guards import ambient_state
    from .capture.inplace import ExpandedInputWritten
    from .capture.inputs import FlatSignature, make_flat_fn
    from .capture.subclasses import SubclassOutputs, any_subclass
    from .compiled import CompiledFunction, aliased_leaf_refusal
    from .errors import UnsupportedError
    from .runtime.aliasing import AliasedInputs, SyntheticBases
    from .runtime.epilogue import RefusedCall

    if any_subclass(example_inputs):   # Note [Tensor subclasses]: flattened per call, as aot_function does
        return _compile_per_call(gm, options)
    fake_mode = detect_fake_mode(example_inputs) or FakeTensorMode()
    fakes = []
    with fake_mode:
        for x in example_inputs:
            if isinstance(x, torch.Tensor):
                fake = x if _is_fake(x) else fake_mode.from_tensor(x)
                if not fake.is_leaf:  # only non-leaf inputs are detached
                    fake = fake.detach().requires_grad_(x.requires_grad)
                fakes.append(fake)
            else:
                fakes.append(x)
    leaves = list(example_inputs)
    spec = torch.utils._pytree.tree_flatten(((leaves,), {}))[1]
    roles = [Role.PRIMAL if isinstance(x, torch.Tensor) else Role.SIZE for x in example_inputs]
    # Every input (tensor or symbolic size) is a graph input; Dynamo already deduplicated them.
    signature = FlatSignature(len(leaves), tuple(range(len(leaves))), {}, {}, tuple(roles),
                              tuple(f"arg{i}" for i in range(len(leaves))))

    def call_graph(inputs):
        return gm(*inputs)

    flat_fn, out_box = make_flat_fn(call_graph, spec, signature)
    with_backward = torch.is_grad_enabled()
    source = cache.dynamo_source(gm) if options.cache is not False else None
    resharding = resharding_of(example_inputs)   # Note [Inputs the caller reshards] in capture/fsdp.py
    request, hit = cache.lookup(options.cache, source, signature, example_inputs, options, dynamic=False,
                                saved_hooks=None, ambient=ambient_state(), fakes=fakes,
                                resharding=resharding)
    if hit is not None:
        entry = compile_entry(hit.plan, None, options, fakes, hit.layout)
        plan = entry.plan
    else:
        try:
            plan, joint, graphs = build_plan(flat_fn, fakes, signature.roles, fake_mode, options,
                                             with_backward=with_backward, non_leaf=non_leaf_inputs(example_inputs),
                                             leaf_views=views_of_leaves(example_inputs),
                                             plain_views=views_of_plain_tensors(example_inputs),
                                             resharding=resharding)
        except (SubclassOutputs, ExpandedInputWritten):   # Notes [Tensor subclasses], [Expanded inputs written
            return _compile_per_call(gm, options)           # in place]: aot_function's entries of their own
        except RuntimeError as exc:
            if _SAC_CACHE_WRITTEN in str(exc) and _checkpointed_regions_as_eager(gm):   # Note [Activation
                return _compile_flat_or_refuse(gm, example_inputs, options)             # checkpointing]
            if (refusal := aliased_leaf_refusal(exc, example_inputs)) is not None:
                raise refusal from exc
            if str(exc) in (INFERENCE_WRITE_ERROR, INFERENCE_REQUIRES_GRAD_ERROR):   # Dynamo's fakes run these
                return _compile_per_call(gm, options)   # (fuzz --semantics12 seed 14841966): eager's error, at the call
            if not isinstance(exc, UnsupportedError) \
                    and any(isinstance(x, torch.Tensor) and x._base is not None for x in example_inputs):
                # Dynamo fakes a view as a view of its autograd base, also one given other data (``t0.data = ...``
                # before a graph break: fuzz seed 10003680), whose memory the base no longer shares; an error eager
                # raises on that shared memory is decided on the caller's tensors, at the call
                return _compile_per_call(gm, options)
            raise
        except Recapture as found:   # Dynamo lifts what a program captures; a real tensor left in its graph is not
            shapes = ", ".join(str(tuple(t.shape)) for t in found.tensors)
            raise UnsupportedError(f"the graph Dynamo handed over reads real tensors that are not graph inputs "
                                   f"(shapes {shapes}); jointgraph lifts captured tensors through aot_function "
                                   "only (Note [Captured tensors])") from None
        layout = make_layout(joint, graphs, signature, out_box[0], fakes)
        store_entry(request, plan, layout, joint)   # before the graph compilers run: they may rewrite the graphs
        entry = compile_entry(plan, joint, options, fakes, layout)
    run = entry.run_inputs
    synthetic = SyntheticBases(call_graph, lambda inner: CompiledFunction(inner, options))   # Note [Aliased inputs]

    def compiled(*args):
        inputs = list(args)
        try:
            try:
                return run(inputs)
            except AliasedInputs as aliased:
                return synthetic(inputs, spec, entry.layout, aliased)
        except RefusedCall as exc:   # nothing ran: Dynamo's graph can still run eagerly
            if options.on_unsupported != "eager":
                raise
            warnings.warn(f"jointgraph: running a Dynamo graph eagerly: {exc}", stacklevel=2)
            return gm(*args)

    compiled.plan = plan  # for inspection
    compiled.plans = [plan]   # as CompiledFunction.plans: what jointgraph.plans reads (dynamo_plans)
    _record(compiled)
    return compiled


def _compile_per_call(gm: Callable, options: CompileOptions) -> Callable:
    """A Dynamo graph with tensor-subclass inputs or outputs (Note [Tensor subclasses]), with an expanded
    input it writes in place (Note [Expanded inputs written in place]), or whose trace on Dynamo's fake views
    raised: compiled on its first call (per structure) by the machinery of aot_function, which makes entries
    of their own for those, traced on the caller's tensors."""
    from .compiled import CompiledFunction

    def call_graph(*inputs):
        return gm(*inputs)

    compiled = CompiledFunction(call_graph, options)   # its .plans: one per structure compiled
    _record(compiled)
    return compiled


### Plans of what Dynamo compiled (jointgraph.plans)

# Note [Plans under torch.compile]: Dynamo keeps the compiled graphs in its own caches, out of
# reach of the model object. Each graph compiled here is recorded weakly (the compiled
# callable; dropped when Dynamo drops it) with the code objects Dynamo traced for it, so
# ``dynamo_plans(model)`` picks the graphs traced from the model's ``forward`` (or the
# function's code). Dynamo keys its cache on code, so two instances of one module class share
# their compiled graphs, and so do their plans. Each recorded callable has a ``plans`` list: one
# plan, or for a graph with tensor-subclass inputs or outputs (a CompiledFunction) one per
# structure it was compiled for. Inspection only: nothing at run time reads it.
_COMPILED: list[tuple[weakref.ref, frozenset]] = []


def _record(compiled: Callable) -> None:
    from torch._guards import TracingContext

    context = TracingContext.try_get()
    codes = frozenset(getattr(context, "traced_code", None) or ()) if context is not None else frozenset()
    _COMPILED[:] = [r for r in _COMPILED if r[0]() is not None]
    _COMPILED.append((weakref.ref(compiled), codes))


def dynamo_plans(model: Any) -> list | None:
    """The Plans of the graphs Dynamo compiled with this backend for ``model`` (a
    ``torch.compile``'d module or function, or a module after ``module.compile()``, as FSDP2's
    per-block compile does), oldest first; None if ``model`` is not one."""
    original = getattr(model, "_torchdynamo_orig_callable", None)
    if original is None and isinstance(model, torch.nn.Module) and getattr(model, "_compiled_call_impl", None):
        original = model   # nn.Module.compile(): Dynamo traces the module's own forward
    if original is None:
        return None
    if isinstance(model, torch.nn.Module) or isinstance(original, torch.nn.Module):
        code = type(getattr(model, "_orig_mod", original)).forward.__code__
    else:
        code = getattr(getattr(original, "__func__", original), "__code__", None)
    return [plan for ref, traced in _COMPILED if (compiled := ref()) is not None and code in traced
            for plan in compiled.plans]


def _is_fake(x: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(x)


def _data_attribute(t: torch.Tensor) -> torch.Tensor:
    return t.data


def _data_reads_as_attribute(gm: torch.fx.GraphModule) -> None:
    """Dynamo records ``x.data`` as ``torch._C._autograd._get_data_attr(x)``, which our tracing
    sees only as a ``detach``; as the attribute read it is again an alias with a version counter of
    its own (Note [Eager's in-place checks]), so writes through it leave ``x._version`` as eager does."""
    if not isinstance(gm, torch.fx.GraphModule):
        return
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch._C._autograd._get_data_attr:
            node.target = _data_attribute
            changed = True
    if changed:
        gm.recompile()


# PyTorch's error when an op inside a checkpointed region writes a result its compile-time cache holds
_SAC_CACHE_WRITTEN = "Tensor cached during selective activation checkpoint has been mutated"


def _checkpointed_regions_as_eager(gm: torch.fx.GraphModule) -> bool:
    """Note [Activation checkpointing] in passes/checkpoint.py: where PyTorch's ``tag_activation_checkpoint``
    refused an in-place op inside a region on a result it cached while compiling (``nn.ReLU(inplace=True)``
    after a ``Linear``; eager recomputes the region, in-place op and all), each region Dynamo captured from
    ``torch.utils.checkpoint`` without a ``context_fn`` runs, while traced again, as the non-reentrant
    checkpoint runs eagerly (``_recomputed_region``), as ``aot_function`` traces it. Only then: PyTorch's path
    tags each region's random ops itself, where the twins' replay pairs them by op and arguments (see Known
    gaps in docs/semantics.md). A region with a selective policy keeps PyTorch's path. True if one changed."""
    if not isinstance(gm, torch.fx.GraphModule):
        return False
    hop = getattr(torch.ops.higher_order, "tag_activation_checkpoint", None)
    changed = False
    for node in gm.graph.nodes:
        if node.op != "call_function" or hop is None or node.target is not hop or not node.args \
                or getattr(node.args[0], "op", None) != "get_attr":
            continue
        region = getattr(gm, node.args[0].target, None)
        if isinstance(region, torch.fx.GraphModule) and "_checkpoint_context_fn" not in region.meta:
            node.target = _recomputed_region
            changed = True
    if changed:
        gm.recompile()
    return changed


def _recomputed_region(region: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
    """One checkpointed region, run as ``torch.utils.checkpoint(..., use_reentrant=False)`` runs it (the
    kwargs Dynamo kept: ``preserve_rng_state``, ...); the interpreter keeps each node's source line."""
    import functools

    import torch.fx.traceback as fx_traceback
    from torch.utils.checkpoint import checkpoint

    kwargs = {k: v for k, v in kwargs.items() if k not in ("use_reentrant", "context_fn")}
    with fx_traceback.preserve_node_meta():
        return checkpoint(functools.partial(_interpret, region), *args, use_reentrant=False, **kwargs)


def _interpret(region: torch.fx.GraphModule, *args: Any) -> Any:
    return torch.fx.Interpreter(region).run(*args)
