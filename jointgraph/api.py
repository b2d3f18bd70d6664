"""The pipeline: capture -> passes -> plan -> split -> runtime, top to bottom in ``build_plan``."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._guards import detect_fake_mode
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import traceback as fx_traceback

from . import cache
from .capture.captured import CapturedSources, lift_captured
from .capture.fsdp import resharding_of
from .capture.generators import outside_generators, outside_generators_kept
from .capture.guards import ambient_state
from .capture.inplace import NO_LEAF_VIEWS, CallerView
from .capture.inputs import FlatSignature, fakeify
from .capture.leaves import slot_examples
from .capture.subclasses import SubclassOutputs, any_subclass, flatten_call
from .capture.symbolic import data_view_entry, geometry_entry, output_entry, view_entry
from .capture.trace import trace_joint
from .capture.unbacked import estimated_sizes, make_fake_mode
from .hooks import apply_policy, check_policy, user_hook_codecs
from .ir import NO_RESHARDING, Decision, Plan, Resharding, Role, verify
from .ir.graph import gradient_tangents, output_node, output_roles, output_values, placeholders, tangent_sources
from .ir.graph_utils import (
    aliases_input,
    ancestors,
    backward_nodes,
    input_index_of,
    readers_in,
    storage_root,
    users_through_views,
)
from .logs import compile_log, configure_from_env, graphs_log, plan_log
from .options import CompileOptions
from .passes.pipeline import run_joint_passes, run_split_passes
from .passes.saved_codecs import apply_saved_codecs
from .planner.default import plan_default
from .planner.mincut import plan_mincut
from .planning import cost_compilers, plan_to_budget
from .runtime.compilers import compile_graph
from .runtime.function import CompiledEntry, EntryLayout
from .runtime.hook_calls import entry_hooks
from .split import SplitGraphs, split

PARTITIONERS: dict[str, Callable] = {"default": plan_default, "mincut": plan_mincut}

def _partition(graph: torch.fx.Graph, options: CompileOptions) -> list:
    """The "default" or "mincut" plan; mincut prices costly recomputation for the backward's compiler."""
    if options.partitioner == "mincut":
        return plan_mincut(graph, cost_compilers(options)[1])
    return PARTITIONERS[options.partitioner](graph)


# make_fx, functionalization and the trace-time RNG guard patch process-global state:
# one compilation at a time, from any thread (re-entrant: a compile may compile again).
COMPILE_LOCK = threading.RLock()


def _serialized(fn: Callable) -> Callable:
    """Run under COMPILE_LOCK, and leave ``torch.fx.traceback.current_meta`` as it was: selective
    checkpointing writes its tags there while traced, and PyTorch's own later compiles read them."""
    @functools.wraps(fn)
    def locked(*args, **kwargs):
        with COMPILE_LOCK, fx_traceback.preserve_node_meta(fx_traceback.should_preserve_node_meta):
            return fn(*args, **kwargs)
    return locked


@_serialized
def build_plan(flat_fn: Callable, fake_args: list, roles: tuple[Role, ...], fake_mode,
               options: CompileOptions, *, with_backward: bool, names=None, non_leaf=frozenset(),
               leaf_views=NO_LEAF_VIEWS, plain_views=frozenset(), debug: bool = False, saved_hooks=None,
               resharding: Resharding = NO_RESHARDING, reals: list | None = None):
    """Trace, optimize and partition; return (Plan, JointGraph, SplitGraphs). Runs nothing real.
    ``resharding``: the inputs the caller frees between forward and backward (Note [Inputs the
    caller reshards] in capture/fsdp.py). ``reals``: the caller's tensors ``fake_args`` stand for, which a
    region recomputed in the traced backward may read (capture/captured.py RealInputs)."""
    timings: dict[str, float] = {}
    start = time.perf_counter()
    joint = trace_joint(flat_fn, fake_args, roles, fake_mode, with_backward=with_backward, names=names,
                        non_leaf=non_leaf, leaf_views=leaf_views, plain_views=plain_views,
                        decompositions=_decompositions(options), reals=reals)
    timings["trace"] = time.perf_counter() - start

    start = time.perf_counter()
    joint.gm = run_joint_passes(joint.gm, options)
    if debug:
        verify(joint.gm.graph)
    recompute_reasons: dict[str, str] = {}
    check_policy(options.saved_tensors)
    if options.partitioner == "budget" and joint.has_backward:
        choices, recompute_reasons = plan_to_budget(joint.gm, options, resharding)
    else:
        choices = _partition(joint.gm.graph, options) if joint.has_backward else []
    if options.partitioner != "budget":   # with "budget" the policy says what the planner may use
        choices = apply_policy(choices, options.saved_tensors)
    codecs, hooks_inlined = {}, False
    if saved_hooks is not None and joint.has_backward:   # Note [Inlined saved-tensor hooks]
        inlined = user_hook_codecs(choices, saved_hooks)
        if inlined is not None:
            (choices, codecs), hooks_inlined = inlined, True
    graphs = split(joint.gm, choices, has_backward=joint.has_backward)
    graphs.hooks_inlined = hooks_inlined
    if any(c.codec for c in choices):
        graphs = apply_saved_codecs(graphs, choices, codecs)
    graphs = run_split_passes(graphs)
    timings["partition"] = time.perf_counter() - start
    if debug:
        verify(graphs.forward.graph)
        if graphs.backward is not None:
            verify(graphs.backward.graph)
    saved = [dataclasses.replace(v, reason=recompute_reasons[v.name]) if v.decision is Decision.RECOMPUTE
             and v.name in recompute_reasons else v for v in graphs.saved]
    plan = Plan(forward=graphs.forward, backward=graphs.backward, saved=saved, timings=timings,
                options=options, estimated_sizes=estimated_sizes(graphs.forward, graphs.backward))
    _simulate_into(plan, resharding)
    _log_plan(plan)
    return plan, joint, graphs


def _log_plan(plan: Plan) -> None:
    """The plan's summary on ``jointgraph.plan`` and its graphs on ``jointgraph.graphs`` (see logs.py)."""
    if plan_log.isEnabledFor(logging.INFO):
        plan_log.info("%r (trace %.3f s, partition %.3f s)", plan, plan.timings["trace"], plan.timings["partition"])
        if plan_log.isEnabledFor(logging.DEBUG):
            plan_log.debug("%s", plan.explain())
    if graphs_log.isEnabledFor(logging.INFO):
        graphs_log.info("forward graph:\n%s", plan.forward.print_readable(print_output=False))
        if plan.backward is not None:
            graphs_log.info("backward graph:\n%s", plan.backward.print_readable(print_output=False))


