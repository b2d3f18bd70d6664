"""Partitioners side by side on a GPT training step: jointgraph default / mincut vs PyTorch's own.

For one GPT (``--layers``, default 6) it reports, per partitioner: saved bytes,
jointgraph's simulated peak, the peak measured by ``MemTracker`` around one
forward+backward, and the seconds spent partitioning (ours: ``plan.timings
["partition"]``, which includes splitting; PyTorch: the ``partition_fn`` call,
timed by a wrapper). Then a depth-scaling table of min-cut partition time, ours
vs PyTorch's ``min_cut_rematerialization_partition``. Everything runs in one process.

    python benchmarks/partition.py
    python benchmarks/partition.py --layers 4 --quick
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import math
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.distributed._tools.mem_tracker import MemTracker

import jointgraph
from jointgraph.bench.gpt import GPT, GPTConfig


class TrainStep(torch.nn.Module):
    """GPT + next-token cross-entropy: the forward of one training step."""

    def __init__(self, model: GPT):
        super().__init__()
        self.model = model

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.model(idx).flatten(0, 1), targets.flatten())


@dataclasses.dataclass
class Row:
    """One partitioner's figures on one model."""

    name: str
    saved_bytes: int
    simulated_peak: int | None
    measured_peak: int
    partition_seconds: float


def make_step(config: GPTConfig, batch: int, seed: int = 0) -> tuple[TrainStep, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    step = TrainStep(GPT(config))
    idx = torch.randint(0, config.vocab, (batch, config.seq))
    return step, idx, torch.randint(0, config.vocab, (batch, config.seq))


def measured_peak(step: torch.nn.Module, fn: Callable, *args: torch.Tensor) -> int:
    """Peak bytes MemTracker sees during one forward+backward (gradients start as None)."""
    step.zero_grad(set_to_none=True)
    tracker = MemTracker()
    tracker.track_external(step, *args)
    with tracker:
        fn(*args).backward()
    step.zero_grad(set_to_none=True)
    return tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]


