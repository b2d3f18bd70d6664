"""What Note [Eager's in-place checks] costs at trace time: jointgraph.plan on a zoo GPT with the
checks, and with a pass-through mode in their place, interleaved in one process (min of N).

    python benchmarks/trace_checks.py [--layers 8] [--repeat 6]
"""

from __future__ import annotations

import argparse

import torch

import jointgraph
import jointgraph.capture.metadata as metadata
import jointgraph.capture.trace as trace
from jointgraph.bench import ZooShape, build_workload


class PassThrough(torch.overrides.TorchFunctionMode):
    """EagerInPlaceChecks' interface, checking nothing."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

    def only_via_data(self, t):
        return False

    def check_storage_kept(self, t):
        pass

    def track(self, tensors):
        pass


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=6)
    args = parser.parse_args(argv)
    work = build_workload("gpt", ZooShape(layers=args.layers, width=64, batch=2, seq=32))
    checks = metadata.EagerInPlaceChecks
    seconds: dict[str, list[float]] = {"checks": [], "pass-through": []}
    try:
        for _ in range(args.repeat):
            for name, mode in (("checks", checks), ("pass-through", PassThrough)):
                metadata.EagerInPlaceChecks = trace.EagerInPlaceChecks = mode
                seconds[name].append(jointgraph.plan(work.step, *work.inputs).timings["trace"])
    finally:
        metadata.EagerInPlaceChecks = trace.EagerInPlaceChecks = checks
    best = {name: min(values) for name, values in seconds.items()}
    print(f"trace seconds (min of {args.repeat}): checks {best['checks']:.3f}, pass-through "
          f"{best['pass-through']:.3f}, ratio {best['checks'] / best['pass-through']:.3f}")
    return best


if __name__ == "__main__":
    main()