def _decompositions(options: CompileOptions) -> dict | None:
    if options.decompositions == "inductor":   # Note [Inductor as the graph compiler]
        from .runtime.inductor import inductor_decompositions

        return inductor_decompositions()
    return None


def _simulate_into(plan: Plan, resharding: Resharding) -> None:
    from .planner.simulate import simulate

    result = simulate(plan.forward, plan.backward, cost_compilers(plan.options), resharding=resharding)
    plan.peak_bytes = result.peak_bytes
    plan.timeline = result.timeline
    plan.timeline_by_kind = result.timeline_by_kind
    plan.entry_bytes = result.entry_bytes
    plan.resharded_bytes = result.resharded_bytes
    plan.gather_bytes = result.gather_bytes


def plan_call(flat_fn: Callable, signature: FlatSignature, tensors: list, options: CompileOptions, *,
              dynamic: bool, resharding: Resharding, saved_hooks=None, fakes: list | None = None):
    """Fake-ify the graph inputs ``tensors`` (unless ``fakes`` are given: the cache made them, Note
    [Cached symbolic sizes]) and run build_plan on them. ``resharding``: ``resharding_of(tensors)``,
    read off the real tensors before they are fake-ified.

    Returns (Plan, JointGraph, SplitGraphs, fake_mode, fakes). The backward is traced when
    grad mode is on and an input requires grad.
    """
    if fakes is None:
        fake_mode = make_fake_mode(dynamic=dynamic)
        captured = frozenset(k for k, role in enumerate(signature.roles) if role is Role.CAPTURED)
        fakes = fakeify(tensors, fake_mode, dynamic=dynamic, static=captured)
    else:
        fake_mode = detect_fake_mode(fakes)
    # Traced with grad mode on whenever it is on: the function may make tensors require grad
    # (requires_grad_() on an input, a leaf created inside); has_backward says if it did.
    with_backward = torch.is_grad_enabled()
    # Never run the user's saved-tensor hooks at trace time (on fake tensors): mask them.
    masked = torch.autograd.graph.saved_tensors_hooks(_no_pack, _no_unpack) if saved_hooks else contextlib.nullcontext()
    # Note [Seeding inside the function]: seeding a generator made outside is refused.
    with masked, outside_generators_kept(outside_generators(flat_fn, signature.constants)):
        plan, joint, graphs = build_plan(flat_fn, fakes, signature.roles, fake_mode, options,
                                         with_backward=with_backward, names=list(signature.names),
                                         non_leaf=non_leaf_inputs(tensors), leaf_views=views_of_leaves(tensors),
                                         plain_views=views_of_plain_tensors(tensors),
                                         saved_hooks=saved_hooks,
                                         resharding=resharding, reals=tensors)
    return plan, joint, graphs, fake_mode, fakes


def build_entry(flat_fn: Callable, out_box: list, signature: FlatSignature, tensors: list,
                options: CompileOptions, *, dynamic: bool, saved_hooks=None, source=None) -> CompiledEntry:
    """Compile one entry for graph inputs like ``tensors`` (under the ambient ``saved_hooks``),
    or load it from the on-disk cache (``source``: the function's fingerprint, jointgraph/cache)."""
    resharding = resharding_of(tensors)   # Note [Inputs the caller reshards] in capture/fsdp.py
    request, hit = cache.lookup(options.cache, source, signature, tensors, options, dynamic=dynamic,
                                saved_hooks=saved_hooks, ambient=ambient_state(), resharding=resharding)
    if hit is not None:
        if hit.fakes is not None:   # symbolic sizes: the fakes its guards are on
            fakes = hit.fakes
            fake_mode = detect_fake_mode(fakes)
        elif options.fw_compiler == "eager" and options.bw_compiler == "eager":   # runs the graphs as they are
            fakes, fake_mode = [], None   # no example inputs to make
        else:
            fake_mode = FakeTensorMode()
            fakes = fakeify(tensors, fake_mode, dynamic=False)
        entry = compile_entry(hit.plan, None, options, fakes, hit.layout)
    else:
        plan, joint, graphs, fake_mode, fakes = plan_call(flat_fn, signature, tensors, options, dynamic=dynamic,
                                                          resharding=resharding, saved_hooks=saved_hooks,
                                                          fakes=request and request.fakes)
        layout = make_layout(joint, graphs, signature, out_box[0], fakes)
        store_entry(request, plan, layout, joint)   # before the graph compilers run: they may rewrite the graphs
        entry = compile_entry(plan, joint, options, fakes, layout)
    entry.saved_hooks = saved_hooks
    entry.fake_mode = fake_mode
    entry.fakes = fakes
    return entry


def store_entry(request, plan: Plan, layout: EntryLayout, joint) -> None:
    """Store a compiled miss in the on-disk cache, unless hooks registered inside the function
    make it uncacheable: a hit does not trace, and the trace is where they are found."""
    if request is None:
        return
    if joint.hooks:
        cache.bypass(request.store, "the function registers autograd hooks inside it (Note [Hooks inside the "
                     "function]): they are found by tracing, which a cache hit skips", request.key)
        return
    request.save(plan, layout)


def _no_pack(x):
    return x


def _no_unpack(x):
    return x


def _shared_with_differentiable(values: list, non_diff: tuple) -> tuple[int, ...]:
    """Non-differentiable outputs whose storage a differentiable output shares (``t, t.detach()`` of one
    value, or ``a.detach(), a`` with ``a`` a view): the runtime gives them a detached alias, so marking
    them does not take the gradient from the others."""
    roots = {storage_root(v) for k, v in enumerate(values) if k not in non_diff and isinstance(v, torch.fx.Node)}
    return tuple(i for i in non_diff if isinstance(values[i], torch.fx.Node) and storage_root(values[i]) in roots)


def non_leaf_inputs(tensors: list) -> frozenset[int]:
    """Graph inputs that require grad and are not leaves (they may be mutated in place)."""
    return frozenset(i for i, t in enumerate(tensors)
                     if isinstance(t, torch.Tensor) and t.requires_grad and not t.is_leaf)


def views_of_leaves(tensors: list) -> dict[int, CallerView]:
    """Graph inputs that are views of a leaf requiring grad, each with what autograd's in-place check reads off it:
    eager refuses an in-place op autograd records on them or on views of them (a view made under no_grad or by
    ``unbind`` / ``split`` with that view's own error), and the fakes the trace runs on are no views (fuzz seed
    503382)."""
    return {i: CallerView.of(t) for i, t in enumerate(tensors) if isinstance(t, torch.Tensor) and t._base is not None
            and t._base.is_leaf and t._base.requires_grad and t.requires_grad}


