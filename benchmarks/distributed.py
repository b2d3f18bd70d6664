"""Peak memory per rank of DDP / FSDP2 training steps: eager, jointgraph and torch.compile(aot_eager)
side by side, on 2 spawned ranks (gloo on CPU). Every scenario is
first checked against eager on every rank (3 optimizer steps, losses and parameters equal).

    python benchmarks/distributed.py [--scenarios fsdp_per_block_mincut,...] [--width 256] [--seq 64]
                                     [--report block-{rank}.html]

Peak: bytes allocated above what was live when the step began (activations, gradients, FSDP's
all-gathered parameters), from the CPU profiler's allocation events (Note [Distributed runs]).
A second table puts one FSDP2 block's plan (mincut, and budget below mincut's peak) against
its measured peak per rank (Note [Simulated and measured per rank]).
"""

from __future__ import annotations

import argparse
import json

from rich.console import Console

from jointgraph.bench.block_memory import block_checks, block_table
from jointgraph.bench.distributed import SCENARIOS, peak_table, run_scenarios, spawn

CONTENDERS = ("eager", "jointgraph", "aot_eager")


def main(argv: list[str] | None = None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"from {', '.join(SCENARIOS)}")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--report", metavar="PATH", help="each rank writes its FSDP2 block plan's HTML report to PATH "
                        "({rank} in PATH is the rank, e.g. block-{rank}.html)")
    args = parser.parse_args(argv)
    names = [n for n in args.scenarios.split(",") if n]
    ranks = spawn(run_scenarios, (names, args.width, args.seq, args.layers, CONTENDERS), nproc=args.nproc,
                  timeout=args.timeout)
    title = (f"peak bytes of one training step per rank ({args.nproc} ranks, layers={args.layers} "
             f"width={args.width} seq={args.seq})")
    Console(width=160).print(peak_table(names, ranks, CONTENDERS, title))
    blocks = spawn(block_checks, (args.width, args.seq, args.report), nproc=args.nproc, timeout=args.timeout)
    Console(width=160).print(block_table(blocks, f"one FSDP2 GPT block (width={args.width} seq={args.seq}): peak "
                                         "above the step's start per rank, measured and simulated by its plan"))
    result = {"scenarios": [[r.__dict__ for r in results] for results in ranks],
              "block_plans": [[r.__dict__ for r in results] for results in blocks]}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
