"""The budget planner side by side with PyTorch's ``activation_memory_budget``, in one process.

For each model (``--models``: the plain GPT of ``jointgraph.bench.gpt``, Hugging Face GPT-2 and
Llama from small configs with random weights; see ``jointgraph.bench.zoo``) and each nominal
budget (``--budgets``, fractions):

* jointgraph ``aot_module(partitioner="budget", memory_budget=b)``: simulated peak
  (``Plan.peak_bytes``), measured peak (``MemTracker`` around one forward+backward, gradients
  starting as ``None``), estimated and measured step time, compile seconds (the first call:
  trace + plan + compile);
* PyTorch ``aot_module`` with the min-cut partitioner under
  ``torch._functorch.config.activation_memory_budget = b`` (no-op graph compilers): measured
  peak, step time, compile seconds.

Step times are medians of ``--repeat`` steps, ours and PyTorch's interleaved, so a noisy
machine slows all alike. Ratios are ours / PyTorch's. Two comparisons: at the same nominal
budget (the numbers mean different things: ours a fraction of the step's peak, PyTorch's a
fraction of saved activation bytes), and *at equal peak*: ours planned again with PyTorch's
measured peak as a byte budget (``memory_budget=int(bytes)``), step times side by side.

Then planning time versus depth (``--depths``, ``--depth-model``): ``jointgraph.plan(partitioner=
"budget", memory_budget=0.5)`` on a narrow model (trace and partition seconds) against PyTorch's first
call under the same budget (trace + min-cut + compile).

    python benchmarks/budget.py                               # gpt, gpt2, llama; depths 12, 24, 48
    python benchmarks/budget.py --models "" --depth-model gpt2 --depths 12     # the 12-layer GPT-2 target
    python benchmarks/budget.py --quick                       # CI-sized
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
import warnings
from collections.abc import Callable

import torch
from partition import (
    _collect,
    _plan_of,
    _warm,
    aot_module,
    interleaved_seconds,
    machine,
    measured_peak,
    print_tables,
)

import jointgraph
from jointgraph.bench.zoo import ZooShape, build_workload
from jointgraph.planning import estimated_seconds

MODELS = ("gpt", "gpt2", "llama")
BUDGETS = (1.0, 0.8, 0.6, 0.45)


@dataclasses.dataclass
class Point:
    """One contender at one nominal budget on one model."""

    model: str
    contender: str            # "jointgraph" | "pytorch" | "jointgraph at pytorch peak"
    budget: float
    measured_peak: int
    step_seconds: float
    compile_seconds: float
    simulated_peak: int | None = None
    est_seconds: float | None = None


@dataclasses.dataclass
class DepthRow:
    layers: int
    joint_nodes: int
    trace_seconds: float
    partition_seconds: float
    pytorch_seconds: float


def pytorch_budget(step: torch.nn.Module, budget: float) -> tuple[Callable, Callable]:
    """PyTorch's aot_module with min-cut under ``activation_memory_budget``; (call, first call)."""
    from torch._functorch import config
    from torch._functorch.compilers import nop
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    compiled = aot_module(step, fw_compiler=nop, bw_compiler=nop, partition_fn=min_cut_rematerialization_partition)

    def first(*inputs):
        with config.patch(activation_memory_budget=budget):   # read when it partitions
            return compiled(*inputs)

    return compiled, first


def sweep(model: str, shape: ZooShape, budgets: tuple[float, ...], repeat: int) -> list[Point]:
    work = build_workload(model, shape)
    step, inputs = work.step, work.inputs
    points = []
    for budget in budgets:
        print(f"{model}: budget {budget} ...", file=sys.stderr, flush=True)
        ours = jointgraph.aot_module(step, partitioner="budget", memory_budget=budget)
        ours_compile = _warm(ours, step, inputs)
        theirs, first = pytorch_budget(step, budget)
        theirs_compile = _warm(first, step, inputs)
        theirs_peak = measured_peak(step, theirs, inputs)
        # Ours again, with PyTorch's measured peak as a byte budget: the step time at equal peak.
        equal = jointgraph.aot_module(step, partitioner="budget", memory_budget=int(theirs_peak))
        equal_compile = _warm(equal, step, inputs)
        times = interleaved_seconds(step, [ours, theirs, equal], inputs, repeat)
        for label, fn, compile_s, seconds in (("jointgraph", ours, ours_compile, times[0]),
                                              ("jointgraph at pytorch peak", equal, equal_compile, times[2])):
            plan = _plan_of(fn)
            points.append(Point(model, label, budget, measured_peak(step, fn, inputs), seconds, compile_s,
                                plan.peak_bytes, estimated_seconds(plan)))
        points.append(Point(model, "pytorch", budget, theirs_peak, times[1], theirs_compile))
    return points


