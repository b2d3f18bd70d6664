"""Turn a forward or backward GraphModule into a callable (fw_compiler / bw_compiler)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.fx

from ..errors import UnsupportedError
from ..ir.graph import materialize
from ..ir.rng import sets_rng_state


def compile_graph(gm: torch.fx.GraphModule, example_inputs: list, compiler, *, boxed: bool) -> Callable:
    """Return ``run(args)`` when ``boxed`` (the list is cleared as values are consumed),
    else ``run(*args)``.

    "eager" runs the FX graph itself; with ``boxed`` its generated code takes one list
    and clears it, so the backward frees each saved tensor after its last use. "inductor"
    compiles it with Inductor's inner compiler, boxed too (Note [Inductor as the graph compiler]).
    """
    if compiler == "eager":
        if boxed:
            return _boxed_graph(gm)
        return materialize(gm).forward
    if compiler == "inductor":   # Note [Inductor as the graph compiler]
        from .inductor import compile_inductor

        _refuse_rng_effects(gm)

        run = compile_inductor(gm, example_inputs, is_backward=boxed)
        return run if boxed else lambda *args: run(list(args))
    fn = compiler(gm, example_inputs)
    if boxed:
        return lambda args: fn(*_take(args))
    return fn


def _refuse_rng_effects(gm: torch.fx.GraphModule) -> None:
    """Inductor draws the seeds of its random kernels once, when its graph starts, so a seed or
    a state restore in the middle of the graph (Note [Seeding inside the function]) would not
    reach the random ops after it."""
    found = next((n for n in gm.graph.nodes if sets_rng_state(n)), None)
    if found is not None:
        raise UnsupportedError(f"{found.target} (torch.manual_seed / torch.set_rng_state / torch.random.fork_rng "
                               "inside the compiled function) is not supported with Inductor as the graph "
                               "compiler: Inductor draws its random seeds once at the start of the graph",
                               hint='use fw_compiler="eager" and bw_compiler="eager", seed outside the '
                                    'function, or pass on_unsupported="eager"')


def _take(args: list) -> list:
    taken = list(args)
    args.clear()
    return taken


def _boxed_graph(gm: torch.fx.GraphModule) -> Callable:
    codegen_cls = getattr(torch.fx.graph, "_BoxedCodeGen", None)
    if codegen_cls is None:  # older torch: no boxed codegen, values live until the call returns
        forward = materialize(gm).forward
        return lambda args: forward(*_take(args))
    gm.graph.set_codegen(codegen_cls())
    gm.recompile()
    return materialize(gm).forward
