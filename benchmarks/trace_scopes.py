"""What Note [Module scopes] costs at trace time: jointgraph.plan on a zoo model with the module
hooks recording module paths and call sites, and without them, interleaved in one process (min of N).

    python benchmarks/trace_scopes.py [--model gpt] [--layers 8] [--repeat 5]
"""

from __future__ import annotations

import argparse
import contextlib

import jointgraph
import jointgraph.capture.trace as trace
from jointgraph.bench import ZooShape, build_workload


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    work = build_workload(args.model, ZooShape(layers=args.layers, width=128, batch=4, seq=128))
    real = trace.module_scopes
    times: dict[str, list[float]] = {"scopes": [], "none": []}
    jointgraph.plan(work.step, *work.inputs)   # warm-up: imports, decomposition tables
    variants = [("scopes", real), ("none", contextlib.nullcontext)]
    for round_ in range(args.repeat):
        for name, scopes in variants if round_ % 2 == 0 else variants[::-1]:   # ABBA: no order advantage
            trace.module_scopes = scopes
            try:
                plan = jointgraph.plan(work.step, *work.inputs)
            finally:
                trace.module_scopes = real
            times[name].append(plan.timings["trace"])
    best = {k: min(v) for k, v in times.items()}
    ratio = best["scopes"] / best["none"]
    print(f"{args.model} {args.layers} layers: trace {best['scopes'] * 1e3:.0f} ms with module scopes, "
          f"{best['none'] * 1e3:.0f} ms without: x{ratio:.3f}")
    return {"best_seconds": best, "ratio": ratio}


if __name__ == "__main__":
    main()
