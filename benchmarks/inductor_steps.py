"""Step time under Inductor: torch.compile's default pipeline vs jointgraph's plans compiled by Inductor.

On a shared CPU, wall time swings several-fold with other jobs' load. This benchmark interleaves
the contenders step by step (one step of each per round, in rotating order) and reports, per
contender, the median wall time and the median *CPU time* of the process (``time.process_time``),
which counts only the work of this process; with ``--threads 1`` (the default) it is the work
itself, free of other jobs and of idle threads spinning. The ratios are medians of per-round
ratios (each round's steps ran under the same load).

    python benchmarks/inductor_steps.py gpt --layers 4 --width 256 --batch 8 --seq 256
    python benchmarks/inductor_steps.py gpt2 --rounds 31 --partitioners mincut
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

import jointgraph
from jointgraph.bench.zoo import ZooShape, build_workload


def contenders(step: torch.nn.Module, partitioners: list[str]) -> dict[str, Callable]:
    out: dict[str, Callable] = {"torch.compile (inductor)": torch.compile(step)}
    for partitioner in partitioners:
        out[f"jointgraph {partitioner} +inductor"] = jointgraph.aot_module(
            step, partitioner=partitioner, fw_compiler="inductor", bw_compiler="inductor")
    return out


def one_step(fn: Callable, step: torch.nn.Module, inputs: tuple) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one forward + backward, gradients reset first."""
    for p in step.parameters():
        p.grad = None
    wall, cpu = time.perf_counter(), time.process_time()
    fn(*inputs).backward()
    return time.perf_counter() - wall, time.process_time() - cpu


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="gpt")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--partitioners", nargs="+", default=["mincut", "default"])
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (CPU time is cleanest at 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    work = build_workload(args.model, ZooShape(args.layers, args.width, args.batch, args.seq))
    runners = contenders(work.step, args.partitioners)
    for fn in runners.values():   # compile, then one warm-up step
        one_step(fn, work.step, work.inputs)
        one_step(fn, work.step, work.inputs)
    names = list(runners)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            times[name].append(one_step(runners[name], work.step, work.inputs))
    ref = times[names[0]]
    print(f"{work.name}: {args.rounds} interleaved rounds, {args.threads} thread(s)")
    result = {"model": work.name, "rounds": args.rounds, "threads": args.threads, "contenders": {}}
    for name in names:
        wall = [w for w, _ in times[name]]
        cpu = [c for _, c in times[name]]
        row = {"wall_median": statistics.median(wall), "cpu_median": statistics.median(cpu),
               "wall_ratio": statistics.median(w / rw for w, (rw, _) in zip(wall, ref, strict=True)),
               "cpu_ratio": statistics.median(c / rc for c, (_, rc) in zip(cpu, ref, strict=True))}
        result["contenders"][name] = row
        print(f"  {name:34s} wall {row['wall_median'] * 1e3:8.1f} ms  cpu {row['cpu_median'] * 1e3:8.1f} ms  "
              f"vs {names[0]}: wall x{row['wall_ratio']:.3f}  cpu x{row['cpu_ratio']:.3f}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.exit(0)
