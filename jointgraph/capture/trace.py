"""Trace forward and backward together into one functional ATen graph.

The user's flat function runs on fake tensors wrapped for functionalization
(``FunctionalTensorMode``) while ``make_fx`` records the ATen ops that reach
the bottom of the dispatcher. Autograd runs above functionalization, so
``torch.autograd.grad`` inside the traced function records the backward too.

Notes [Input mutations] and [Storage resize] are in ``capture/metadata.py`` (the
metadata pass); Note [Eager's in-place checks] in ``capture/context.py``.

Note [Backward mutations]
-------------------------
A backward may mutate a forward input's data (a custom autograd.Function whose
backward updates a buffer; FSDP's gradient bookkeeping). While the backward is
traced, each input's functionalization mutation counter is compared before and
after ``autograd.grad``; an input it moved gets its new value returned by the
backward graph (role ``BACKWARD_MUTATION``) and the runtime's backward copies it
into the caller's tensor. Metadata mutations in the backward, and backward
mutations of inputs that the forward also mutates or that require grad, are
refused at compile time.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Mapping

import torch
import torch.fx
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from ..errors import UnsupportedError
from ..ir import InputInfo, JointGraph, Role
from ..ir.effects import must_run
from ..ir.graph import lazy_graph_module
from .captured import RealInputs
from .context import (
    OLD_STORAGE,
    JointFunctionalMode,
    clone_as_is,
    compiling,
    from_fun,
    grad_context,
    to_fun,
    to_fun_input,
    translate_errors,
)
from .fallbacks import MetaFallbacks
from .generators import GeneratorArgs, rng_state_as_effects
from .hooks_inside import HooksInside, HookTable
from .inplace import NO_LEAF_VIEWS, CallerView, EagerInPlaceChecks, stale_view_error
from .leaves import LeafSlots, slot_examples
from .metadata import MULTI_OUTPUT, WRITTEN_AFTER, collect_metadata, restore_storage_bytes, returned, storage_sizes
from .scopes import module_scopes
from .subclasses import refuse_subclass_gradients
from .symbolic import geometry_tensor
from .unbacked import (
    backward_depends_on_values,
    insert_runtime_asserts,
    new_epoch,
    tie_tangents,
)

_NO_GRAD_FN = "does not require grad and does not have a grad_fn"


class _BackwardPhase:
    """Tag every node traced inside the block with ``meta["phase"] = "backward"``.

    Note [Phases]: a node the autograd engine produced while the backward ran is a
    backward node even when it does not depend on a tangent (``cos(x)`` in sin's
    backward, or the recomputation of a ``torch.utils.checkpoint`` region). The
    forward is what eager's forward computes; the partitioners decide only which
    forward values to save and which to recompute, never move backward work forward.
    """

    def __enter__(self):
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        mode = get_proxy_mode()
        self.graph = mode.tracer.graph if mode is not None else None
        self.start = len(self.graph.nodes) if self.graph is not None else 0
        return self

    def __exit__(self, *exc):
        if self.graph is not None:
            for node in list(self.graph.nodes)[self.start:]:
                node.meta["phase"] = "backward"
        return False


def _sequence_nr(t: object) -> int | None:
    """The sequence number of ``t``'s grad_fn; None for a view (reading a view's grad_fn may regenerate it, or raise
    eager's error for a stale multi-output view, fuzz seed 310639: its style stays unknown) or no tensor."""
    if not isinstance(t, torch.Tensor) or t._is_view():
        return None
    grad_fn = t.grad_fn
    return grad_fn._sequence_nr() if grad_fn is not None else None


