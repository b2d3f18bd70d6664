"""Trace forward and backward together into one functional ATen graph.

The user's flat function runs on fake tensors wrapped for functionalization
(``FunctionalTensorMode``) while ``make_fx`` records the ATen ops that reach
the bottom of the dispatcher. Autograd runs above functionalization, so
``torch.autograd.grad`` inside the traced function records the backward too.

Note [Input mutations]
----------------------
Functionalization turns ``x.add_(1)`` on an input into a fresh value. A metadata
mutation (``t_()``, ``unsqueeze_()``, ``as_strided_()``) is recorded as the
input's final (size, stride, storage offset) and replayed with ``as_strided_`` on
the caller's tensor before any data copy. A first,
untraced pass (``collect_metadata``) records, per input, whether its data was
mutated; the traced graph then returns the input's new value as an extra output
with role ``MUTATED_INPUT``. The runtime copies it into the caller's tensor
after the forward (an epilogue with a precomputed index list), so the graph
itself stays functional and the planner sees every value.

An input that requires grad and is not a leaf may be mutated, as in eager: the
traced function mutates a clone, the clone's new value is a differentiable
output with its own tangent, and the epilogue's ``copy_`` runs with grad mode on
so the caller's tensor takes the mutation's autograd history. A mutated leaf
that requires grad raises eager's own error (at trace time, and at run time for
an entry compiled for a non-leaf). If a mutated input is also saved for the
backward, the forward saves a copy of its old value. Metadata mutations of
inputs that require grad, ``resize_`` / ``set_`` of inputs and mutations of
inputs that share storage are refused with ``UnsupportedError``; nothing is
applied half-way.

Note [Storage resize]
---------------------
FSDP2 frees a parameter's storage (``resize_storage_bytes_(p, 0)``) after use and
re-allocates and fills it (resize to full, then ``copy_``) before the next use.
Functionalization adds nothing to the graph for a resize: a resized-up input's
new value is the ``copy_`` that fills it. The metadata pass compares each input's
storage size before and after the function (undoing the resize on the fake
input afterwards): a net change records the final size (only 0 or the full size
are legal), which the epilogue applies with ``untyped_storage().resize_`` before
copying data in; an input whose storage ends at zero bytes gets no data copy; a
resize up, use, and back down is no net mutation at all. The graph therefore
never contains a ``resize -> copy_ -> resize(0)`` sequence to clean up.

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

import contextlib
import dataclasses
import functools
import operator
import threading
from collections.abc import Callable

import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
)
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.multiprocessing.reductions import StorageWeakRef

from ..errors import UnsupportedError, source_from_traceback
from ..ir import InputInfo, JointGraph, OutputInfo, Role
from ..ir.graph import lazy_graph_module

try:  # the name moved between releases
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode as _DataDependentGuard
except ImportError:  # pragma: no cover
    _DataDependentGuard = RuntimeError

_FAKE_DATA_ACCESS = "data is not allocated yet"   # c10's message when a kernel reads a fake tensor's data
_DATA_DEPENDENT = (DataDependentOutputException, DynamicOutputShapeException, _DataDependentGuard)


@dataclasses.dataclass
class TraceMetadata:
    """What the untraced metadata pass learned about inputs and outputs."""

    inputs: list[InputInfo]
    outputs: list[OutputInfo]
    tangent_examples: list[torch.Tensor]   # fake tensors, one per differentiable output


def _to_fun(x):
    return FunctionalTensor.to_functional(x) if isinstance(x, torch.Tensor) else x


def _from_fun(x):
    if isinstance(x, FunctionalTensor):
        torch._sync(x)
        return torch._from_functional_tensor(x.elem)
    return x


def _grad_context(with_backward: bool):
    return torch.enable_grad() if with_backward else torch.no_grad()


class _RefuseTraceTimeHooks(torch.overrides.TorchFunctionMode):
    """Refuse autograd hooks registered inside the traced function.

    A hook on an intermediate would run once, on fake tensors, while the backward is
    traced, and never again at run time (PyTorch's own aot_function does exactly
    that). Until hooks are carried into the graph, they are refused.
    """

    _REFUSED = {torch.Tensor.register_hook: "Tensor.register_hook", torch.Tensor.retain_grad: "Tensor.retain_grad",
                torch.Tensor.register_post_accumulate_grad_hook: "Tensor.register_post_accumulate_grad_hook"}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self._REFUSED.get(func)
        if name is not None:
            from ..errors import user_source_line

            raise UnsupportedError(f"{name} on a tensor inside the compiled function is not supported: the hook "
                                   "would run at trace time only", source=user_source_line(),
                                   hint="register the hook outside the compiled function (on its inputs or "
                                        'outputs), or pass on_unsupported="eager"')
        return func(*args, **(kwargs or {}))


class _RngStateGuard:
    """Stands in for ``torch.random.default_generator`` while tracing: reading the state is
    allowed, setting it (``torch.manual_seed``, ``torch.set_rng_state``) is refused, since it
    would run once at trace time and the compiled graph would draw from the caller's state."""

    def __init__(self, real):
        self._real = real
        self._tracing_thread = threading.get_ident()

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _refuse(self, name, *args, **kwargs):
        from ..errors import user_source_line

        if threading.get_ident() != self._tracing_thread:   # another thread's eager code: not ours to refuse
            return getattr(self._real, name)(*args, **kwargs)
        raise UnsupportedError("setting the random number generator state (torch.manual_seed, torch.set_rng_state) "
                               "inside the compiled function is not supported: it would happen at trace time only",
                               source=user_source_line(),
                               hint='seed outside the compiled function, or pass on_unsupported="eager"')

    manual_seed = functools.partialmethod(_refuse, "manual_seed")
    set_state = functools.partialmethod(_refuse, "set_state")
    seed = functools.partialmethod(_refuse, "seed")


