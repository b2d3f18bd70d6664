"""The budget planner wired to the real pipeline: each candidate it considers is split, run
through the split passes and simulated (Note [Budget formulation] in planner/budget.py).

``plan_to_budget`` is what ``api.build_plan`` calls for ``partitioner="budget"``: it resolves a
fractional budget against the ``"default"`` plan's simulated peak and hands the planner a
``verify`` that runs the real split + split passes + simulator. It lives beside ``api.py``:
the planner itself never imports the passes or the split.
"""

from __future__ import annotations

import contextlib
import gc

import torch

from .ir import NO_RESHARDING, Plan, Resharding
from .ir.graph_utils import SavedChoice
from .options import CompileOptions
from .passes.pipeline import run_split_passes
from .passes.saved_codecs import apply_saved_codecs
from .planner.budget import plan_budget
from .planner.costs import annotate_seconds, device_for, graph_seconds
from .planner.simulate import simulate
from .split import split


def simulate_choices(joint_gm: torch.fx.GraphModule, choices: list[SavedChoice],
                     compilers: tuple[str, str] = ("eager", "eager"), *,
                     resharding: Resharding = NO_RESHARDING) -> tuple[int, float]:
    """(simulated peak bytes, estimated step seconds) of the plan ``choices`` gives, its forward and
    backward run by ``compilers``, the inputs ``resharding`` says the caller frees between them (Note
    [Inputs the caller reshards]): the simulation ``api.build_plan`` reports for the chosen plan."""
    graphs = split(joint_gm, choices, has_backward=True)
    if any(c.codec for c in choices):
        graphs = apply_saved_codecs(graphs, choices)
    graphs = run_split_passes(graphs)
    return (simulate(graphs.forward, graphs.backward, compilers, resharding=resharding).peak_bytes,
            step_seconds(graphs.forward, graphs.backward, compilers))


def plan_to_budget(joint_gm: torch.fx.GraphModule, options: CompileOptions,
                   resharding: Resharding = NO_RESHARDING) -> tuple[list[SavedChoice], dict[str, str]]:
    """The budget planner's choices and recompute reasons for ``options.memory_budget``; ``resharding``:
    the inputs the caller frees between forward and backward (Note [Inputs the caller reshards])."""
    compilers = cost_compilers(options)
    with gc_paused():
        annotate_seconds(joint_gm.graph, device_for(joint_gm.graph), compilers[1])
        result = plan_budget(joint_gm.graph, options.memory_budget,
                             lambda choices: simulate_choices(joint_gm, choices, compilers,
                                                                     resharding=resharding),
                             policy=options.saved_tensors, compiler=compilers[1])
    return result.choices, result.recompute_reasons


@contextlib.contextmanager
def gc_paused():
    """Note [No GC while planning]: each verified candidate builds two graphs (tens of thousands
    of objects on a deep model) on top of a heap already holding the joint graph and its fake
    tensors, so Python's cyclic collector keeps re-scanning that heap: 30-40% of planning time
    at 24 layers. The planner's garbage is a few graphs; it is collected after, as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def estimated_seconds(result: Plan) -> float:
    """The estimated step time of a plan (Note [Cost model])."""
    return step_seconds(result.forward, result.backward, cost_compilers(result.options))


def cost_compilers(options: CompileOptions | None) -> tuple[str, str]:
    """The (forward, backward) compilers the cost model and the simulator model: a callable
    one is modelled as eager."""
    if options is None:
        return ("eager", "eager")
    return tuple("inductor" if c == "inductor" else "eager" for c in (options.fw_compiler, options.bw_compiler))


def step_seconds(forward: torch.fx.GraphModule, backward: torch.fx.GraphModule | None,
                 compilers: tuple[str, str] = ("eager", "eager")) -> float:
    """Estimated seconds of one forward and (if any) backward graph, run by ``compilers``."""
    device = device_for(forward.graph)
    return sum(graph_seconds(g.graph, device, c) for g, c in zip((forward, backward), compilers, strict=True)
               if g is not None)
