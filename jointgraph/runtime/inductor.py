"""Inductor as jointgraph's graph compiler: one already-partitioned ATen graph at a time.

Note [Inductor as the graph compiler]
-------------------------------------
jointgraph's forward and backward graphs are already functional, already partitioned
ATen graphs, which is what Inductor's *inner* compiler (``compile_fx_inner``) takes.
``torch._inductor.compile`` is the wrong entry: it runs PyTorch's whole AOTAutograd
pipeline again, traces the forward as a training graph when its example inputs require
grad, and saves activations of its own for a backward that never runs.

- The joint graph is traced with Inductor's decomposition table when Inductor compiles
  either graph (``CompileOptions.decompositions``), as PyTorch's own pipeline does, so
  Inductor sees the ops it has lowerings for.
- Every graph output is *user visible*: Inductor keeps its traced strides. The backward
  was traced against the saved values' traced layout, and the simulator counts bytes
  from that layout, so what it predicts is what runs.
- Both graphs use Inductor's boxed calling convention: the generated code takes one list
  and clears it, then frees each input after its last use. The backward's saved values
  are therefore freed as the backward consumes them (Note [Runtime call path]).
- Inductor rewrites the graph it compiles (its post-grad passes); it gets a copy, so the
  Plan keeps the graphs the simulator and the report describe. It compiles under Dynamo's
  (re-entrant) compile lock, as PyTorch's own backward compile does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
import torch.fx

from ..ir.graph import output_node


def inductor_decompositions() -> dict:
    """The decomposition table Inductor expects its graphs to be traced with."""
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table()


def compile_inductor(gm: torch.fx.GraphModule, example_inputs: list, *, is_backward: bool) -> Callable:
    """Compile ``gm`` with Inductor's inner compiler; return ``run(args: list)`` (boxed)."""
    from torch._dynamo.convert_frame import compile_lock  # re-entrant: Dynamo holds it when it calls us
    from torch._inductor.compile_fx import compile_fx_inner

    copy = _copy(gm)
    out = output_node(copy.graph)
    out.meta["user_visible_output_idxs"] = [i for i, v in enumerate(out.args[0]) if isinstance(v, torch.fx.Node)]
    from torch._guards import detect_fake_mode

    with compile_lock, _tracing(detect_fake_mode(example_inputs)):   # Inductor's compile state is process-global
        return compile_fx_inner(copy, list(example_inputs), is_backward=is_backward)


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    value = graph.graph_copy(gm.graph, {})
    graph.output(value).meta.update(output_node(gm.graph).meta)
    return torch.fx.GraphModule(gm, graph)


def _tracing(fake_mode):
    """A TracingContext for Inductor's guards and shape env when none is active."""
    from torch._guards import TracingContext, tracing

    if fake_mode is None or TracingContext.try_get() is not None:
        return contextlib.nullcontext()
    return tracing(TracingContext(fake_mode))
