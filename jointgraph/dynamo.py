"""The torch.compile backend: ``backend="jointgraph"`` or ``jointgraph.backend(**options)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from .ir import Role
from .options import CompileOptions, make_options


def backend(**options: Any) -> Callable:
    """A torch.compile backend with the given options (see docs/API.md)."""
    opts = make_options(**options)

    def jointgraph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return compile_dynamo_graph(gm, example_inputs, opts)

    return jointgraph


def jointgraph_backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """The backend registered under the name "jointgraph" (default options)."""
    return compile_dynamo_graph(gm, example_inputs, make_options())


def compile_dynamo_graph(gm: torch.fx.GraphModule, example_inputs: list, options: CompileOptions) -> Callable:
    """Compile a graph Dynamo captured. Dynamo guards the call, so the result is one entry."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode

    from . import cache
    from .api import build_plan, compile_entry, make_layout, non_leaf_inputs
    from .capture.captured import Recapture
    from .capture.guards import ambient_state
    from .capture.inputs import FlatSignature, make_flat_fn
    from .compiled import CompiledFunction
    from .errors import UnsupportedError
    from .runtime.aliasing import AliasedInputs, SyntheticBases

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
    request, hit = cache.lookup(options.cache, source, signature, example_inputs, options, dynamic=False,
                                saved_hooks=None, ambient=ambient_state())
    if hit is not None:
        entry = compile_entry(hit[0], None, None, options, signature, None, fakes, layout=hit[1])
        plan = entry.plan
    else:
        try:
            plan, joint, graphs = build_plan(flat_fn, fakes, signature.roles, fake_mode, options,
                                             with_backward=with_backward, non_leaf=non_leaf_inputs(example_inputs))
        except Recapture as found:   # Dynamo lifts what a program captures; a real tensor left in its graph is not
            shapes = ", ".join(str(tuple(t.shape)) for t in found.tensors)
            raise UnsupportedError(f"the graph Dynamo handed over reads real tensors that are not graph inputs "
                                   f"(shapes {shapes}); jointgraph lifts captured tensors through aot_function "
                                   "only (Note [Captured tensors])") from None
        layout = make_layout(joint, graphs, signature, out_box[0], fakes)
        if request is not None:   # before the graph compilers run: they may rewrite the graphs
            request.save(plan, layout)
        entry = compile_entry(plan, joint, graphs, options, signature, out_box[0], fakes, layout=layout)
    run = entry.run_inputs
    synthetic = SyntheticBases(call_graph, lambda inner: CompiledFunction(inner, options))   # Note [Aliased inputs]

    def compiled(*args):
        inputs = list(args)
        try:
            return run(inputs)
        except AliasedInputs as aliased:
            return synthetic(inputs, spec, entry.layout, aliased)

    compiled.plan = plan  # for inspection
    return compiled


def _is_fake(x: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return is_fake(x)
