"""The budget planner side by side with PyTorch's ``activation_memory_budget`` (GPT, HF GPT-2 / Llama).

For each nominal budget: jointgraph's simulated and measured peak (MemTracker), estimated
and measured step time, planning seconds; PyTorch's min-cut partitioner under
``torch._functorch.config.activation_memory_budget`` at the same value: measured peak and
step time; then the ratios ours / PyTorch's. Everything runs in one process.

    python benchmarks/budget.py
    python benchmarks/budget.py --layers 2 --budgets 1.0 0.8 0.6
    python benchmarks/budget.py --model gpt2 --layers 2 --width 128 --seq 128
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch
from partition import make_step, measured_peak

import jointgraph
from jointgraph.bench.gpt import GPTConfig
from jointgraph.bench.zoo import ZooShape, build_workload
from jointgraph.planner.pareto import estimated_seconds


def step_seconds(fn, *args, repeat: int = 3) -> float:
    fn(*args).backward()
    start = time.perf_counter()
    for _ in range(repeat):
        fn(*args).backward()
    return (time.perf_counter() - start) / repeat


def pytorch_budget(step, budget: float):
    from torch._functorch.aot_autograd import aot_module
    from torch._functorch.compilers import nop
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    with torch._functorch.config.patch(activation_memory_budget=budget):
        compiled = aot_module(step, fw_compiler=nop, bw_compiler=nop,
                              partition_fn=min_cut_rematerialization_partition)
        return compiled


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt", help="gpt (jointgraph.bench.gpt) or a zoo name: gpt2, llama")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--budgets", type=float, nargs="*", default=[1.0, 0.8, 0.6, 0.45])
    args = parser.parse_args()
    if args.model == "gpt":
        config = GPTConfig(layers=args.layers, d_model=args.width, heads=2, vocab=128, seq=args.seq)
        step, idx, targets = make_step(config, args.batch)
    else:
        work = build_workload(args.model, ZooShape(layers=args.layers, width=args.width, batch=args.batch,
                                                   seq=args.seq))
        step, (idx, targets) = work.step, work.inputs
    print(f"{args.model} layers={args.layers} width={args.width} seq={args.seq} batch={args.batch} (CPU, MiB, ms)")
    print("budget | sim peak | measured | est ms | step ms | plan s || torch measured | torch step ms || "
          "peak ours/torch | time ours/torch")
    for budget in args.budgets:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            plan = jointgraph.plan(step, idx, targets, partitioner="budget", memory_budget=budget)
            planning = time.perf_counter() - start
            compiled = jointgraph.aot_module(step, partitioner="budget", memory_budget=budget)
            compiled(idx, targets).backward()
        est = estimated_seconds(plan)
        ours_peak = measured_peak(step, compiled, idx, targets)
        ours_time = step_seconds(compiled, idx, targets)
        theirs = pytorch_budget(step, budget)
        with torch._functorch.config.patch(activation_memory_budget=budget):
            theirs(idx, targets).backward()
            theirs_peak = measured_peak(step, theirs, idx, targets)
            theirs_time = step_seconds(theirs, idx, targets)
        print(f"{budget:.2f} | {plan.peak_bytes / 2**20:.2f} | {ours_peak / 2**20:.2f} | {est * 1e3:.2f} | "
              f"{ours_time * 1e3:.1f} | {planning:.2f} || {theirs_peak / 2**20:.2f} | {theirs_time * 1e3:.1f} || "
              f"{ours_peak / theirs_peak:.2f}x | {ours_time / theirs_time:.2f}x")


if __name__ == "__main__":
    main()