@contextlib.contextmanager
def _refuse_rng_state_changes():
    real = torch.random.default_generator
    torch.random.default_generator = _RngStateGuard(real)
    try:
        yield
    finally:
        torch.random.default_generator = real


@contextlib.contextmanager
def _translate_errors():
    """Turn tracer failures the user cannot see into UnsupportedError with their source line."""
    try:
        yield
    except UnsupportedError:
        raise
    except _DATA_DEPENDENT as exc:
        op = getattr(exc, "func", None)
        what = f"data-dependent operation {op}" if op is not None else "data-dependent Python control flow or value"
        raise UnsupportedError(
            f"{what} cannot be compiled ahead of time: its result depends on tensor values ({type(exc).__name__})",
            source=source_from_traceback(exc),
            hint='compute it outside the compiled function, or pass on_unsupported="eager"') from exc
    except UnsupportedOperatorException as exc:
        raise UnsupportedError(f"operator {exc.func} has no fake-tensor implementation",
                               source=source_from_traceback(exc)) from exc
    except RuntimeError as exc:
        if _FAKE_DATA_ACCESS not in str(exc):
            raise
        # A kernel read the data of a fake tensor: its result depends on tensor values.
        raise UnsupportedError(
            "an operation reads tensor values while tracing (for example indices passed as a tensor), "
            "so it cannot be compiled ahead of time", source=source_from_traceback(exc),
            hint='pass such arguments as Python values, or pass on_unsupported="eager"') from exc


def collect_metadata(flat_fn: Callable, fake_args: list, roles: tuple[Role, ...], fake_mode,
                     *, with_backward: bool, non_leaf: frozenset[int] = frozenset()) -> TraceMetadata:
    """Run ``flat_fn`` once on functional fakes; record mutations, aliasing and grad-requiring outputs.

    Inputs in ``non_leaf`` (the caller's tensor requires grad and is not a leaf) are
    cloned first, so an in-place op on them is legal, as it is in eager.
    """
    with _translate_errors(), _refuse_rng_state_changes(), fake_mode:
        with FunctionalTensorMode(_allow_token_discovery=True):
            f_args = [_to_fun(a) for a in fake_args]
            storage_bytes = _storage_bytes(fake_args)
            with _grad_context(with_backward), _RefuseTraceTimeHooks():
                call_args = [a.clone() if i in non_leaf and with_backward else a for i, a in enumerate(f_args)]
                flat_outs = flat_fn(*call_args)
            inputs = [_input_info(f, a, role) for f, a, role in zip(call_args, fake_args, roles, strict=True)]
            inputs = _storage_resizes(inputs, call_args, fake_args, storage_bytes)
            f_args = call_args
            input_storages = {StorageWeakRef(f.untyped_storage()): i for i, f in enumerate(f_args)
                              if isinstance(f, torch.Tensor)}
            outputs, tangents = [], []
            for out in flat_outs:
                info = _output_view_info(out, flat_outs, outputs, with_backward) or \
                    _output_info(out, f_args, input_storages, with_backward)
                outputs.append(info)
                if info.kind == "tensor" and info.requires_grad:
                    plain = _from_fun(_returned(out, info))
                    tangents.append((plain.shape, plain.dtype, plain.device))
        # Tangents are plain fakes: made outside FunctionalTensorMode.
        tangents = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype, device in tangents]
    return TraceMetadata(inputs, outputs, tangents)


