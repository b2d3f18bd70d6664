"""Per-call overhead: one forward+backward of a tiny function, eager vs PyTorch's aot_function vs jointgraph.

The function is ``(x * w).sum()`` on 8-element tensors, so the time is almost
all wrapper overhead. The three runners are interleaved in one process (round
robin over repeats) and each figure is the median over repeats after warm-up.

    python benchmarks/overhead.py
    python benchmarks/overhead.py --repeats 300 --calls 200
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

import jointgraph

TARGET_RATIO = 0.8


def tiny(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x * w).sum()


def pytorch_aot(fn: Callable) -> Callable:
    from torch._functorch.aot_autograd import aot_function
    from torch._functorch.compilers import nop

    return aot_function(fn, fw_compiler=nop, bw_compiler=nop)


def runners() -> dict[str, Callable]:
    return {"eager": tiny, "pytorch aot_function": pytorch_aot(tiny), "jointgraph": jointgraph.aot_function(tiny)}


def time_calls(fn: Callable, x: torch.Tensor, w: torch.Tensor, calls: int) -> float:
    """Microseconds per forward+backward call, averaged over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn(x, w).backward()
    return (time.perf_counter() - start) / calls * 1e6


def measure(repeats: int, calls: int, warmup: int) -> dict[str, float]:
    torch.manual_seed(0)
    x = torch.randn(8)
    w = torch.randn(8, requires_grad=True)
    fns = runners()
    for fn in fns.values():  # compile, then warm up
        time_calls(fn, x, w, warmup)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(time_calls(fn, x, w, calls))
    return {name: statistics.median(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--calls", type=int, default=50, help="calls per timed repeat")
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    medians = measure(args.repeats, args.calls, args.warmup)
    print(f"{'runner':24}{'us / fwd+bwd call':>20}")
    for name, us in medians.items():
        print(f"{name:24}{us:>20.1f}")
    ratio = medians["jointgraph"] / medians["pytorch aot_function"]
    print(f"\njointgraph / pytorch aot_function = {ratio:.2f} (target <= {TARGET_RATIO})")
    print(f"jointgraph / eager = {medians['jointgraph'] / medians['eager']:.2f}")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