def views_of_plain_tensors(tensors: list) -> frozenset[int]:
    """Graph inputs that are views of a tensor that does not require grad, not requiring grad themselves: a write
    autograd records through a view of one leaves it no grad_fn until one is read, and eager then takes it for a
    leaf requiring grad in an in-place op on it (``mark_plain_views`` in capture/inplace.py)."""
    return frozenset(i for i, t in enumerate(tensors) if isinstance(t, torch.Tensor) and t._base is not None
                     and not t._base.requires_grad and not t.requires_grad)


def compile_entry(plan: Plan, joint, options: CompileOptions, fakes: list, layout: EntryLayout) -> CompiledEntry:
    """Compile the plan's graphs (``joint``: None on a cache hit); ``layout`` is made before, as the
    graph compilers may rewrite the graphs."""
    # Read off the backward graph before a graph compiler rewrites it (Note [Hooks eager does not reach]).
    hooks = entry_hooks(joint.hooks, plan.forward, plan.backward) if joint is not None else None
    start = time.perf_counter()
    examples = [*fakes, *slot_examples(layout.new_leaves, fakes)]   # Note [New leaves]
    forward = compile_graph(plan.forward, examples, options.fw_compiler, boxed=False)
    backward = None
    if plan.backward is not None:
        eager = options.bw_compiler == "eager"   # reads no examples: a cache hit's values stay unmade
        bw_examples = [] if eager else [n.meta.get("val") for n in placeholders(plan.backward.graph)]
        backward = compile_graph(plan.backward, bw_examples, options.bw_compiler, boxed=True)
    plan.timings["compile"] = time.perf_counter() - start
    compile_log.info("stages: %s", ", ".join(f"{k} {v:.3f} s" for k, v in plan.timings.items()))
    return CompiledEntry(forward, backward, layout, plan, hooks=hooks)


def _inputs_without_gradient(joint) -> tuple[int, ...]:
    """Inputs that require grad to which the backward gives no gradient (None in the joint graph):
    the step's node must have no edge to them, as eager's graph has none (an edge to a node that
    cannot differentiate, ``set_``'s, would raise though no gradient flows)."""
    if not joint.has_backward:
        return ()
    graph = joint.gm.graph
    values, roles = output_values(graph), output_roles(graph)
    grads = [v for v, r in zip(values, roles, strict=True) if r is Role.GRADIENT]
    differentiable = [i for i, info in enumerate(joint.inputs) if info.requires_grad and not info.requires_grad_set]
    none = tuple(i for i in differentiable if grads[i] is None)
    if len(none) < len(differentiable) or not any(o.kind == "tensor" and o.requires_grad for o in joint.outputs):
        return none
    # Every input would be detached, yet eager's outputs require grad: eager's node has an edge to an
    # input whose derivative is undefined (``norm(x, 0)``). Keep the edges to what the outputs read.
    read = _ancestors([v for v, r in zip(values, roles, strict=True) if r is Role.USER_OUTPUT])
    inputs = [n for n in placeholders(graph) if n.meta["role"].is_input_value]
    return tuple(i for i in none if inputs[i] not in read)


