"""Saved-tensor codecs on a GPT training step: none / bf16 / fp8 / offload.

Per codec (``jointgraph.hooks.SavedTensorPolicy`` applied to every saved activation of the
``--partitioner`` plan): saved bytes (as stored on the device; offloaded: 0), the simulated
peak, the peak ``MemTracker`` measures around one forward+backward, and the largest relative
gradient error (per parameter, ``max |g - g_eager| / max |g_eager|``) against uncompressed eager.

On a CPU-only machine the host copies of ``offload`` live on the same device, so its measured
peak does not drop; the simulated peak counts device bytes only.

    python benchmarks/hooks.py
    python benchmarks/hooks.py --layers 4 --batch 8
"""

from __future__ import annotations

import argparse

import torch
from rich.console import Console
from rich.table import Table

import jointgraph
from jointgraph.bench.gpt import GPT, GPTConfig
from jointgraph.bench.measure import memtracker_peak
from jointgraph.bench.zoo import TrainStep, lm_loss
from jointgraph.hooks import SavedTensorPolicy

POLICIES = {"none": None, "bf16": SavedTensorPolicy(compress="bf16"), "fp8": SavedTensorPolicy(compress="fp8"),
            "offload": SavedTensorPolicy(offload=True)}


def measured_peak(step: torch.nn.Module, fn, *args: torch.Tensor) -> int:
    """Peak bytes MemTracker sees during one forward+backward (gradients start as None)."""
    return memtracker_peak(step, fn, *args)


def grads(step: torch.nn.Module, fn, *args) -> list[torch.Tensor]:
    step.zero_grad(set_to_none=True)
    fn(*args).backward()
    return [p.grad.clone() for p in step.parameters()]


def max_error(got: list, ref: list) -> float:
    return max(float((g - r).abs().max() / r.abs().max().clamp_min(1e-30)) for g, r in zip(got, ref, strict=True))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--partitioner", default="default", choices=("default", "mincut"))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    config = GPTConfig(layers=args.layers, d_model=args.d_model, seq=args.seq, vocab=1024, heads=4)
    step = TrainStep(GPT(config), lm_loss).to(args.device)
    idx = torch.randint(0, config.vocab, (args.batch, config.seq), device=args.device)
    targets = torch.randint(0, config.vocab, (args.batch, config.seq), device=args.device)
    ref = grads(step, step, idx, targets)
    table = Table(title=f"saved-tensor codecs, GPT {args.layers}x{args.d_model}, batch {args.batch}x{args.seq}, "
                        f"partitioner={args.partitioner}, {args.device}")
    for head in ("codec", "saved MiB", "simulated peak MiB", "measured peak MiB", "max grad error vs eager"):
        table.add_column(head, justify="right")
    for name, policy in POLICIES.items():
        options = {"partitioner": args.partitioner, "saved_tensors": policy}
        plan = jointgraph.plan(step, idx, targets, **options)
        compiled = jointgraph.aot_module(step, **options)
        error = max_error(grads(step, compiled, idx, targets), ref)
        peak = measured_peak(step, compiled, idx, targets)
        table.add_row(name, _mb(plan.saved_bytes), _mb(plan.peak_bytes), _mb(peak), f"{error:.2e}")
    table.add_row("eager", "-", "-", _mb(measured_peak(step, step, idx, targets)), "0")
    Console().print(table)


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.2f}"


if __name__ == "__main__":
    main()
