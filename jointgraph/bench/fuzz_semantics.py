"""Writers for issue 12's half of the fuzz oracle: autograd state, non-tensor outputs, autocast, guards, errors.

    from jointgraph.bench import fuzz, fuzz_semantics
    fuzz.run(300, seed=0, writers=fuzz_semantics.SEMANTICS12_WRITERS)    # benchmarks/fuzz.py --semantics12

Opt-in, like ``fuzz.STORAGE_WRITERS``: the default programs (and the CI run's seeds) stay what they were.
Besides its statement writers the table turns on two oracle steps (``fuzz.Writers.steps``): most programs
get a guard change and a third call under it (Note [Fuzz guards] in fuzz.py), some get their float outputs
modified in place right after the call (``out.mul_(2)``, before backward), as a user would.
"""

from __future__ import annotations

from . import fuzz
from .fuzz import SCALARS, _eval, _matmul_fits, _mutation, _operand, _Scope, _Statement, _target, _view_suffix


def _floats(scope: _Scope) -> list[str]:
    return scope.tensors(floating=True)


def _detach_requires_grad(scope: _Scope) -> _Statement | None:
    """``v = x.detach().requires_grad_()``: a new leaf sharing x's storage (a returned ``v.t()`` must not
    send gradients into x)."""
    names = _floats(scope)
    if not names:
        return None
    name = scope.fresh()
    x = scope.pick(names)
    tail = scope.rng.choice(("", "", f" * {scope.rng.choice(SCALARS)}"))
    return _Statement(f"{name} = {x}.detach().requires_grad_(){tail}", name, "value")


def _view_requires_grad(scope: _Scope) -> _Statement | None:
    """``x.view(-1).requires_grad_(True)`` and the like (raises for a view of a non-leaf that requires grad)."""
    names = _floats(scope)
    if not names:
        return None
    x = scope.pick(names)
    suffix = scope.rng.choice((".view(-1)", _view_suffix(scope.rng, scope.env[x].shape)))
    name = scope.fresh()
    return _Statement(f"{name} = {x}{suffix}.requires_grad_(True)", name, "value")


def _inner_leaf(scope: _Scope) -> _Statement | None:
    """A leaf created inside f (``torch.ones(..., requires_grad=True)``) multiplied into a value."""
    names = _floats(scope)
    if not names:
        return None
    x = scope.pick(names)
    shape = tuple(scope.env[x].shape)
    factory = scope.rng.choice((f"torch.ones({shape}, requires_grad=True)",
                                f"torch.full({shape}, {scope.rng.choice(SCALARS)}, requires_grad=True)"))
    name = scope.fresh()
    return _Statement(f"{name} = {x} * {factory}", name, "value")


def _non_tensor(scope: _Scope) -> _Statement | None:
    """A non-tensor value that f returns: ``x.shape``, ``x.size(0)``, ``x.dim()``, a Python float."""
    names = scope.tensors()
    if not names:
        return None
    x = scope.pick(names)
    value = scope.env[x]
    options = [f"{x}.shape", f"{x}.dim()", f"{x}.numel()", f"{x}.dtype"]
    options += [f"{x}.size(0)", f"{x}.shape[0] * SCALE"] if value.dim() >= 1 else []
    options += [f"{x}.sum().item()"] if value.is_floating_point() and scope.rng.random() < 0.3 else []
    name = f"n{sum(1 for n in scope.origin if n.startswith('n'))}"
    return _Statement(f"{name} = {scope.rng.choice(options)}", name, "non-tensor")