def pytorch_compiled(step: torch.nn.Module, partition_fn: Callable) -> tuple[Callable, dict]:
    """PyTorch's aot_module with no-op compilers and a timed partition_fn."""
    from torch._functorch.aot_autograd import aot_module
    from torch._functorch.compilers import nop

    stats: dict = {}

    def timed(joint_module, joint_inputs, **kwargs):
        start = time.perf_counter()
        fw, bw = partition_fn(joint_module, joint_inputs, **kwargs)
        stats["seconds"] = time.perf_counter() - start
        saved = [n for n in bw.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
        stats["saved_bytes"] = sum(_nbytes(n.meta.get("val")) for n in saved)
        return fw, bw

    return aot_module(step, fw_compiler=nop, bw_compiler=nop, partition_fn=timed), stats


def _nbytes(val) -> int:
    if not isinstance(val, torch.Tensor):
        return 8 if val is not None else 0
    return math.prod(int(s) for s in val.shape) * val.dtype.itemsize


def compare(config: GPTConfig, batch: int) -> list[Row]:
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    step, idx, targets = make_step(config, batch)
    rows = []
    for partitioner in ("default", "mincut"):
        plan = jointgraph.plan(step, idx, targets, partitioner=partitioner)
        compiled = jointgraph.aot_module(step, partitioner=partitioner)
        compiled(idx, targets).backward()
        rows.append(Row(f"jointgraph {partitioner}", plan.saved_bytes, plan.peak_bytes,
                        measured_peak(step, compiled, idx, targets), plan.timings["partition"]))
    for name, fn in (("pytorch default_partition", default_partition),
                     ("pytorch min_cut_rematerialization", min_cut_rematerialization_partition)):
        compiled, stats = pytorch_compiled(step, fn)
        compiled(idx, targets).backward()
        rows.append(Row(name, stats["saved_bytes"], None, measured_peak(step, compiled, idx, targets),
                        stats["seconds"]))
    rows.append(Row("eager", 0, None, measured_peak(step, step, idx, targets), 0.0))
    return rows


@contextlib.contextmanager
def timed_cut(stats: dict):
    """Time our cut alone (``plan_mincut``), apart from the passes and the split around it."""
    table = importlib.import_module("jointgraph.api").PARTITIONERS
    cut = table["mincut"]

    def timed(graph):
        start = time.perf_counter()
        choices = cut(graph)
        stats["cut_seconds"] = time.perf_counter() - start
        stats["joint_nodes"] = len(graph.nodes)
        return choices

    table["mincut"] = timed
    try:
        yield
    finally:
        table["mincut"] = cut


def scaling(depths: list[int], width: int) -> list[tuple[int, int, float, float, float]]:
    """Per depth: (layers, joint nodes, our partition phase s, our cut s, PyTorch's min-cut partition s)."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    results = []
    for layers in depths:
        config = GPTConfig(layers=layers, d_model=width, heads=4, vocab=256, seq=32)
        step, idx, targets = make_step(config, batch=2)
        ours: dict = {}
        with timed_cut(ours):
            plan = jointgraph.plan(step, idx, targets, partitioner="mincut")
        compiled, stats = pytorch_compiled(step, min_cut_rematerialization_partition)
        compiled(idx, targets)
        results.append((layers, ours["joint_nodes"], plan.timings["partition"], ours["cut_seconds"],
                        stats["seconds"]))
    return results


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.2f}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def report(rows: list[Row], scale: list[tuple[int, int, float, float, float]], config: GPTConfig, batch: int) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # plain text fallback
        Console = Table = None
    eager = next(r for r in rows if r.name == "eager").measured_peak
    title = (f"GPT training step: layers={config.layers} d_model={config.d_model} heads={config.heads} "
             f"vocab={config.vocab} seq={config.seq} batch={batch} (MiB; CPU)")
    head = ["partitioner", "saved MiB", "simulated peak MiB", "measured peak MiB", "sim/measured",
            "peak vs eager", "partition s"]
    body = [[r.name, _mb(r.saved_bytes) if r.name != "eager" else "-", _mb(r.simulated_peak), _mb(r.measured_peak),
             _ratio(r.simulated_peak, r.measured_peak) if r.simulated_peak else "-",
             _ratio(r.measured_peak, eager), f"{r.partition_seconds:.4f}" if r.name != "eager" else "-"]
            for r in rows]
    ours, theirs = rows[1], rows[3]
    notes = [f"mincut saved bytes, ours / PyTorch's: {_ratio(ours.saved_bytes, theirs.saved_bytes)}",
             f"mincut measured peak, ours / PyTorch's: {_ratio(ours.measured_peak, theirs.measured_peak)}",
             f"mincut partition time, PyTorch's / ours: {_ratio(theirs.partition_seconds, ours.partition_seconds)}"]
    scale_head = ["layers", "joint nodes", "ours: partition phase s", "ours: cut only s", "PyTorch min-cut s",
                  "PyTorch / ours (phase)", "PyTorch / ours (cut)"]
    scale_body = [[str(layers), str(nodes), f"{phase:.4f}", f"{cut:.4f}", f"{theirs:.4f}", _ratio(theirs, phase),
                   _ratio(theirs, cut)] for layers, nodes, phase, cut, theirs in scale]
    if Table is None:
        for table_title, header, lines in ((title, head, body), ("min-cut partition time vs depth", scale_head,
                                                                  scale_body)):
            print(table_title)
            print(" | ".join(header))
            for line in lines:
                print(" | ".join(line))
        print("\n".join(notes))
        return
    console = Console(width=150)
    for table_title, header, lines in ((title, head, body), ("min-cut partition time vs depth", scale_head,
                                                              scale_body)):
        table = Table(title=table_title)
        for column in header:
            table.add_column(column, justify="left" if column in ("partitioner",) else "right")
        for line in lines:
            table.add_row(*line)
        console.print(table)
    for note in notes:
        console.print(note)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--quick", action="store_true", help="smaller model and depths 6, 12 only")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    if args.quick:
        config, batch, depths = GPTConfig(layers=args.layers, d_model=128, heads=4, vocab=512, seq=128), 4, [6, 12]
    else:
        config, batch, depths = GPTConfig(layers=args.layers, d_model=256, heads=4, vocab=1024, seq=256), 4, \
            [6, 12, 24, 48]
    rows = compare(config, batch)
    report(rows, scaling(depths, width=64), config, batch)


if __name__ == "__main__":
    main()
