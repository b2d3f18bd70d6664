"""Planning to a peak-memory budget from the pipeline's side, and the budget/time Pareto sweep.

``plan_to_budget`` is what ``build_plan`` calls for ``partitioner="budget"``: it resolves a
fractional budget against the ``"default"`` plan's simulated peak and hands the planner
(``budget.py``) a ``verify`` that runs the real split + split passes + simulator.
``pareto`` sweeps budgets and keeps the plans no other plan beats on both peak and time.

Example::

    points = jointgraph.pareto(step, idx, targets)
    for p in points:
        print(p.peak_bytes, p.est_seconds)
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from typing import Any

import torch

from ..ir import Plan
from ..options import CompileOptions
from ..passes.pipeline import run_split_passes
from ..passes.saved_codecs import apply_saved_codecs
from ..split import split
from .budget import plan_budget
from .costs import annotate_seconds, device_for, graph_seconds
from .graph_utils import SavedChoice
from .simulate import simulate

PARETO_FRACTIONS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


@dataclasses.dataclass(frozen=True)
class ParetoPoint:
    """One plan of the sweep: its simulated peak, estimated step time and the plan itself."""

    peak_bytes: int
    est_seconds: float
    plan: Plan


def simulate_choices(joint_gm: torch.fx.GraphModule, choices: list[SavedChoice],
                     compilers: tuple[str, str] = ("eager", "eager")) -> tuple[int, float]:
    """(simulated peak bytes, estimated step seconds) of the plan ``choices`` gives, its forward and
    backward run by ``compilers``."""
    graphs = split(joint_gm, choices, has_backward=True)
    if any(c.codec for c in choices):
        graphs = apply_saved_codecs(graphs, choices)
    graphs = run_split_passes(graphs)
    return (simulate(graphs.forward, graphs.backward, compilers).peak_bytes,
            step_seconds(graphs.forward, graphs.backward, compilers))


def plan_to_budget(joint_gm: torch.fx.GraphModule, options: CompileOptions) -> tuple[list[SavedChoice],
                                                                                        dict[str, str]]:
    """The budget planner's choices and recompute reasons for ``options.memory_budget``."""
    compilers = cost_compilers(options)
    with gc_paused():
        annotate_seconds(joint_gm.graph, device_for(joint_gm.graph), compilers[1])
        result = plan_budget(joint_gm.graph, options.memory_budget,
                             lambda choices: simulate_choices(joint_gm, choices, compilers),
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


def pareto(fn_or_module: Any, *example_args: Any, fractions: tuple[float, ...] = PARETO_FRACTIONS,
           **options: Any) -> list[ParetoPoint]:
    """Plan ``fn_or_module`` at budgets ``fractions`` of the default plan's peak; return the
    Pareto-optimal points, by increasing peak (so estimated time does not increase)."""
    import warnings

    from ..api import plan

    options = {k: v for k, v in options.items() if k not in ("partitioner", "memory_budget")}
    points = []
    for fraction in fractions:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # budgets below the minimum: the lowest-peak plan
            result = plan(fn_or_module, *example_args, partitioner="budget", memory_budget=float(fraction),
                          **options)
        points.append(ParetoPoint(result.peak_bytes, estimated_seconds(result), result))
    points.sort(key=lambda p: (p.peak_bytes, p.est_seconds))
    front: list[ParetoPoint] = []
    for point in points:
        if not front or point.est_seconds < front[-1].est_seconds:
            front.append(point)
    return front


def estimated_seconds(result: Plan) -> float:
    """The estimated step time of a plan (Note [Cost model])."""
    compilers = cost_compilers(result.options)
    return step_seconds(result.forward, result.backward, compilers)


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