def _autocast(scope: _Scope) -> _Statement | None:
    """A ``with torch.autocast("cpu", ...)`` region (bf16, or disabled) around a matmul or a pointwise op."""
    names = _floats(scope)
    if not names:
        return None
    x = scope.pick(names)
    value = scope.env[x]
    exprs = [f"{x} @ {y}" for y in _floats(scope) if _matmul_fits(value, scope.env[y])]
    exprs += [f"{x} @ {x}.t()"] if value.dim() == 2 else []
    exprs = exprs or [f"{x}.sin() * {scope.rng.choice(SCALARS)}"]
    expr = scope.rng.choice(exprs) + scope.rng.choice(("", "", ".float()"))
    region = scope.rng.choice(('torch.autocast("cpu", torch.bfloat16)', 'torch.autocast("cpu", torch.bfloat16)',
                               'torch.autocast("cpu", enabled=False)'))
    name = scope.fresh()
    return _Statement(f"with {region}:\n    {name} = {expr}", name, "value")


def _grad_mode(scope: _Scope) -> _Statement | None:
    """A ``with torch.enable_grad():`` (or ``set_grad_enabled(True)``) region around an op or an in-place write: a
    no-op in a call with grad mode on; under the "no_grad" guard, history the caller's no_grad does not stop
    (Note [Grad mode switched on inside] in capture/context.py). Sometimes ``torch.inference_mode()`` instead."""
    names = _floats(scope)
    if not names:
        return None
    region = scope.rng.choice(("torch.enable_grad()", "torch.set_grad_enabled(True)"))
    if scope.rng.random() < 0.4 and (target := _target(scope)) is not None:
        return _Statement(f"with {region}:\n    {_mutation(scope, *target)}")
    x = scope.pick(names)
    name = scope.fresh()
    expr = scope.rng.choice((f"{x} * {scope.rng.choice(SCALARS)}", f"{x}.sin()", f"({x} * {x}).sum()"))
    if scope.rng.random() < 0.2:   # an inference tensor (eager's result is one), or a view taken under it
        region, expr = "torch.inference_mode()", scope.rng.choice((expr, f"{x}.view(-1)", f"{x}.sin().clone()"))
    return _Statement(f"with {region}:\n    {name} = {expr}", name, "value")


def _ambient(scope: _Scope) -> _Statement | None:
    """Something the graph depends on besides the arguments: the global float ``SCALE``, a tensor made with
    the default dtype, a matmul outside any autocast region (the ambient autocast state)."""
    names = _floats(scope)
    if not names:
        return None
    x = scope.pick(names)
    value = scope.env[x]
    shape = tuple(value.shape)
    c = scope.rng.choice(SCALARS)
    options = [f"{x} * SCALE", f"{x} + SCALE", f"{x}.sin() if SCALE > 2.5 else {x}.cos()",
               f"{x} + torch.ones({shape})", f"{x} * torch.full({shape}, {c})", f"{x} - torch.zeros({shape})"]
    options += [f"{x} @ {x}.t()"] if value.dim() == 2 else []
    name = scope.fresh()
    return _Statement(f"{name} = {scope.rng.choice(options)}", name, "value")


def _raising(scope: _Scope) -> _Statement | None:
    """An op that raises in eager though its result is unused (kept: f ends there), or a value saved for
    backward then modified through a detached alias (eager raises at backward)."""
    names = scope.tensors()
    if not names:
        return None
    x = scope.pick(names)
    value = scope.env[x]
    name = scope.fresh()
    if value.is_floating_point() and scope.rng.random() < 0.4:
        return _Statement(f"{name} = {x}.sin()\n{x}.detach().add_(1)", name, "value")
    bound = value.shape[0] + 3 if value.dim() else 0
    options = [f"{x}[{bound}]", f"{x}.as_strided(({value.numel() + 64},), (1,))", f"{x}.view({value.numel() + 1})",
               f"{x}.index_select(0, torch.tensor([{bound}]))" if value.dim() else f"{x}[0]"]
    return _Statement(f"{name} = {scope.rng.choice(options)}", name, "value", keep=True)


def _views_of_outputs(scope: _Scope) -> _Statement | None:
    """A multi-output view (``unbind``, ``split``, ``chunk``) of an input or value, one piece named."""
    names = [n for n in scope.tensors() if scope.env[n].dim() >= 1 and scope.env[n].shape[0] >= 2]
    if not names:
        return None
    x = scope.pick(names)
    expr = scope.rng.choice((f"{x}.unbind(0)[0]", f"{x}.split(1)[1]", f"{x}.chunk(2)[0]"))
    if _eval(expr, scope.env) is None:
        return None
    origin = "input view" if scope.origin[x].startswith("input") else "value view"
    name = scope.fresh()
    return _Statement(f"{name} = {expr}", name, origin)