def _ancestors(nodes: list) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    stack = [n for n in nodes if isinstance(n, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(node.all_input_nodes)
    return seen


def _clocks_by_tangent(info, tensor_outs: list[int], mutated: tuple[int, ...],
                       tangent_positions: tuple[int, ...]) -> tuple:
    """Per tangent, ``info.saved_at`` counting only the saves on a path from its output, or from the written
    input's new history it is the tangent of (of an output the metadata pass did not see: all of them)."""
    by_output, by_new_value = info.saved_at_by_output, info.saved_at_by_new_value
    clocks = []
    for k in tangent_positions:
        if k < len(tensor_outs):
            clocks.append(by_output[tensor_outs[k]] if tensor_outs[k] < len(by_output) else info.saved_at)
        else:
            i = mutated[k - len(tensor_outs)]
            clocks.append(by_new_value[i] if i < len(by_new_value) else info.saved_at)
    return tuple(clocks)


def _views_read_across_writes(inputs: list, mutated: set) -> tuple:
    """(i, writers) per input ``i`` requires_grad_() is called on: the inputs the function bumps the version
    of (not by a data write, which aliased inputs trace on one storage), with such a bump between the making
    and an autograd read of a view of ``i`` (from the first and last bump: conservative)."""
    out = []
    for i, info in enumerate(inputs):
        if not info.requires_grad_set or not info.view_reads:
            continue
        writers = tuple(j for j, w in enumerate(inputs) if j != i and j not in mutated
                        and w.first_written_at is not None and w.written_at is not None
                        and any(w.first_written_at <= read and w.written_at > made for made, read in info.view_reads))
        if writers:
            out.append((i, writers))
    return tuple(out)


def make_layout(joint, graphs: SplitGraphs, signature, out_spec, fakes: list) -> EntryLayout:
    """Precompute the index lists of the call path (Note [Runtime call path])."""
    outputs = joint.outputs
    tensor_outs = [i for i, o in enumerate(outputs) if o.kind == "tensor"]
    mutated = tuple(i for i, info in enumerate(joint.inputs) if info.mutates_data)
    # Note [Input mutations]: a mutation autograd recorded has a differentiable new value.
    mutated_grad = tuple(joint.has_backward and joint.inputs[i].mutation_recorded for i in mutated)
    n_user = len(tensor_outs)
    tangent_positions = tuple(k for k, i in enumerate(tensor_outs) if outputs[i].requires_grad)
    tangent_positions += tuple(n_user + k for k, needs in enumerate(mutated_grad) if needs)
    non_diff = tuple(k for k, i in enumerate(tensor_outs) if not outputs[i].requires_grad)
    non_diff += tuple(n_user + k for k, needs in enumerate(mutated_grad) if not needs)
    plan_entries = []
    position = {i: k for k, i in enumerate(tensor_outs)}
    # Note [Views with data-dependent geometry]: view output -> the Function output with its geometry
    carrier = {info.carries: position[i] for i, info in enumerate(outputs) if info.carries is not None}
    for i, info in enumerate(outputs):
        if info.carries is not None or info.new_value_of is not None:   # no user output
            continue
        # a view of a later output (capture/metadata.py, _views_of_later_outputs): of the Function output it is
        late = info.kind == "output_view" and info.input_index > i
        if i in carrier:
            kind, index = {"input_view": ("input_view", info.input_index),
                           "output_view": ("tensor_view", position[info.input_index]) if late
                           else ("output_view", info.input_index),
                           "tensor": ("tensor_view", position.get(i))}[info.kind]
            plan_entries.append(data_view_entry(kind, index, carrier[i], info.view_meta))
        elif info.kind == "tensor" and info.view_meta is not None:   # the graph returns the view's base
            meta = _on_base(info.view_meta, info.view_base) if info.view_replay is None else info.view_meta
            plan_entries.append(view_entry("tensor_view", (position[i], meta, info.view_replay), fakes,
                                           info.view_base))
        elif info.kind == "tensor":
            plan_entries.append(("tensor", position[i]))
        elif info.kind == "constant":
            plan_entries.append(output_entry(info.constant, fakes))
        elif info.kind == "input":
            plan_entries.append(("input", info.input_index))
        elif info.kind == "output_view":
            kind, index = ("tensor_view", position[info.input_index]) if late else ("output_view", info.input_index)
            plan_entries.append(view_entry(kind, (index, _on_base(info.view_meta, info.view_base), None), fakes,
                                           info.view_base))
        elif info.replay_base is not None:   # regenerated from that earlier output, as eager's view of it
            rest = info.view_replay[len(outputs[info.replay_base].view_replay):]
            plan_entries.append(view_entry("output_view", (info.replay_base, info.view_meta, rest), fakes))
        else:
            plan_entries.append(view_entry("input_view", (info.input_index, info.view_meta, info.view_replay), fakes))
    saved_inputs, saved_copies, saved_aliases, read_outputs, saved_mutated, detach_shared = [], [], [], [], (), ()
    result_outputs, data_checked, saved_geometry, data_read_inputs, storage_checked = (), (), (), (), ()
    itself_read = ()
    own_outputs = plan_read_outputs = ()
    # An input given another storage is saved as an alias of its old one (Note [Inputs given another storage]).
    reshaped = {i for i, info in enumerate(joint.inputs) if info.new_metadata is not None or info.new_storage}
    if graphs.backward is not None:
        values, roles = output_values(graphs.forward.graph), output_roles(graphs.forward.graph)
        saved_nodes = [v for v, r in zip(values, roles, strict=True) if r is Role.SAVED_TENSOR]
        new_values = [v for v, r in zip(values, roles, strict=True) if r is Role.MUTATED_INPUT]
        detach_shared = _shared_with_differentiable(values[:n_user + len(mutated)], non_diff)
        own_outputs = tuple(k for k, v in enumerate(values[:n_user])
                            if isinstance(v, torch.fx.Node) and not aliases_input(v))
        # An input's new value saved for the backward: eager saved the input itself, whose later
        # in-place use makes the backward raise (Note [Saved mutated inputs] in runtime/function.py).
        # A view of the new value counts too: eager saved that view of the input (fuzz seed 34438, one view of a
        # synthetic base written, then read by a saving op).
        written = _written_roots(new_values, mutated)
        ours = {written[storage_root(node)] for node in saved_nodes if storage_root(node) in written}
        joint_written = _written_in(joint.gm.graph, mutated)
        eager_choices = plan_default(joint.gm.graph)
        eager_plain, eager_new = _inputs_eager_saves(eager_choices, joint.gm.graph, joint_written)
        eager_itself = frozenset(i for i, info in enumerate(joint.inputs) if info.saved_itself)
        read_as_eager = _inputs_read_as_eager(joint, graphs.saved, eager_choices)
        # eager saved a tensor `.data =` left on the input's version counter (Note [Assigning .data]), or the input
        # itself, given another storage after (the graph shows the save on the new storage's value: fuzz
        # --semantics12 seed 14604092, ``t0 = a * w; a.data = a.data * 2``, a write after the call raises in eager)
        kept_counter = {i for i, info in enumerate(joint.inputs) if info.saved_with_kept_counter
                        or info.saved_itself and info.new_storage is not None and info.saved_at is not None}
        eager_plain, eager_new = eager_plain | (kept_counter - set(mutated)), eager_new | (kept_counter & set(mutated))
        # eager saved a tensor on a written input's storage the graph does not show there (a write through an unfold,
        # rewritten onto a clone, that saved its result: capture/inplace.py ExpandedViews.scratch)
        eager_new |= {i for i in mutated if joint.inputs[i].saved_on_clone}
        # checked after the epilogue: what our plan reads, and what eager saved though our plan does not
        read = _TangentReader.of(joint.gm.graph, len(tangent_positions))
        reading_written = _tangents_reading(joint.gm.graph, read, joint_written.get)
        saved_mutated = tuple((i, i in eager_new, reading_written.get(i)) for i in sorted(ours | eager_new))
        read_outputs = _outputs_the_backward_reads(joint.gm.graph, len(tensor_outs), read)
        read_outputs += _outputs_eager_saved(outputs, tensor_outs, tangent_positions, {k for k, _ in read_outputs})
        plan_read_outputs = _outputs_only_the_plan_reads(values, saved_nodes, own_outputs, len(tensor_outs),
                                                         {k for k, _ in read_outputs})
        # Note [Which op saved a value]: a saved value that is a user output, and how eager saved it
        returned_as_is = {k for k, i in enumerate(tensor_outs)   # the user's object is the graph's output itself
                          if outputs[i].view_meta is None and outputs[i].on_input is None
                          and outputs[i].counter_of is None}
        styles = {k: style for k, style in _saved_output_styles(joint.gm.graph, len(tensor_outs), read).items()
                  if k in returned_as_is}
        slot = {node: s for s, node in enumerate(saved_nodes)}
        slot_of = {k: slot[values[k]] for k in styles if values[k] in slot}   # the output the plan saves itself
        result_outputs = tuple((s, k) for k, s in slot_of.items() if styles[k] == "result")
        tangents_of = dict(read_outputs)
        styles.update((k, "value" if k in slot_of and _both_as_eager(graphs.backward.graph, slot_of[k]) else "both")
                      for k, style in styles.items() if style == "views")
        data_checked = tuple((k, slot_of.get(k, -1), style, tangents_of[k])
                             for k, style in styles.items() if style != "result" and k in tangents_of)
        view_slots = set()
        for s, node in enumerate(saved_nodes):
            root = storage_root(node)
            source = root.meta["input_index"] if root.op == "placeholder" else None
            if source in mutated:
                saved_copies.append(s)   # an input (or a view of one) the epilogue overwrites: keep the old value
                continue
            if source in reshaped:
                saved_aliases.append(s)   # the epilogue's as_strided_ changes its geometry: keep the old one
            if node.op == "placeholder":
                saved_inputs.append((s, node.meta["input_index"], node.meta["input_index"] in eager_plain))
            elif source is not None:   # a view of an input: it shares the input's version counter (fuzz seed 8203830:
                view_slots.add(s)      # the plan recomputed a cast eager kept from a view written after the call)
                saved_inputs.append((s, source, source in eager_plain))
        # an input eager saves as it is where our plan saves a value computed from it: eager's check still holds
        kept = {i for _, i, _ in saved_inputs}
        saved_inputs += [(-1, i, True) for i in sorted(eager_plain - kept - set(mutated))]
        reading = _tangents_reading(joint.gm.graph, read, input_index_of)   # the input, or the trace's copy of it
        plan_reading = _plan_reading(graphs.backward.graph, len(tangent_positions))
        saved_inputs = [checked for entry in saved_inputs
                        for checked in _saved_input_checks(entry, reading.get(entry[1]), plan_reading)]
        saved_geometry = tuple((s, *geometry) for s, *_ in saved_inputs if s >= 0
                               and (geometry := _static_geometry(saved_nodes[s])) is not None)
        # Note [Inputs given new data after the call]: eager's backward reads these tensors themselves
        stashed = {i for s, i, *_ in saved_inputs   # the caller's object
                   if s >= 0 and s not in saved_aliases and s not in view_slots}
        itself_read = tuple((i, reading_written.get(i) if i in mutated else reading.get(i))
                            for i in sorted(eager_itself))
        data_read_inputs = tuple((i, tangents) for i, tangents in itself_read if i in mutated or i not in stashed)
        # a saved view keeps the call's storage: read as eager's where eager saved no input itself
        storage_checked = tuple(s for s, i, *_ in saved_inputs if s >= 0 and (
            i in eager_itself if s in view_slots else not (i in read_as_eager and s not in saved_aliases)))
    return EntryLayout(
        num_user_tensors=len(tensor_outs),
        mutated_inputs=mutated,
        storage_resizes=tuple((i, info.storage_bytes) for i, info in enumerate(joint.inputs)
                              if info.storage_bytes is not None),
        backward_mutations=tuple(i for i, info in enumerate(joint.inputs) if info.mutated_in_backward),
        metadata_mutations=tuple((i, *info.new_metadata, info.metadata_recorded)
                                 for i, info in enumerate(joint.inputs) if info.new_metadata is not None),
        requires_grad_set=tuple(i for i, info in enumerate(joint.inputs) if info.requires_grad_set),
        mutated_with_grad=tuple(i for i, needs in zip(mutated, mutated_grad, strict=True) if needs),
        keep_version=tuple(i for i in mutated if joint.inputs[i].mutated_via_data),
        version_bumps=tuple(i for i, info in enumerate(joint.inputs) if info.version_bumped),
        written_with_grad=tuple(i for i, info in enumerate(joint.inputs) if info.written_with_grad),
        written_through_views=tuple(i for i, info in enumerate(joint.inputs) if info.written_through_views),
        saved_mutated=saved_mutated,
        # made before a write to its storage: before the epilogue writes (or bumps the version of) the
        # input, or another input sharing its storage (a.copy_(a) under no_grad, a a detach of b)
        early_views=tuple(k for k, info in enumerate(outputs) if info.kind == "input_view" and info.made_before_write),
        rebased_early_views=tuple(k for k, info in enumerate(outputs) if info.kind == "input_view"
                                  and info.made_before_write and info.rebased),
        set_views=tuple(k for k, info in enumerate(outputs) if info.kind == "input_view" and info.made_before_set),
        early_if_aliased=tuple((k, info.input_index, info.written_after) for k, info in enumerate(outputs)
                               if info.kind == "input_view" and info.written_after),
        saved_copies=tuple(saved_copies),
        saved_aliases=tuple(saved_aliases),
        num_saved_tensors=graphs.num_saved_tensors,
        num_saved_sizes=graphs.num_saved_sizes,
        tangent_positions=tangent_positions,
        hooks_inlined=graphs.hooks_inlined,
        non_differentiable=non_diff,
        detach_shared=detach_shared,
        moved_onto_inputs=tuple((position[i], info.on_input[0], *geometry_entry(*info.on_input[1:], fakes))
                                for i, info in enumerate(outputs) if info.on_input is not None),
        grad_inputs=tuple(info.requires_grad or info.requires_grad_set for info in joint.inputs),
        no_gradient=_inputs_without_gradient(joint),
        storage_sets=_storage_sets(joint.inputs, {info.new_value_of: position[k] for k, info in enumerate(outputs)
                                                  if info.new_value_of is not None}),
        saved_input_positions=tuple(saved_inputs),
        saved_geometry=saved_geometry,
        data_read_inputs=data_read_inputs,
        storage_checked=storage_checked,
        inputs_saved_itself=itself_read,
        watched_views=_watched_views(outputs, tensor_outs, tangent_positions) if graphs.backward is not None else (),
        grad_tangents=_prunable_gradients(graphs.backward, len(tangent_positions),
                                          output_node(joint.gm.graph).meta.get("gradient_reached_from", {})),
        data_views=tuple(k for k, info in enumerate(o for o in outputs if o.carries is None and o.new_value_of is None)
                         if info.via_data),
        counters_of=tuple((k, info.counter_of) for k, info in enumerate(o for o in outputs if o.carries is None
                                                                        and o.new_value_of is None)
                          if info.counter_of is not None),
        counter_shares=tuple((k, *info.shares_counter) for k, info in enumerate(
            o for o in outputs if o.carries is None and o.new_value_of is None) if info.shares_counter is not None),
        distinct_outputs=_distinct_outputs(graphs.forward, [outputs[i] for i in tensor_outs],
                                           [position.get(outputs[i].same_object) for i in tensor_outs],
                                           len(mutated)),
        own_outputs=own_outputs,
        outputs_read_by_backward=tuple(read_outputs),
        outputs_only_the_plan_reads=plan_read_outputs,
        result_outputs=result_outputs,
        data_checked=data_checked,
        read_after_writes=tuple((j, writers) for j, info in enumerate(joint.inputs)
                                if (read := info.grad_read_at) is not None
                                and (writers := tuple(i for i, w in enumerate(joint.inputs)
                                                      if w.first_written_at is not None
                                                      and w.first_written_at <= read))),
        writes_before_first_reads=tuple(
            (j, tuple(i for i, w in enumerate(joint.inputs) if w.first_written_at is not None
                      and w.first_written_at <= read))
            for j, info in enumerate(joint.inputs) if (read := info.grad_first_read_at) is not None),
        stale_view_reads=tuple(i for i, info in enumerate(joint.inputs) if info.stale_view_read),
        views_read_across_writes=_views_read_across_writes(joint.inputs, set(mutated)),
        geometry_writes_beside_multi_views=tuple(
            (i, viewed) for i, info in enumerate(joint.inputs) if info.new_metadata is not None and info.requires_grad
            and (viewed := tuple(j for j, other in enumerate(joint.inputs) if j != i and other.multi_output_viewed))),
        copies_before_saves=_copies_before_saves(joint.inputs, saved_inputs, set(mutated) - {
            i for i in mutated if joint.inputs[i].mutated_via_data}),
        version_clocks=tuple((info.saved_at, info.written_at,
                              _clocks_by_tangent(info, tensor_outs, mutated, tangent_positions))
                             for info in joint.inputs)
        if saved_inputs and any(info.version_bumped or info.new_metadata is not None for info in joint.inputs) else (),
        backward_error=(joint.backward_error, joint.error_outputs, joint.error_inputs, joint.error_multi_output)
        if joint.backward_error is not None else None,
        output_plan=tuple(plan_entries),
        same_objects=tuple((k, info.same_object) for k, info in enumerate(outputs) if info.same_object is not None),
        new_leaves=joint.new_leaves,
        out_spec=out_spec,
        signature=signature,
    )


def _copies_before_saves(inputs: list, saved_inputs: list, moving: set) -> tuple:
    """``EntryLayout.copies_before_saves``: per input the step saves, the inputs whose epilogue copy moves their
    version that eager wrote before it first saved that input (all of them where eager saves it not at all)."""
    if not moving:
        return ()
    entries = []
    for i in sorted({i for _, i, *_ in saved_inputs}):
        saved_at = inputs[i].saved_at
        before = tuple(j for j in sorted(moving) if j != i and (saved_at is None or inputs[j].written_at is None
                                                             or inputs[j].written_at <= saved_at))
        if before:
            entries.append((i, before))
    return tuple(entries)


def _distinct_outputs(forward: torch.fx.GraphModule, tensor_outputs: list, twins: list, n_mutations: int) -> tuple:
    """(k, -1) per Function output the forward returns as a value it already returned, where eager's is
    a tensor of its own (``return t.detach(), t``), or as the new value of a mutated input (among the
    ``n_mutations`` outputs after the user's: ``t = a.detach(); t[0] = w.sum(); return t`` after a write of
    ``a``, where autograd would route ``t``'s gradient through the mutation's), and (k, j) per output eager
    returns as the same object as output ``j`` (``twins``: the position of the earlier same object, or None)
    when ``j`` is one of those: Note [Distinct outputs] in runtime/function.py."""
    n = len(tensor_outputs)
    every = output_values(forward.graph)[:n + n_mutations]
    values, mutations = every[:n], every[n:]
    plain = [isinstance(v, torch.fx.Node) and info.view_meta is None   # a view is regenerated: its own already
             for v, info in zip(values, tensor_outputs, strict=True)]
    found, fresh = [], set()
    for k, value in enumerate(values):
        if twins[k] is not None:
            if twins[k] in fresh:
                found.append((k, twins[k]))
        elif (plain[k] and any(plain[j] and values[j] is value for j in range(k))
              # a view is regenerated from the base the graph returns, which routes its gradient too
              or isinstance(value, torch.fx.Node) and any(m is value for m in mutations)   # 3301143, 7801403
              # the base of a view of an intermediate returned as a plain output too (``t1.detach(), t1[1:]``):
              # eager's view has the hidden intermediate as base (fuzz --semantics12 seed 8800242)
              or tensor_outputs[k].kind == "tensor" and not plain[k] and isinstance(value, torch.fx.Node)
              and any(plain[j] and values[j] is value for j in range(n))):
            found.append((k, -1))
            fresh.add(k)
    return tuple(found)


def _prunable_gradients(backward: torch.fx.GraphModule | None, n_tangents: int, reach: dict) -> tuple:
    """``EntryLayout.grad_tangents`` (Note [Gradients no present tangent reaches]): per graph input the
    tangents its gradient is computed from, or whose autograd graph reaches it carrying a gradient (``reach``,
    per input: Note [Tangents that reach a node] in capture/trace.py); None where that is every tangent, none, or
    unknown; () when no gradient can be left out."""
    if backward is None or n_tangents < 2:
        return ()
    data = gradient_tangents(backward.graph)
    merged = [None if deps is None or (reached := reach.get(i, ())) is None else deps | set(reached)
              for i, deps in enumerate(data)]
    found = tuple(tuple(sorted(deps)) if deps and len(deps) < n_tangents else None for deps in merged)
    return found if any(deps is not None for deps in found) else ()


def _on_base(view_meta: tuple, base) -> tuple:
    """A view of an output regenerated by ``as_strided``: its storage offset relative to its base's, which the
    runtime adds to the offset the real base has (``CompiledEntry._view``). The graph's output need not sit at
    its fake's offset (fuzz seed 100348: a clone of an input slice, written through a strided view, came back
    at the slice's offset), so an absolute offset read the wrong elements. Symbolic geometry and views
    through another dtype keep their absolute offset."""
    size, stride, offset, dtype, *rest = view_meta
    if not isinstance(base, torch.Tensor) or dtype != base.dtype \
            or not all(isinstance(v, int) for v in (*size, *stride, offset, base.storage_offset())):
        return view_meta
    return (size, stride, offset - base.storage_offset(), dtype, *rest)


def _written_roots(new_values: list, mutated: tuple) -> dict:
    """The nodes allocating mutated inputs' new values -> the input: a new value given another geometry
    after its write is a view of the written value (``b[1:].fill_(3.); b.unsqueeze_(0)``), which the
    backward may save instead (fuzz seed 503757)."""
    return {storage_root(v) if isinstance(v, torch.fx.Node) else v: i
            for v, i in zip(new_values, mutated, strict=True)}


def _written_in(graph, mutated: tuple) -> dict:
    """``_written_roots`` of a joint graph's mutated inputs."""
    out = output_node(graph)
    return _written_roots([v for v, r in zip(out.args[0], out.meta["roles"], strict=True) if r is Role.MUTATED_INPUT],
                          mutated)


def _inputs_eager_saves(choices: list, graph, written: dict) -> tuple[frozenset, frozenset]:
    """Note [Saved mutated inputs] in runtime/function.py: the inputs whose version eager's backward
    checks. The "default" plan keeps what eager keeps: (inputs it saves as they are, or a view of,
    mutated inputs whose new value, or a view of it, it saves). Another plan may save other values
    (an input to recompute from, where eager kept a value computed from it); eager's checks are
    these, whatever ours saves. ``choices``: ``plan_default(graph)``; ``written``: ``_written_in(graph, mutated)``."""
    plain, new = set(), set()
    backward = None
    for choice in choices:
        root = storage_root(choice.node)
        if root in written:
            new.add(written[root])
        elif (i := input_index_of(root)) is not None:   # the input, or the trace's copy of it
            copied = choice.node.meta.get("read_through_clone")
            if copied:   # passes/remove_clones.py: eager saved its copy where the forward read only that
                backward = backward_nodes(graph) if backward is None else backward
                if all(u.name in copied for u in choice.node.users if u.op != "output" and u not in backward):
                    continue
            plain.add(i)
    return frozenset(plain), frozenset(new)


def _inputs_read_as_eager(joint, saved: list, eager_choices: list) -> tuple[int, ...]:
    """Note [Inputs given new data after the call] in runtime/function.py: the inputs whose saved tensor (the
    caller's object, where the plan saves it) the step's backward reads as eager's does after a ``.data =``: eager
    saved the input itself and nothing else on its storage (no view, no detach, no shallow copy of an op's own
    result), and the plan recomputes nothing eager saved from it. A plan storing values otherwise (compressed,
    offloaded) reads none so."""
    if any(v.decision in (Decision.COMPRESS, Decision.OFFLOAD) for v in saved):
        return ()
    ours = {v.name for v in saved if v.decision is Decision.SAVE}
    graph_nodes = {n.name: n for n in joint.gm.graph.nodes}
    missing = [c.node for c in eager_choices if c.node.name not in ours]
    stop = {graph_nodes[name] for name in ours if name in graph_nodes}
    recomputed_from = {i for n in ancestors(missing, stop) if (i := input_index_of(n)) is not None}
    return tuple(i for i, info in enumerate(joint.inputs)
                 if info.saved_itself and not info.saved_otherwise and i not in recomputed_from)


def _storage_sets(inputs: list, new_values: dict) -> tuple:
    """EntryLayout.storage_sets (Note [Inputs given another storage] in capture/metadata.py): onto another
    input (with the view ops from it), or onto the new value the Function returns (``new_values``)."""
    return tuple((i, *info.new_storage[1:], info.version_delta) if info.new_storage[0] == "input"
                 else (i, None, new_values[i], False, info.version_delta)
                 for i, info in enumerate(inputs) if info.new_storage is not None)


@dataclasses.dataclass(frozen=True)
class _TangentReader:
    """For the joint graph: called on some nodes' users, the tangents (positions among the Function's) the
    backward nodes among them are computed from (Note [Gradients no present tangent reaches]); None when
    none is, or when the graph's tangents do not match the Function's (then always checked)."""

    backward: set
    sources: dict
    known: bool

    @classmethod
    def of(cls, graph, num_tangents: int) -> _TangentReader:
        known = sum(1 for n in placeholders(graph) if n.meta.get("role") is Role.TANGENT) == num_tangents
        return cls(backward_nodes(graph), tangent_sources(graph), known)

    def __call__(self, users) -> tuple[int, ...] | None:
        # a backward node computed from no tangent (``b.t()`` for ``grad @ b.t()``) runs for those its users are
        found, seen = set(), set()
        stack = [u for u in users if u in self.backward]
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            # and the tangents whose autograd graph reaches the node that ran it, which runs (and checks what it
            # saved) whatever flows (Note [Tangents that reach a node] in capture/trace.py)
            found.update(node.meta.get("reached_from", ()))
            tangents = self.sources.get(node, frozenset())
            if tangents:
                found |= tangents
            else:
                stack.extend(u for u in node.users if u in self.backward)
        return tuple(sorted(found)) if self.known and found else None


def _tangents_reading(graph, read: _TangentReader, source) -> dict[int, tuple[int, ...] | None]:
    """Per input ``source(storage_root(node))`` names (None: no input) whose value the joint graph's backward
    reads (it or a view of it), the tangents it is read for: the nodes eager saves it for run only when one
    of them is present. Inputs not read are absent."""
    users: dict[int, list] = {}
    for node in graph.nodes:
        if node not in read.backward and node.op != "output" and (i := source(storage_root(node))) is not None:
            users.setdefault(i, []).extend(node.users)
    return {i: read(found) for i, found in users.items()}


def _plan_reading(backward, num_tangents: int) -> Callable[[int], tuple[int, ...] | None]:
    """For saved value ``s``: the tangents the plan's backward reads it for (also where eager's backward never reads
    the input it is: the plan recomputes from it, ``relu(a)`` for ``threshold_backward``, fuzz seed 7200130); None
    when unknown. ``_TangentReader`` over the plan's backward graph, every node of which is backward work, made
    once per graph."""
    phs = placeholders(backward)
    saved = [n for n in phs if n.meta.get("role") is Role.SAVED_TENSOR]
    known = sum(1 for n in phs if n.meta.get("role") is Role.TANGENT) == num_tangents
    read = _TangentReader(set(backward.nodes), tangent_sources(backward), known)
    return lambda s: read(saved[s].users) if s < len(saved) else None


def _saved_input_checks(entry: tuple, joint: tuple[int, ...] | None, plan_reading: Callable) -> list[tuple]:
    """EntryLayout.saved_input_positions for ``entry`` (saved index, input, eager saves it): the tangents each check
    is made for. ``joint``: those eager's backward reads the input for (``_tangents_reading``); where the plan's
    backward reads the saved value for others too (it recomputes from the input what eager saved a copy of), a
    write after the call is the plan's loss there, not eager's error (review of 5751014: ``(b.t() * 2).sin()`` under
    min-cut, ``b`` written after the call, the backward run from that output alone)."""
    s, i, eager_saves = entry
    if s < 0:
        return [(s, i, eager_saves, joint)]
    plan = plan_reading(s)
    if joint is None:
        return [(s, i, eager_saves, plan)]
    if not eager_saves:
        return [(s, i, False, None if plan is None else tuple(sorted({*joint, *plan})))]
    extra = None if plan is None else tuple(t for t in plan if t not in joint)
    return [(s, i, True, joint)] + ([(s, i, False, extra)] if extra is None or extra else [])


def _outputs_the_backward_reads(graph, num_user_tensors: int, read: _TangentReader) -> list[tuple]:
    """(k, tangents) per user tensor output (not an input) whose value the joint graph's backward
    reads: eager would save it, so modifying it in place before the backward raises
    (runtime/function.py). ``tangents``: those the backward reads it for (``_TangentReader``); eager's
    node that saved it runs only when one of them is present; None when unknown."""
    outputs = [(k, node, users_through_views(node)) for k, node in enumerate(output_values(graph)[:num_user_tensors])
               if isinstance(node, torch.fx.Node) and node.op != "placeholder"]
    # a view of it read counts (fuzz --semantics12 seed 4504160: ``t0[:2].sin()``, eager saved the view)
    return [(k, read(users)) for k, node, users in outputs if any(u in read.backward for u in users)]


def _outputs_only_the_plan_reads(values: list, saved_nodes: list, own_outputs: tuple, num_user_tensors: int,
                                 eager_read: set) -> tuple[int, ...]:
    """Note [Outputs only the plan reads]: user tensor outputs whose memory a saved value of the plan shares (the
    output, its base, a view of it) where eager's backward reads no tensor on it."""
    saved_roots = {storage_root(node) for node in saved_nodes}
    return tuple(k for k in own_outputs if k < num_user_tensors and k not in eager_read
                 and storage_root(values[k]) in saved_roots)


def _tangents_of(flat: tuple[int, ...] | None, outputs: list, tensor_outs: list,
                 tangent_positions: tuple) -> tuple[int, ...] | None:
    """The tangents (positions among the Function's) of the flat outputs ``flat``; None when unknown or when one has
    no tangent of its own (a view of an input, whose backward reaches the step through its base). A view of another
    output, regenerated on it, has its base's (fuzz --semantics12 seed 14864621: ``return t0, t1[1:], t1``)."""
    tangent_of = {i: tangent_positions.index(k) for k, i in enumerate(tensor_outs) if k in tangent_positions}
    if flat is None:
        return None
    # an output_view's base is a "tensor" output (capture/metadata.py _output_view_info): one step reaches it
    based = [outputs[j].input_index if outputs[j].kind == "output_view" else j for j in flat]
    if any(j not in tangent_of for j in based):
        return None
    return tuple(sorted({tangent_of[j] for j in based}))


def _watched_views(outputs: list, tensor_outs: list, tangent_positions: tuple) -> tuple:
    """EntryLayout.watched_views: (flat output, the tangents the backward reads it for) per view the runtime
    regenerates that an op saved as itself (Note [Inputs given new data after the call])."""
    return tuple((k, _tangents_of(info.saved_itself_by, outputs, tensor_outs, tangent_positions))
                 for k, info in enumerate(outputs) if info.saved_itself_by != ())


def _outputs_eager_saved(outputs: list, tensor_outs: list, tangent_positions: tuple, known: set) -> list[tuple]:
    """(k, tangents) per user tensor output eager saved a tensor sharing the version counter of
    (``OutputInfo.saved_by``) that the graph's reads do not show, as ``_outputs_the_backward_reads`` gives them."""
    return [(k, _tangents_of(outputs[i].saved_by, outputs, tensor_outs, tangent_positions))
            for k, i in enumerate(tensor_outs) if k not in known and outputs[i].saved_by != ()]


def _static_geometry(node) -> tuple | None:
    """(sizes, strides) of a saved value as traced, when they are plain ints."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(val, torch.Tensor):
        return None
    size, stride = tuple(val.shape), tuple(val.stride())
    return (size, stride) if all(type(x) is int for x in (*size, *stride)) else None


def _saved_output_styles(graph, num_user_tensors: int, read: _TangentReader) -> dict[int, str]:
    """Per user tensor output made by the graph (not an input): how eager's backward reads it (Note [Which op
    saved a value] in capture/trace.py). "result": only the backward of the op that made it (eager kept a
    shallow copy; a later ``.data =`` does not reach it), or of ops that read a view of it taken in the forward
    (eager kept that view, on the old storage too: fuzz --semantics12 seed 13400062), or none; "value": only the
    backward of other ops that read it itself (eager kept the tensor: ``.data =`` does); "both", or unknown (a
    backward node not tagged)."""
    styles = {}
    made = output_node(graph).meta.get("made_by", ())
    for k, node in enumerate(output_values(graph)[:num_user_tensors]):
        if not isinstance(node, torch.fx.Node) or node.op == "placeholder":
            continue
        made_by = made[k] if k < len(made) else None
        readers = [(u.meta.get("backward_of"), through) for u, through in readers_in(node, read.backward)]
        kinds = {"view" if through else "own" if seq == made_by else "value" for seq, through in readers}
        if made_by is None or any(seq is None for seq, _ in readers):
            styles[k] = "both"
        elif kinds == {"value"}:
            styles[k] = "value"
        elif "value" not in kinds:
            styles[k] = "result"
        else:   # "views": the plan may keep them as eager did (_both_as_eager)
            styles[k] = "views" if kinds == {"value", "view"} else "both"
    return styles


def _both_as_eager(backward, s: int) -> bool:
    """For an output saved (slot ``s``) of "views" style (``_saved_output_styles``): the plan's backward takes no
    view of it that eager took in the forward, so the views eager kept are saved values of their own, on the call's
    storage as eager's, and only readers of the output itself read the slot."""
    saved = [n for n in placeholders(backward) if n.meta.get("role") is Role.SAVED_TENSOR]
    return s < len(saved) and not any(u.meta.get("phase") != "backward" and storage_root(u) is saved[s]
                                      for u in users_through_views(saved[s]))


