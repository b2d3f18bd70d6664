"""Memory a training loop keeps: steps that write an input with grad, eager vs PyTorch's aot_function vs jointgraph.

Each step is ``a.add_(w); return a.sin()`` on a fresh non-leaf ``a`` (``leaf * 1``), then a backward and the
step's tensors dropped. A compiled step whose backward node keeps the written input alive (its ``grad_fn`` leads
back to the node: a cycle through autograd's graph that no collector breaks) keeps every step's tensors, so
memory grows with the number of steps. Each contender runs in a subprocess of its own; the figures are peak RSS
(``ru_maxrss``) and the step tensors still alive after ``gc.collect()``.

    python benchmarks/retention.py
    python benchmarks/retention.py --steps 40 --size 1000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable

CONTENDERS = ("eager", "pytorch aot_function", "jointgraph")


def step(a, w):
    a.add_(w)
    return a.sin()


def _compiled(name: str) -> Callable:
    if name == "eager":
        return step
    if name == "jointgraph":
        import jointgraph

        return jointgraph.aot_function(step)
    from torch._functorch.aot_autograd import aot_function
    from torch._functorch.compilers import nop

    return aot_function(step, fw_compiler=nop, bw_compiler=nop)


def run_one(name: str, steps: int, size: int) -> dict:
    """In this process: ``steps`` steps of ``name``; peak RSS in MiB and the step leaves alive at the end."""
    import gc
    import resource
    import weakref

    import torch

    fn = _compiled(name)
    w = torch.randn(size, size, requires_grad=True)
    leaves = []
    for _ in range(steps):
        leaf = torch.randn(size, size, requires_grad=True)
        fn(leaf * 1, w).sum().backward()
        leaves.append(weakref.ref(leaf))
        del leaf
    gc.collect()
    return {"contender": name, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "alive": sum(r() is not None for r in leaves)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--size", type=int, default=1000, help="each step tensor is size x size float32")
    parser.add_argument("--one", choices=CONTENDERS, help=argparse.SUPPRESS)   # the subprocess's own run
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one, args.steps, args.size)))
        return {}
    rows = []
    for name in CONTENDERS:
        out = subprocess.run([sys.executable, __file__, "--one", name, "--steps", str(args.steps),
                              "--size", str(args.size)], check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    step_mib = args.size * args.size * 4 / 2**20
    print(f"{args.steps} steps of a.add_(w); return a.sin(), {args.size} x {args.size} float32 "
          f"({step_mib:.1f} MiB per tensor)")
    print(f"{'contender':24}{'peak RSS MiB':>14}{'steps alive':>13}")
    for row in rows:
        print(f"{row['contender']:24}{row['peak_mib']:>14.0f}{row['alive']:>13}")
    eager = rows[0]["peak_mib"]
    for row in rows[1:]:
        print(f"{row['contender']} / eager peak = {row['peak_mib'] / eager:.2f}")
    return {"rows": rows}


if __name__ == "__main__":
    main()