class _BackwardOf:
    """Tag each node traced while an autograd node's backward runs with ``meta["backward_of"]``, that node's
    sequence number; the output node's ``meta["made_by"]`` holds that of each user output's grad_fn.

    Note [Which op saved a value]: eager saves a value an op returned for its own backward as a shallow copy
    (``tanh`` keeps its result), a value an op read as the value itself (``cos`` keeps its argument); a
    ``.data =`` on the tensor after the call reaches the second and not the first. A backward node whose
    ``backward_of`` is the output's ``made_by`` read its op's own result (``_saved_output_styles`` in api.py;
    the proxy's own ``meta["seq_nr"]`` is not used: a view replayed under a view input moves it, fuzz seed
    5801356).

    Note [Tangents that reach a node]
    ---------------------------------
    Which tangents a backward value is computed from (``ir.graph.tangent_sources``) is the data flow of the traced
    graph; eager's engine follows autograd's graph. A backward that ignores its gradient (``as_strided``'s of an
    empty view gives zeros, reading none) cuts the first, not the second (fuzz --semantics12 seed 14602540:
    ``relu_(a)``, then ``t1.sum()`` of an empty view of ``a``). Two facts are recorded per trace, both as positions
    among ``roots`` (the tangents'):

    * each node traced while an autograd node ran gets ``meta["reached_from"]``, the roots whose graph reaches that
      autograd node. Eager runs it, and unpacks (version-checks) what it saved, whenever one of them has a gradient,
      whatever flows (``_TangentReader`` in api.py: the checks of saved values);
    * ``gradient_reach(wrt)``: per tensor differentiated, the roots that reach its gradient edge along edges that
      carried a gradient (a node returning None for an input, a custom Function's backward, passes nothing on:
      eager's leaf keeps ``.grad`` None), through nodes of one output only: the trace ran every root at once, and
      a node of several outputs may give an input no gradient when only some of them have one (``slogdet``'s for
      its sign alone, a custom Function with ``set_materialize_grads(False)``: review of cabd686); past those only
      the data flow counts. Gradients are left out (Note [Gradients no present tangent reaches]) only where neither
      this nor the data flow finds a present tangent.
    """

    def __init__(self, roots: list):
        from torch.fx.experimental.proxy_tensor import get_proxy_mode

        mode = get_proxy_mode()
        self.graph = mode.tracer.graph if mode is not None else None
        self.roots = [(k, t.grad_fn) for k, t in enumerate(roots)
                      if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        self.handles: list = []
        self.order: list = []
        self.defined: dict = {}   # autograd node -> per input, whether a run gave it a gradient
        self.outputs: dict = {}   # autograd node -> how many outputs (gradients in) it has

    def __enter__(self):
        if self.graph is None:
            return self
        self.order = _in_graph_order(self.roots)
        reached = _reach(self.order, self.roots, lambda node, j: True)
        for node in self.order:
            marks: list = []
            seq, found = node._sequence_nr(), reached[node]
            self.handles.append(node.register_prehook(lambda _, marks=marks: marks.append(self._last())))
            self.handles.append(node.register_hook(
                lambda grad_inputs, grad_outputs, node=node, marks=marks, seq=seq, found=found:
                self._ran(node, grad_inputs, grad_outputs, marks.pop(), seq, found)))
        return self

    def _last(self):
        return next(iter(reversed(self.graph.nodes)), None)

    def _ran(self, node, grad_inputs: tuple, grad_outputs: tuple, mark, seq: int, found: tuple[int, ...]) -> None:
        self.outputs[node] = len(grad_outputs)
        given = [g is not None for g in grad_inputs]
        before = self.defined.get(node)
        self.defined[node] = given if before is None else [a or b for a, b in zip(before, given, strict=True)]
        for fx_node in reversed(self.graph.nodes):
            if fx_node is mark:
                break
            fx_node.meta.setdefault("backward_of", seq)   # the innermost node's, tagged first
            fx_node.meta.setdefault("reached_from", found)

    def gradient_reach(self, wrt: list) -> list[tuple[int, ...] | None]:
        """Per tensor of ``wrt``, after the backward ran: the roots reaching its gradient edge along edges that
        carried a gradient (None where unknown: no graph traced)."""
        if self.graph is None:
            return [None] * len(wrt)
        reached = _reach(self.order, self.roots, lambda node, j: self.outputs.get(node) == 1
                         and self.defined.get(node, ())[j:j + 1] == [True], by_edge=True)
        edges = [w if isinstance(w, torch.autograd.graph.GradientEdge) else torch.autograd.graph.get_gradient_edge(w)
                 for w in wrt]   # a new leaf's slot is differentiated through its edge (Note [New leaves])
        return [reached.get((e.node, e.output_nr), ()) for e in edges]

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
        return False


def _in_graph_order(roots: list) -> list:
    """The autograd nodes reachable from ``roots`` ((position, grad_fn) pairs), each after every node that leads
    to it (a depth-first post-order, reversed)."""
    order, seen = [], set()
    for _, root in roots:
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if node is None or node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            stack.extend((n, False) for n, _ in node.next_functions)
    return order[::-1]


def _reach(order: list, roots: list, through: Callable, by_edge: bool = False) -> dict:
    """Per autograd node of ``order`` (per (node, input) edge where ``by_edge``), the root positions reaching it
    along the edges ``through(node, j)`` admits (Note [Tangents that reach a node]); tuples, which the cache's
    graphs keep."""
    reached: dict = {node: set() for node in order}
    edges: dict = {}
    for k, root in roots:
        reached[root].add(k)
    for node in order:
        for j, (n, nr) in enumerate(node.next_functions):
            if n is not None and reached[node] and through(node, j):
                reached[n] |= reached[node]
                if by_edge:
                    edges.setdefault((n, nr), set()).update(reached[node])
    found = edges if by_edge else reached
    return {key: tuple(sorted(ks)) for key, ks in found.items()}


def _mutation_counters(f_inputs: list) -> list:
    counters = []
    for f in f_inputs:
        if isinstance(f, FunctionalTensor):
            torch._sync(f)
            counters.append((torch._functionalize_mutation_counter(f.elem), tuple(f.shape), tuple(f.stride()),
                             f.storage_offset()))
        else:
            counters.append(None)
    return counters


def _backward_mutations(f_inputs: list, before: list, infos: list[InputInfo]) -> list[int]:
    """Inputs whose data the traced backward mutated (Note [Backward mutations])."""
    found = []
    for i, (count, now) in enumerate(zip(before, _mutation_counters(f_inputs), strict=True)):
        if count is None or count == now:
            continue
        if count[1:] != now[1:]:
            raise UnsupportedError(f"input {i} has its metadata (shape, strides) mutated in the backward",
                                   hint='mutate a separate buffer in the backward, or pass on_unsupported="eager"')
        if infos[i].mutates_data or infos[i].requires_grad or infos[i].new_metadata is not None:
            raise UnsupportedError(
                f"input {i} is mutated in the backward and is also mutated in the forward or requires grad",
                hint='mutate a separate buffer in the backward, or pass on_unsupported="eager"')
        found.append(i)
    return found


def trace_joint(flat_fn: Callable, fake_args: list, roles: tuple[Role, ...], fake_mode,
                *, with_backward: bool, names: list[str] | None = None,
                non_leaf: frozenset[int] = frozenset(), leaf_views: Mapping[int, CallerView] = NO_LEAF_VIEWS,
                plain_views: frozenset[int] = frozenset(), decompositions: dict | None = None,
                reals: list | None = None) -> JointGraph:
    """Trace ``flat_fn`` (forward, and its backward when ``with_backward``) into a JointGraph.

    Expects: ``fake_args`` are fake tensors of ``fake_mode`` (leaves with the
    caller's ``requires_grad``) or symbolic ints; ``flat_fn`` returns a flat list.
    Guarantees: a functional ATen graph whose placeholders are the inputs, one slot per
    leaf the function creates (Note [New leaves]: ``JointGraph.new_leaves``), then one
    tangent per differentiable output, and whose outputs are the user tensors, the
    new values of mutated inputs, then one gradient (or None) per input; roles on
    every placeholder and on the output node. ``decompositions`` (an op -> function table,
    e.g. the one Inductor expects) decomposes the ops it names while tracing. ``reals``: the caller's
    tensors the first ``fake_args`` stand for, swapped for their traced inputs where the backward reads them
    (a checkpointed region recomputed there reads a module's parameters again: capture/captured.py RealInputs).
    """
    with compiling():
        leaves = LeafSlots(flat_fn, len(fake_args))   # Note [New leaves] in capture/leaves.py
        meta = collect_metadata(leaves, fake_args, roles, fake_mode, with_backward=with_backward, non_leaf=non_leaf,
                                leaf_views=leaf_views, plain_views=plain_views)
        if leaves.found:
            fake_args, roles, names = _with_slots(leaves, fake_args, roles, names)
            meta = None
        try:
            return _trace_joint(leaves, fake_args, roles, fake_mode, with_backward=with_backward, names=names,
                                non_leaf=non_leaf, decompositions=decompositions, meta=meta, reals=reals)
        except BackwardRaises as raised:   # Note [Errors in the backward] in runtime/function.py
            error, outputs, inputs = raised.error, raised.outputs, raised.inputs
        probe = ErrorProbe()   # meta was collected with a backward: only a traced backward raises
        try:
            joint = _trace_joint(leaves, fake_args, roles, fake_mode, with_backward=True, names=names,
                                 non_leaf=non_leaf, decompositions=decompositions, meta=meta, probe=probe,
                                 reals=reals)
        except BackwardRaises:
            joint = None
        if joint is not None and probe.apart(joint):   # some outputs' backward runs: only the others raise
            outputs = tuple(k for k, o in enumerate(joint.outputs) if k in probe.outputs or (
                o.kind == "output_view" and o.input_index in probe.outputs and o.requires_grad))
            inputs = probe.inputs
        else:
            joint = _trace_joint(leaves, fake_args, roles, fake_mode, with_backward=False, names=names,
                                 non_leaf=non_leaf, decompositions=decompositions, reals=reals)
    # The outputs behind the node that raises are its copies (runtime/function.py, RaisesInBackward); eager's
    # chunk() / split() outputs among them still refuse in-place ops, and their grad_fn once their base was
    # written (fuzz seeds 300283, 310639, 503324; with new leaves' slots the metadata is collected again).
    if meta is None:
        meta = collect_metadata(leaves, fake_args, roles, fake_mode, with_backward=True, non_leaf=non_leaf,
                                leaf_views=leaf_views, plain_views=plain_views)
    joint = _recorded_storage_sets(joint, meta)   # either way (fuzz seed 1904245)
    multi = tuple((k, meta.outputs[k].view_meta[5] == WRITTEN_AFTER) for k in outputs
                  if k < len(meta.outputs) and meta.outputs[k].view_meta is not None
                  and meta.outputs[k].view_meta[5] in MULTI_OUTPUT and meta.outputs[k].requires_grad)
    return dataclasses.replace(joint, backward_error=error, error_outputs=outputs, error_inputs=inputs,
                               error_multi_output=multi)


def _old_storage(t):
    """Note [Inputs given another storage]: an input's first storage, if it was written and then set_()."""
    old = getattr(t, OLD_STORAGE, None)
    return t if old is None else old


def _recorded_storage_sets(joint: JointGraph, meta) -> JointGraph:
    """Note [Inputs given another storage]: traced again for a backward that raises (without one, or with
    the raising outputs taken apart), a ``set_`` autograd recorded (whose backward raises, as eager's) is
    still run with grad mode on by the epilogue."""
    if meta is None or len(meta.inputs) != len(joint.inputs):
        return joint
    inputs = [dataclasses.replace(info, new_storage=(*info.new_storage[:3], m.new_storage[3]))
              if info.new_storage is not None and m.new_storage is not None and info.new_storage[0] == "input"
              and info.new_storage[:2] == m.new_storage[:2] else info
              for info, m in zip(joint.inputs, meta.inputs, strict=True)]
    return dataclasses.replace(joint, inputs=inputs)


@dataclasses.dataclass
class ErrorProbe:
    """Note [Errors in the backward], per output: the entry is traced again with each
    differentiable output's (and recorded input mutation's) backward taken apart, and their sum
    for those that run, so that only the outputs whose backward raises in eager raise
    (``y = x @ w; x.add_(1); return y, w * 2``: ``w * 2``'s backward runs). ``outputs`` and
    ``inputs`` are the ones whose backward raises."""

    outputs: tuple[int, ...] = ()
    inputs: tuple[int, ...] = ()
    ran: int = 0

    def apart(self, joint: JointGraph) -> bool:
        """The backward of some, not all, outputs ran, with nothing that runs for its side effects
        (a hook of the backward that raised would have been traced too)."""
        return self.ran > 0 and bool(self.outputs or self.inputs) and not joint.hooks \
            and not any(info.mutated_in_backward for info in joint.inputs)

    def grads(self, diff_outs: list, wrt: list, tangents: list, diff_out_idx: list, recorded_idx: list) -> tuple:
        """The sum of the per-output gradients that do not raise eager's backward error."""
        total: list = [None] * len(wrt)
        outputs, inputs = [], []
        for k, (out, tangent) in enumerate(zip(diff_outs, tangents, strict=True)):
            try:
                got = torch.autograd.grad([out], wrt, grad_outputs=[tangent], allow_unused=True, retain_graph=True)
            except RuntimeError as exc:
                _refuse_reentrant_checkpoint(exc)
                if not _eager_backward_error(exc):
                    raise
                (outputs if k < len(diff_out_idx) else inputs).append(k)
                continue
            self.ran += 1
            total = [g if t is None else t if g is None else t + g for t, g in zip(total, got, strict=True)]
        self.outputs = tuple(diff_out_idx[k] for k in outputs)
        self.inputs = tuple(recorded_idx[k - len(diff_out_idx)] for k in inputs)
        return tuple(total)


def _summed(grads: tuple, counts: list[int]) -> tuple:
    """``grads`` regrouped: the sum of each run of ``counts`` of them (None where all are None)."""
    out, k = [], 0
    for n in counts:
        present = [g for g in grads[k:k + n] if g is not None]
        k += n
        total = present[0] if present else None
        for g in present[1:]:
            total = total + g
        out.append(total)
    return tuple(out)


def _with_slots(leaves: LeafSlots, fake_args: list, roles: tuple[Role, ...], names: list[str] | None):
    """The inputs, roles and names with one slot per new leaf appended (Note [New leaves])."""
    slots = slot_examples(leaves.found, fake_args)
    names = [*names, *(f"new_leaf_{k}" for k in range(len(slots)))] if names else None
    return [*fake_args, *slots], (*roles, *[Role.NEW_LEAF] * len(slots)), names


# Errors eager's autograd raises when its backward runs: a saved value modified in place since, and
# eager's memory-overlap checks on backward kernels.
_EAGER_BACKWARD_ERRORS = ("modified by an inplace operation", "unsupported operation:", "is not implemented",
                          "has been modified inplace")


def _eager_backward_error(exc: RuntimeError) -> bool:
    """``exc`` is an error eager's backward raises, not a tracer's own limit (data-dependent op, ...)."""
    return type(exc) is RuntimeError and any(m in str(exc) for m in _EAGER_BACKWARD_ERRORS)


def _refuse_reentrant_checkpoint(exc: RuntimeError) -> None:
    """A reentrant checkpoint's backward runs a nested ``backward()``, which autograd refuses inside the
    ``autograd.grad`` the trace takes the backward with: eager runs it, so the refusal names it."""
    if _REENTRANT_CHECKPOINT in str(exc):
        raise UnsupportedError(
            "torch.utils.checkpoint(..., use_reentrant=True) cannot be traced by aot_function / aot_module: its "
            "backward runs a nested backward(), which autograd refuses inside the gradient computation the trace "
            "takes", hint="pass use_reentrant=False (the same values and gradients; jointgraph then plans the "
                          "recomputation), compile with torch.compile(backend=\"jointgraph\"), which traces both, "
                          'or pass on_unsupported="eager"') from exc


# The start of the error torch.utils.checkpoint's CheckpointFunction.backward raises under autograd.grad
_REENTRANT_CHECKPOINT = "When use_reentrant=True, torch.utils.checkpoint is incompatible"


_STALE_VIEW = "returned an invalid gradient at index"   # autograd's check of a regenerated view's gradient


class BackwardRaises(Exception):
    """The traced backward raised ``error`` (eager raises it when its backward runs), for the
    differentiable user outputs ``outputs`` and the inputs ``inputs`` whose mutation autograd records."""

    def __init__(self, error: BaseException, outputs: tuple[int, ...], inputs: tuple[int, ...]):
        super().__init__(str(error))
        self.error = error
        self.outputs = outputs
        self.inputs = inputs


def _differentiable_outputs(outputs: list) -> tuple[int, ...]:
    """Outputs eager differentiates: tensors, and views of those (``t0, t0[0]``), which the entry
    compiled without a backward must hand out behind the node that raises."""
    return tuple(k for k, o in enumerate(outputs) if o.requires_grad and (
        o.kind == "tensor" or o.kind == "output_view" and outputs[o.input_index].kind == "tensor"))


def _trace_joint(flat_fn: LeafSlots, fake_args: list, roles: tuple[Role, ...], fake_mode,
                 *, with_backward: bool, names: list[str] | None, non_leaf: frozenset[int],
                 decompositions: dict | None = None, meta=None, probe: ErrorProbe | None = None,
                 reals: list | None = None) -> JointGraph:
    if meta is None:
        meta = collect_metadata(flat_fn, fake_args, roles, fake_mode, with_backward=with_backward,
                                non_leaf=non_leaf)
    tensor_out_idx = [i for i, o in enumerate(meta.outputs) if o.kind == "tensor"]
    diff_out_idx = [i for i in tensor_out_idx if meta.outputs[i].requires_grad]
    mutated_idx = [i for i, info in enumerate(meta.inputs) if info.mutates_data]
    grad_idx = [i for i, info in enumerate(meta.inputs) if info.requires_grad or info.requires_grad_set]
    # Note [Input mutations]: an input that requires grad is mutated on a clone, so the gradient
    # is taken with respect to its old value; a mutation autograd recorded has a differentiable
    # new value, an output with its own tangent.
    clone_idx = [i for i, info in enumerate(meta.inputs) if info.requires_grad
                 and (info.mutates_data and i in non_leaf or info.new_metadata is not None)] if with_backward else []
    recorded_idx = [i for i in mutated_idx if meta.inputs[i].mutation_recorded] if with_backward else []
    has_backward = with_backward and bool(diff_out_idx or recorded_idx) and bool(grad_idx)
    num_inputs = len(fake_args)

    def joint(*args):
        f_inputs = [to_fun_input(a, leaf=i not in non_leaf) for i, a in enumerate(args[:num_inputs])]
        with grad_context(with_backward), MetaFallbacks(), EagerInPlaceChecks(analyze=False):
            call_inputs = list(f_inputs)
            for i in clone_idx:   # an expanded input only reshaped: an alias, whose strides stay eager's
                call_inputs[i] = torch.ops.aten.alias(f_inputs[i]) if i in meta.uncloned else clone_as_is(f_inputs[i])
            for i in meta.as_views - set(clone_idx):   # the caller's views, where the metadata pass needed them
                call_inputs[i] = f_inputs[i].view_as(f_inputs[i])
            flat_fn.caller_inputs(f_inputs)
            with HooksInside(call_inputs, hooks), GeneratorArgs():   # Note [Hooks inside the function]
                outs = flat_fn(*call_inputs)
        carried = [geometry_tensor(from_fun(outs[info.carries])) if info.carries is not None
                   else call_inputs[info.new_value_of]   # Note [Inputs given another storage]
                   for info in meta.outputs[len(outs):]]
        outs = [returned(out, info) for out, info in zip(outs, meta.outputs[:len(outs)], strict=True)] + carried
        made_by[:] = [_sequence_nr(outs[i]) for i in tensor_out_idx]   # Note [Which op saved a value]
        results = [from_fun(outs[i]) for i in tensor_out_idx]
        grads: list = []
        if has_backward:
            f_tangents = [to_fun(t) for t in args[num_inputs:]]
            diff_outs = [outs[i] for i in diff_out_idx] + [call_inputs[i] for i in recorded_idx]
            tie_tangents(diff_outs, f_tangents)
            wrt = [[call_inputs[i]] if i in meta.as_views else flat_fn.wrt(f_inputs[i])   # a slot's: its leaf's
                   for i in grad_idx]   # gradient edges (Note [New leaves]), their gradients summed
        mutated = [from_fun(_old_storage(call_inputs[i])) for i in mutated_idx]
        if has_backward:
            before = _mutation_counters(f_inputs)
            # eager's backward runs where the caller calls it, outside the autocast region of the call (its
            # forward's casts are nodes already): traced without autocast (fuzz --semantics12 seed 4901076)
            # not an input the function writes: eager's recomputation reads the tensor as written, and its
            # saved-value check of the region's first read is lost on the graph input (refused as before)
            real_inputs = RealInputs({id(r): call_inputs[i] for i, r in enumerate(reals or ())
                                      if isinstance(r, torch.Tensor) and i < len(meta.inputs)
                                      and not meta.inputs[i].mutates_data and meta.inputs[i].new_metadata is None
                                      and not meta.inputs[i].new_storage})
            with _BackwardPhase(), (backward_of := _BackwardOf(diff_outs)), torch._C._DisableAutocast(), real_inputs:
                try:
                    flat_wrt = [w for ws in wrt for w in ws]
                    if probe is not None:
                        got = probe.grads(diff_outs, flat_wrt, f_tangents, diff_out_idx, recorded_idx)
                    else:
                        got = torch.autograd.grad(diff_outs, flat_wrt, grad_outputs=f_tangents, allow_unused=True)
                    got = _summed(got, [len(ws) for ws in wrt])
                except GuardOnDataDependentSymNode as exc:   # Note [Unbacked sizes]
                    raise backward_depends_on_values(exc) from exc
                except RuntimeError as exc:   # a saved value modified in place, ...: eager raises at backward
                    _refuse_reentrant_checkpoint(exc)
                    if _STALE_VIEW in str(exc):
                        raise stale_view_error("a view taken before an in-place view op on the tensor it views, "
                                               "or on another view of its base, is differentiated: its gradient "
                                               "comes from the new geometry") from exc
                    if _NO_GRAD_FN in str(exc):   # fuzz --semantics12 seed 7900533: a requires_grad_() on an input
                        raise UnsupportedError(   # after a view of it was taken, read by a write into another input
                            "an output the function's autograd state made differentiable has no history in the "
                            "traced backward (a requires_grad_() on an input after a view of it was taken, and the "
                            "view written into another input, is one such program): not supported",
                            hint='call requires_grad_() before taking views of the input, or pass '
                                 'on_unsupported="eager"') from exc
                    if not _eager_backward_error(exc):
                        raise   # a tracer's own limit (data-dependent op, ...), not an error eager's backward raises
                    raise BackwardRaises(exc, _differentiable_outputs(meta.outputs), tuple(recorded_idx)) from exc
                # Note [Tangents that reach a node]; only read where gradients can be left out (several tangents)
                reach = backward_of.gradient_reach(flat_wrt) if len(diff_outs) > 1 else [()] * len(flat_wrt)
                k = 0
                for i, ws in zip(grad_idx, wrt, strict=True):
                    found = reach[k:k + len(ws)]
                    k += len(ws)
                    gradient_reach[i] = None if None in found else tuple(sorted({r for f in found for r in f}))
                refuse_subclass_gradients(got, [names[i] if names else f"arg{i}" for i in grad_idx])
                by_input = dict(zip(grad_idx, got, strict=True))
                grads = [from_fun(by_input.get(i)) for i in range(num_inputs)]
                bw_mutated[:] = _backward_mutations(f_inputs, before, meta.inputs)
                grads += [from_fun(f_inputs[i]) for i in bw_mutated]
        return [*results, *mutated, *grads]

    bw_mutated: list[int] = []   # inputs the backward mutates, found while tracing it
    made_by: list = []           # per user tensor output: the sequence number of its grad_fn, or None
    gradient_reach: dict = {}    # per input differentiated: the tangents reaching its gradient (Note [Tangents ...])
    hooks = HookTable()
    tangents = list(meta.tangent_examples)
    with fake_mode:
        for i in recorded_idx:   # the input's final shape, () included
            shape = meta.inputs[i].final_shape
            tangents.append(torch.empty(fake_args[i].shape if shape is None else shape, dtype=fake_args[i].dtype,
                                        device=fake_args[i].device))
    example = list(fake_args) + (tangents if has_backward else [])
    from torch._dispatch.python import enable_python_dispatcher

    with translate_errors(), rng_state_as_effects(), module_scopes(), fake_mode, enable_python_dispatcher(), \
            JointFunctionalMode():
        storage_bytes = storage_sizes(fake_args)
        new_epoch(fake_mode)
        # no per-node stack traces: module_scopes records the user's call site, cheaper
        gm = make_fx(joint, decomposition_table=decompositions)(*example)
        restore_storage_bytes(fake_args, storage_bytes)
        insert_runtime_asserts(gm, fake_mode)   # Note [Unbacked sizes]
    _remove_effect_tokens(gm, num_placeholders=len(example))
    gm.graph.eliminate_dead_code(is_impure_node=must_run)   # Note [Ops that check values], Note [Collectives]

    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, node in enumerate(phs):
        node.meta["role"] = roles[i] if i < num_inputs else Role.TANGENT
        node.meta["input_index"] = i
        wanted = names[i] if names and i < num_inputs else (
            f"tangent_{i - num_inputs}" if i >= num_inputs else f"{roles[i].value}_{i}")
        node._rename(wanted)
        node.target = node.name
    _mark_input_copies(gm.graph, [phs[i] for i in clone_idx if i not in meta.uncloned])
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    out_roles = ([Role.USER_OUTPUT] * len(tensor_out_idx) + [Role.MUTATED_INPUT] * len(mutated_idx)
                 + ([Role.GRADIENT] * num_inputs if has_backward else [])
                 + [Role.BACKWARD_MUTATION] * len(bw_mutated))
    out.args = (tuple(out.args[0]),)
    out.meta["roles"] = out_roles
    out.meta["made_by"] = tuple(made_by)
    out.meta["gradient_reached_from"] = dict(gradient_reach)
    gm = lazy_graph_module(gm, gm.graph)   # passes rewrite it; its code is generated only if printed
    inputs = [dataclasses.replace(info, mutated_in_backward=i in bw_mutated) for i, info in enumerate(meta.inputs)]
    return JointGraph(gm=gm, inputs=inputs, outputs=meta.outputs, out_spec=None,
                      has_backward=has_backward, fake_mode=fake_mode, hooks=hooks,
                      new_leaves=flat_fn.found)


def _mark_input_copies(graph: torch.fx.Graph, copied: list) -> None:
    """Tag the copy the trace makes of each input in ``copied`` (Note [Input mutations]: an input that
    requires grad is written on a copy) with ``meta["copy_of_input"]``: the function saw the copy as the
    input itself, so what is saved of it is the input, eager's version-checked tensor (fuzz seed 503757).
    The copy is the input's first user: the trace makes it before the function runs."""
    if not copied:
        return
    order = {node: k for k, node in enumerate(graph.nodes)}
    for ph in copied:
        first = min(ph.users, key=order.__getitem__, default=None)
        if first is not None and first.op == "call_function" \
                and first.target in (torch.ops.aten.clone.default, torch.ops.aten.copy.default):
            first.meta["copy_of_input"] = ph.meta["input_index"]


def _remove_effect_tokens(gm: torch.fx.GraphModule, *, num_placeholders: int) -> None:
    """Turn ``with_effects(token, op, *args)`` back into ``op(*args)`` and drop the token inputs.

    Functionalization threads an effect token through ops with side effects (such as
    ``aten._linalg_check_errors``) and ``make_fx`` lifts the token to an extra input.
    The graph runs its nodes in order, so the token is not needed to order them.
    """
    graph = gm.graph
    with_effects = getattr(torch.ops.higher_order, "with_effects", None)
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not with_effects:
            continue
        token, op, *args = node.args
        with graph.inserting_before(node):
            call = graph.call_function(op, tuple(args), dict(node.kwargs))
        call.meta.update(node.meta)
        call.meta["val"] = None
        for user in list(node.users):
            index = user.args[1]
            if index == 0:
                user.replace_all_uses_with(token)
            elif len(op._schema.returns) == 1:
                user.replace_all_uses_with(call)
            else:
                with graph.inserting_before(user):
                    item = graph.call_function(operator.getitem, (call, index - 1))
                item.meta.update(user.meta)
                user.replace_all_uses_with(item)
            graph.erase_node(user)
        graph.erase_node(node)
    for i, ph in enumerate([n for n in graph.nodes if n.op == "placeholder"]):
        if i >= num_placeholders:
            if ph.users:
                raise UnsupportedError("an operation with side effects returns its effect token from the graph")
            graph.erase_node(ph)