def plan(fn_or_module: Any, *example_args: Any, **options: Any) -> Plan:
    """Trace and partition ``fn_or_module`` on ``example_args``; run nothing. Returns a Plan."""
    from .options import make_options

    configure_from_env()
    opts = make_options(**options)
    fn, leaves, spec, leaf_roles = _bind(fn_or_module, example_args, {})

    def build(signature, flat_fn, out_box, tensors):
        return plan_call(flat_fn, signature, tensors, opts, dynamic=bool(opts.dynamic),
                         resharding=resharding_of(tensors))[0]

    try:
        if any_subclass(leaves):
            raise SubclassOutputs()
        return lift_captured(fn, leaves, spec, leaf_roles, CapturedSources(), build)[0]
    except SubclassOutputs:   # Note [Tensor subclasses]: the plan of the flattened function
        fn, leaves, spec, leaf_roles = flatten_call(fn, leaves, spec, leaf_roles)
        return lift_captured(fn, leaves, spec, leaf_roles, CapturedSources(), build)[0]


def _bind(fn_or_module: Any, args: tuple, kwargs: dict):
    """Return (callable over (params, buffers, args, kwargs) or (args, kwargs), leaves, spec, roles)."""
    if isinstance(fn_or_module, torch.nn.Module):
        from .module import module_call_leaves

        return module_call_leaves(fn_or_module, args, kwargs)
    leaves, spec = pytree.tree_flatten((args, kwargs))
    return fn_or_module, leaves, spec, None