def _storage_bytes(fake_args: list) -> list:
    return [a.untyped_storage().nbytes() if isinstance(a, torch.Tensor) else None for a in fake_args]


def restore_storage_bytes(fake_args: list, storage_bytes: list) -> None:
    """Undo the storage resizes a trace applied to the fake inputs themselves."""
    for a, nbytes in zip(fake_args, storage_bytes, strict=True):
        if nbytes is not None and a.untyped_storage().nbytes() != nbytes:
            a.untyped_storage().resize_(nbytes)


def _storage_resizes(infos: list[InputInfo], call_args: list, fake_args: list, before: list) -> list[InputInfo]:
    """Record each input's final storage size (Note [Storage resize])."""
    result = []
    for info, f, fake, nbytes in zip(infos, call_args, fake_args, before, strict=True):
        if nbytes is None:
            result.append(info)
            continue
        final = _from_fun(f).untyped_storage().nbytes()
        if final == nbytes:
            # Resized up and back down (or untouched): no net change; a zero-size input keeps no data.
            result.append(dataclasses.replace(info, mutates_data=info.mutates_data and final > 0))
            continue
        full = _full_storage_bytes(fake)
        if final not in (0, full):
            raise UnsupportedError(
                f"resize_storage_bytes_ leaves an input's storage at {final} bytes; only 0 (free) or its full "
                f"size ({full} bytes) can be compiled", hint='resize to 0 or full size, or on_unsupported="eager"')
        if info.requires_grad:
            raise UnsupportedError("storage resize of an input that requires grad is not supported",
                                   hint='resize a tensor that does not require grad, or on_unsupported="eager"')
        result.append(dataclasses.replace(info, storage_bytes=final, mutates_data=info.mutates_data and final > 0))
    restore_storage_bytes(fake_args, before)
    return result


def _full_storage_bytes(t: torch.Tensor) -> int:
    if t.numel() == 0:
        return 0
    extent = t.storage_offset() + sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True)) + 1
    return int(extent) * t.element_size()


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


def _input_info(f_arg, fake_arg, role: Role) -> InputInfo:
    if not isinstance(f_arg, torch.Tensor):
        return InputInfo(role=role, requires_grad=False)
    torch._sync(f_arg)
    mutated = torch._functionalize_has_data_mutation(f_arg.elem)
    new_metadata = None
    if torch._functionalize_has_metadata_mutation(f_arg.elem):
        new_metadata = _replayable_metadata(f_arg, fake_arg)
    hidden = mutated and torch._functionalize_are_all_mutations_hidden_from_autograd(f_arg.elem)
    return InputInfo(role=role, requires_grad=bool(fake_arg.requires_grad), mutates_data=bool(mutated),
                     mutation_hidden_from_autograd=bool(hidden), new_metadata=new_metadata)


def _replayable_metadata(f_arg, fake_arg) -> tuple:
    """(size, stride, storage_offset) an input ends with after ``t_()`` / ``unsqueeze_()`` / ..."""
    plain = _from_fun(f_arg)
    meta = (tuple(plain.shape), tuple(plain.stride()), plain.storage_offset())
    if fake_arg.requires_grad:
        raise UnsupportedError("metadata mutation (t_(), transpose_(), unsqueeze_(), as_strided_()) of an input "
                               "that requires grad is not supported",
                               hint='mutate a view instead (x = x.t()), or pass on_unsupported="eager"')
    if plain.untyped_storage().nbytes() != fake_arg.untyped_storage().nbytes():
        raise UnsupportedError("resize_() or set_() of an input is not supported",
                               hint='return the new tensor instead, or pass on_unsupported="eager"')
    if not all(isinstance(v, int) for v in (*meta[0], *meta[1], meta[2])):
        raise UnsupportedError("metadata mutation of an input with symbolic sizes is not supported",
                               hint='pass dynamic=False, or on_unsupported="eager"')
    return meta