def _in_place_operand(scope: _Scope) -> _Statement | None:
    """``x.add_(y)``: an in-place op whose operand may be the only thing requiring grad."""
    names = _floats(scope)
    if not names:
        return None
    x = scope.pick(names)
    y = _operand(scope, scope.env[x].shape)
    return _Statement(f"{x}.{scope.rng.choice(('add_', 'mul_'))}({y})") if y else None


def _functional_in_place(scope: _Scope) -> _Statement | None:
    """``F.relu(x, inplace=True)`` and its kin (``nn.ReLU(inplace=True)``): in-place writes whose names do not end
    in ``_``, on an input, a view or a value, possibly through ``.detach()``."""
    target = fuzz._target(scope, scope.tensors(floating=True),
                          wrap=scope.rng.choice(("", "", ".detach()")))
    if target is None:
        return None
    expr = target[0]
    call = scope.rng.choice((f"torch.nn.functional.relu({expr}, inplace=True)",
                             f"torch.nn.functional.hardtanh({expr}, -0.5, 0.5, inplace=True)",
                             f"torch.nn.functional.leaky_relu({expr}, 0.1, inplace=True)",
                             f"torch.nn.ReLU(inplace=True)({expr})"))
    return _Statement(call)


def _graph_break(scope: _Scope) -> _Statement | None:
    """``torch._dynamo.graph_break()``: nothing in eager or under aot_function; under torch.compile the values
    live so far cross from one graph into the next, as graph outputs the next one reads (fuzz seed 5902826:
    an output its backward reads, written through a detach the next graph returned)."""
    return _Statement("torch._dynamo.graph_break()") if scope.tensors() else None


def _checkpoint(scope: _Scope) -> _Statement | None:
    """``torch.utils.checkpoint.checkpoint`` of a small region: recomputed in the backward (Note [Activation
    checkpointing]), after the program or the oracle may have written what it read. Mostly non-reentrant; a
    reentrant one is refused by name under aot_function, and Dynamo traces it."""
    names = _floats(scope)
    if not names:
        return None
    x = scope.pick(names)
    body = scope.rng.choice(("u.sin() * 2.0", "u.exp().mul_(0.5)", "torch.tanh(u) + u", "(u * u).relu()",
                             "u.t().cos()" if scope.env[x].dim() == 2 else "u.cos()"))
    reentrant = scope.rng.random() < 0.15
    name = scope.fresh()
    return _Statement(f"{name} = torch.utils.checkpoint.checkpoint(lambda u: {body}, {x}, "
                      f"use_reentrant={reentrant})", name, "value")


SEMANTICS12_WRITERS: fuzz.Writers = fuzz.Writers({
    **fuzz.WRITERS,
    "detach_requires_grad": (_detach_requires_grad, 1.5),
    "view_requires_grad": (_view_requires_grad, 1.0),
    "inner_leaf": (_inner_leaf, 1.2),
    "non_tensor": (_non_tensor, 1.5),
    "autocast": (_autocast, 2.0),
    "ambient": (_ambient, 2.5),
    "raising": (_raising, 0.6),
    "multi_output_view": (_views_of_outputs, 1.5),
    "in_place_operand": (_in_place_operand, 1.0),
    "graph_break": (_graph_break, 3.0),
    "functional_in_place": (_functional_in_place, 1.5),
    "grad_mode": (_grad_mode, 0.8),
}, steps=("guard", "mutate_outputs", "assign_data"))

# Opt-in (``benchmarks/fuzz.py --checkpoint``): a new writer would change every program the seeds above give.
CHECKPOINT_WRITERS: dict = {"checkpoint": (_checkpoint, 1.0)}