def depth_rows(model: str, depths: tuple[int, ...], width: int) -> list[DepthRow]:
    rows = []
    for layers in depths:
        print(f"planning time: {model} with {layers} layers ...", file=sys.stderr, flush=True)
        work = build_workload(model, ZooShape(layers=layers, width=width, batch=4, seq=64))
        _collect()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plan = jointgraph.plan(work.step, *work.inputs, partitioner="budget", memory_budget=0.5)
        _, first = pytorch_budget(work.step, 0.5)
        theirs = _warm(first, work.step, work.inputs)
        nodes = len(plan.forward.graph.nodes) + len(plan.backward.graph.nodes)
        rows.append(DepthRow(layers, nodes, plan.timings["trace"], plan.timings["partition"], theirs))
    return rows


### Report

def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f}"


def tables(points: list[Point], depths: list[DepthRow], depth_model: str = "gpt"
           ) -> list[tuple[str, list[str], list[list[str]]]]:
    result = []
    by_key = {(p.model, p.contender, p.budget): p for p in points}

    def against_pytorch(contender: str) -> list[tuple[Point, Point]]:
        return [(p, by_key[(p.model, "pytorch", p.budget)]) for p in points if p.contender == contender]

    rows = [[p.model, f"{p.budget:g}", _mib(p.simulated_peak), _mib(p.measured_peak), _mib(t.measured_peak),
             f"{p.measured_peak / t.measured_peak:.2f}x", f"{p.est_seconds * 1e3:.1f}",
             f"{p.step_seconds * 1e3:.1f}", f"{t.step_seconds * 1e3:.1f}",
             f"{p.step_seconds / t.step_seconds:.2f}x", f"{p.compile_seconds:.1f}", f"{t.compile_seconds:.1f}"]
            for p, t in against_pytorch("jointgraph")]
    if rows:
        result.append(("Same nominal budget (CPU, fp32; MiB = 2**20 bytes; ms per step; s to compile)",
                       ["model", "budget", "ours sim", "ours meas", "torch meas", "peak ratio", "ours est ms",
                        "ours ms", "torch ms", "time ratio", "ours compile s", "torch compile s"], rows))
    rows = [[p.model, f"{p.budget:g}", _mib(t.measured_peak), _mib(p.simulated_peak), _mib(p.measured_peak),
             f"{p.step_seconds * 1e3:.1f} / {t.step_seconds * 1e3:.1f}", f"{p.step_seconds / t.step_seconds:.2f}x"]
            for p, t in against_pytorch("jointgraph at pytorch peak")]
    if rows:
        result.append(("At equal peak: ours planned with PyTorch's measured peak as a byte budget",
                       ["model", "torch budget", "torch meas", "ours sim", "ours meas", "ms ours / torch",
                        "time ratio"], rows))
    if depths:
        result.append((f"Planning time vs depth ({depth_model}, width 64, batch 4, seq 64, budget 0.5; PyTorch's "
                       "first call: trace, min-cut, one step)",
                       ["layers", "graph nodes", "ours trace s", "ours partition s", "ours total s",
                        "torch first call s", "ratio"],
                       [[str(d.layers), f"{d.joint_nodes:,}", f"{d.trace_seconds:.1f}", f"{d.partition_seconds:.1f}",
                         f"{d.trace_seconds + d.partition_seconds:.1f}", f"{d.pytorch_seconds:.1f}",
                         f"{(d.trace_seconds + d.partition_seconds) / d.pytorch_seconds:.2f}x"] for d in depths]))
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument("--budgets", type=float, nargs="*", default=list(BUDGETS))
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=7, help="timed steps per contender (median)")
    parser.add_argument("--depths", default="12,24,48", help="depths for the planning-time table; 0 to skip")
    parser.add_argument("--depth-model", default="gpt", choices=MODELS, help="model of the planning-time table")
    parser.add_argument("--quick", action="store_true", help="CI-sized: gpt, 1 layer, two budgets, depth 2")
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.budgets, args.layers, args.seq, args.batch = "gpt", [1.0, 0.5], 1, 32, 2
        args.repeat, args.depths = 1, "2"
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    start = time.perf_counter()
    shape = ZooShape(layers=args.layers, width=args.width, batch=args.batch, seq=args.seq)
    points = [p for model in models for p in sweep(model, shape, tuple(args.budgets), args.repeat)]
    depths = depth_rows(args.depth_model, tuple(int(d) for d in args.depths.split(",") if int(d) > 0), width=64)
    seconds = time.perf_counter() - start
    print_tables(tables(points, depths, args.depth_model), seconds, width=170)
    result = {"machine": machine(), "seconds": seconds,
              "shape": {k: getattr(shape, k) for k in ("layers", "width", "batch", "seq")},
              "points": [dataclasses.asdict(p) for p in points], "depths": [dataclasses.asdict(d) for d in depths]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