def _output_view_info(out, flat_outs: list, infos: list[OutputInfo], with_backward: bool) -> OutputInfo | None:
    """An output that is an autograd view of an earlier tensor output is regenerated from it at run time,
    so it stays a view of that output (in-place ops on it behave as in eager)."""
    base = getattr(out, "_base", None) if isinstance(out, torch.Tensor) else None
    if base is None or with_backward and _from_custom_function(out):
        return None
    for i, info in enumerate(infos):
        if info.kind == "tensor" and flat_outs[i] is base:
            requires_grad = bool(with_backward and out.requires_grad)
            return OutputInfo(kind="output_view", requires_grad=requires_grad, input_index=i,
                              view_meta=_view_meta(out, requires_grad))
    return None


def _view_meta(out, requires_grad: bool) -> tuple:
    """How the runtime regenerates the view ``out`` (OutputInfo.view_meta)."""
    plain = _from_fun(out)
    multi_output = torch._functionalize_is_multi_output_view(out.elem)
    return (tuple(plain.shape), tuple(plain.stride()), plain.storage_offset(), plain.dtype, requires_grad,
            bool(multi_output))


def _returned(out, info: OutputInfo):
    """What the graph returns for a user output: a view of an intermediate returns its base."""
    return out._base if info.kind == "tensor" and info.view_meta is not None else out


def _from_custom_function(out) -> bool:
    """The output of a custom autograd.Function (Python or C++): its own backward, not a view's."""
    grad_fn = out.grad_fn
    return isinstance(grad_fn, torch.autograd.function.BackwardCFunction) or type(grad_fn).__name__ == "CppFunction"


def _output_info(out, f_args: list, input_storages: dict, with_backward: bool) -> OutputInfo:
    if not isinstance(out, torch.Tensor):
        return OutputInfo(kind="constant", constant=out)
    for i, f in enumerate(f_args):
        if out is f:
            return OutputInfo(kind="input", requires_grad=f.requires_grad, input_index=i)
    base = input_storages.get(StorageWeakRef(out.untyped_storage()))
    if base is not None and not (with_backward and _from_custom_function(out)):
        # A view of an input is regenerated from the caller's tensor; a custom Function's output
        # that aliases an input is a plain output, so the Function's backward stays in the graph.
        return OutputInfo(kind="input_view", requires_grad=out.requires_grad, input_index=base,
                          view_meta=_view_meta(out, bool(out.requires_grad)))
    view_meta = None
    if with_backward and out._base is not None and not _from_custom_function(out):
        # A view of an intermediate: returned from the autograd.Function it could not be modified
        # in place; the graph returns its base instead, and the runtime takes the view of it.
        view_meta = _view_meta(out, bool(out.requires_grad))
        out = out._base
    requires_grad = with_backward and out.requires_grad and (out.is_floating_point() or out.is_complex())
    return OutputInfo(kind="tensor", requires_grad=requires_grad, view_meta=view_meta)


def trace_joint(flat_fn: Callable, fake_args: list, roles: tuple[Role, ...], fake_mode,
                *, with_backward: bool, names: list[str] | None = None,
                non_leaf: frozenset[int] = frozenset()) -> JointGraph:
    """Trace ``flat_fn`` (forward, and its backward when ``with_backward``) into a JointGraph.

    Expects: ``fake_args`` are fake tensors of ``fake_mode`` (leaves with the
    caller's ``requires_grad``) or symbolic ints; ``flat_fn`` returns a flat list.
    Guarantees: a functional ATen graph whose placeholders are the inputs then one
    tangent per differentiable output, and whose outputs are the user tensors, the
    new values of mutated inputs, then one gradient (or None) per input; roles on
    every placeholder and on the output node.
    """
    meta = collect_metadata(flat_fn, fake_args, roles, fake_mode, with_backward=with_backward, non_leaf=non_leaf)
    tensor_out_idx = [i for i, o in enumerate(meta.outputs) if o.kind == "tensor"]
    diff_out_idx = [i for i in tensor_out_idx if meta.outputs[i].requires_grad]
    mutated_idx = [i for i, info in enumerate(meta.inputs) if info.mutates_data]
    grad_idx = [i for i, info in enumerate(meta.inputs) if info.requires_grad]
    # See Note [Input mutations]: a mutated input that requires grad is mutated on a clone
    # whose new value is a differentiable output with its own tangent.
    clone_idx = [i for i in mutated_idx if meta.inputs[i].requires_grad] if with_backward else []
    has_backward = with_backward and bool(diff_out_idx or clone_idx) and bool(grad_idx)
    num_inputs = len(fake_args)

    def joint(*args):
        f_inputs = [_to_fun(a) for a in args[:num_inputs]]
        with _grad_context(with_backward):
            call_inputs = list(f_inputs)
            for i in clone_idx:
                call_inputs[i] = f_inputs[i].clone()
            outs = flat_fn(*call_inputs)
        outs = [_returned(out, info) for out, info in zip(outs, meta.outputs, strict=True)]
        results = [_from_fun(outs[i]) for i in tensor_out_idx]
        grads: list = []
        if has_backward:
            f_tangents = [_to_fun(t) for t in args[num_inputs:]]
            diff_outs = [outs[i] for i in diff_out_idx] + [call_inputs[i] for i in clone_idx]
            wrt = [f_inputs[i] for i in grad_idx]
        mutated = [_from_fun(call_inputs[i]) for i in mutated_idx]
        if has_backward:
            before = _mutation_counters(f_inputs)
            with _BackwardPhase():
                got = torch.autograd.grad(diff_outs, wrt, grad_outputs=f_tangents, allow_unused=True)
                by_input = dict(zip(grad_idx, got, strict=True))
                grads = [_from_fun(by_input.get(i)) for i in range(num_inputs)]
                bw_mutated[:] = _backward_mutations(f_inputs, before, meta.inputs)
                grads += [_from_fun(f_inputs[i]) for i in bw_mutated]
        return [*results, *mutated, *grads]

    bw_mutated: list[int] = []   # inputs the backward mutates, found while tracing it
    tangents = list(meta.tangent_examples)
    with fake_mode:
        tangents += [torch.empty(fake_args[i].shape, dtype=fake_args[i].dtype, device=fake_args[i].device)
                     for i in clone_idx]
    example = list(fake_args) + (tangents if has_backward else [])
    from torch._dispatch.python import enable_python_dispatcher

    with _translate_errors(), fake_mode, enable_python_dispatcher(), \
            FunctionalTensorMode(_allow_token_discovery=True):
        storage_bytes = _storage_bytes(fake_args)
        gm = make_fx(joint)(*example)   # no per-node stack traces: ~15% of trace time, unused
        restore_storage_bytes(fake_args, storage_bytes)
    _remove_effect_tokens(gm, num_placeholders=len(example))
    gm.graph.eliminate_dead_code()

    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, node in enumerate(phs):
        node.meta["role"] = roles[i] if i < num_inputs else Role.TANGENT
        node.meta["input_index"] = i
        wanted = names[i] if names and i < num_inputs else (
            f"tangent_{i - num_inputs}" if i >= num_inputs else f"{roles[i].value}_{i}")
        node._rename(wanted)
        node.target = node.name
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    out_roles = ([Role.USER_OUTPUT] * len(tensor_out_idx) + [Role.MUTATED_INPUT] * len(mutated_idx)
                 + ([Role.GRADIENT] * num_inputs if has_backward else [])
                 + [Role.BACKWARD_MUTATION] * len(bw_mutated))
    out.args = (tuple(out.args[0]),)
    out.meta["roles"] = out_roles
    gm = lazy_graph_module(gm, gm.graph)   # passes rewrite it; its code is generated only if printed
    inputs = [dataclasses.replace(info, mutated_in_backward=i in bw_mutated) for i, info in enumerate(meta.inputs)]
    return JointGraph(gm=gm, inputs=inputs, outputs=meta.outputs, out_spec=None,
                      has_backward=has_backward, fake_mode=fake_mode)


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
