"""Partitioners side by side on training steps: jointgraph default / mincut vs PyTorch's own.

For each model (``--models``: the plain PyTorch GPT of ``jointgraph.bench.gpt`` and Hugging Face
GPT-2 / Llama / BERT built from small configs with random weights, no downloads; see
``jointgraph.bench.zoo``), in one process, per contender:

* saved MiB: the activations the forward hands to the backward. Graph inputs (parameters, the
  batch) and views of them cost nothing extra and are not counted, for PyTorch as for us;
* simulated peak (jointgraph's ``Plan.peak_bytes``) and measured peak (``MemTracker`` around one
  forward+backward, gradients starting as ``None``);
* partition seconds: ours is ``plan.timings["partition"]`` (joint passes + partitioner + split +
  split passes); PyTorch's is the ``partition_fn`` call (its CSE, partitioner and graph
  extraction), timed by a wrapper;
* step seconds: median wall time of a forward+backward.

Contenders: eager, PyTorch ``aot_module`` with ``default_partition`` / ``min_cut_rematerialization
_partition`` (no-op graph compilers), jointgraph ``aot_module`` with ``partitioner="default"`` /
``"mincut"``. Ratios are ours / PyTorch's for the same kind of partitioner. Then a depth-scaling
table: the min-cut partition seconds of ours and PyTorch's on a narrow GPT with 6, 12, 24 and 48
layers (``--depths``), with seconds per 1,000 joint-graph nodes to show the growth is near-linear.

    python benchmarks/partition.py                       # all four models + depth scaling
    python benchmarks/partition.py --quick               # CI-sized
    python benchmarks/partition.py --models gpt,llama --json partition.json
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import json
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import torch

import jointgraph
from jointgraph.bench.measure import memtracker_peak
from jointgraph.bench.zoo import Workload, ZooShape, build_workload
from jointgraph.ir.graph_utils import aliases_input

MODELS = ("gpt", "gpt2", "llama", "bert")
CONTENDERS = ("eager", "pytorch default", "pytorch min-cut", "jointgraph default", "jointgraph mincut")
OURS_VS_THEIRS = (("jointgraph default", "pytorch default"), ("jointgraph mincut", "pytorch min-cut"))


@dataclasses.dataclass
class Row:
    """One contender's figures on one model."""

    model: str
    contender: str
    saved_bytes: int | None
    simulated_peak: int | None
    measured_peak: int
    partition_seconds: float | None
    step_seconds: float
    joint_nodes: int | None = None


@dataclasses.dataclass(frozen=True)
class Setup:
    """Sizes of one run: the models' shape and the depth-scaling GPT's."""

    shapes: dict[str, ZooShape]
    depths: tuple[int, ...]
    scaling_width: int
    repeat: int


def setup(quick: bool, depths: str | None, repeat: int | None) -> Setup:
    if quick:
        small = ZooShape(layers=2, width=64, batch=2, seq=64)
        shapes = dict.fromkeys(MODELS, small)
        default_depths, default_repeat = (6, 12), 2
    else:
        shapes = {"gpt": ZooShape(layers=6, width=256, batch=4, seq=256),
                  **dict.fromkeys(("gpt2", "llama", "bert"), ZooShape(layers=4, width=256, batch=4, seq=256))}
        default_depths, default_repeat = (6, 12, 24, 48), 3
    chosen = tuple(int(d) for d in depths.split(",")) if depths else default_depths
    return Setup(shapes, chosen, scaling_width=64, repeat=repeat or default_repeat)


### Measurement

def measured_peak(step: torch.nn.Module, fn: Callable, inputs: tuple) -> int:
    """Peak bytes MemTracker sees during one forward+backward (gradients start as None)."""
    return memtracker_peak(step, fn, *inputs)


def step_seconds(step: torch.nn.Module, fn: Callable, inputs: tuple, repeat: int) -> float:
    """Median seconds of one forward+backward (after the warm-up the caller did)."""
    return interleaved_seconds(step, [fn], inputs, repeat)[0]


def interleaved_seconds(step: torch.nn.Module, fns: list[Callable], inputs: tuple, repeat: int) -> list[float]:
    """Median seconds of one forward+backward per function, the functions taking turns."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, sink in zip(fns, times, strict=True):
            step.zero_grad(set_to_none=True)
            start = time.perf_counter()
            fn(*inputs).backward()
            sink.append(time.perf_counter() - start)
    step.zero_grad(set_to_none=True)
    return [statistics.median(t) for t in times]


def pytorch_compiled(step: torch.nn.Module, partition_fn: Callable) -> tuple[Callable, dict]:
    """PyTorch's aot_module with no-op compilers and a partition_fn that records seconds and saved bytes."""
    from torch._functorch.compilers import nop

    stats: dict = {}

    def timed(joint_module, joint_inputs, **kwargs):
        stats["joint_nodes"] = len(joint_module.graph.nodes)
        start = time.perf_counter()
        fw, bw = partition_fn(joint_module, joint_inputs, **kwargs)
        stats["seconds"] = time.perf_counter() - start
        stats["saved_bytes"] = pytorch_saved_bytes(fw, bw)
        return fw, bw

    return aot_module(step, fw_compiler=nop, bw_compiler=nop, partition_fn=timed), stats


def aot_module(module: torch.nn.Module, **kwargs) -> Callable:
    """``torch._functorch.aot_autograd.aot_module``, for modules with tied weights too.

    PyTorch's own passes every tied parameter under each of its names
    (``named_parameters(remove_duplicate=False)``), which ``functional_call`` rejects
    ("got multiple values for keys ... which are tied": GPT-2's ``lm_head``). Here each
    parameter is passed once, under its first name; ``functional_call`` ties the rest.
    """
    from torch._functorch.aot_autograd import aot_function

    def functional_call(named_params: dict, named_buffers: dict, *args, **kw):
        return torch.func.functional_call(module, {**named_params, **named_buffers}, args, kw)

    named_params = dict(module.named_parameters())
    named_buffers = dict(module.named_buffers())
    compiled = aot_function(functional_call, num_params_buffers=len(named_params) + len(named_buffers), **kwargs)
    return lambda *args, **kw: compiled(named_params, named_buffers, *args, **kw)


def pytorch_saved_bytes(fw: torch.fx.GraphModule, bw: torch.fx.GraphModule) -> int:
    """Bytes of the backward's saved inputs, counted as ``Plan.saved_bytes`` counts ours.

    A saved value that is a forward input or a view of one (a weight, the batch) is live
    anyway: 0 bytes. Symbolic sizes: 8 bytes.
    """
    forward = {n.name: n for n in fw.graph.nodes}
    total = 0
    for node in bw.graph.nodes:
        if node.op != "placeholder" or node.name.startswith("tangents"):
            continue
        source = forward.get(node.name)
        if source is not None and aliases_input(source):
            continue
        total += _nbytes(node.meta.get("val"))
    return total


def _nbytes(val) -> int:
    if not isinstance(val, torch.Tensor):
        return 8 if val is not None else 0
    return math.prod(int(s) for s in val.shape) * val.dtype.itemsize


def _plan_of(compiled: torch.nn.Module) -> jointgraph.Plan:
    """The plan of the entry a jointgraph ``aot_module`` compiled on its first call."""
    return compiled._compiled.entries[-1].plan


def _warm(fn: Callable, step: torch.nn.Module, inputs: tuple) -> float:
    """The first call: traces, partitions and compiles (after a full collection, see ``_collect``);
    its seconds, warnings silenced."""
    step.zero_grad(set_to_none=True)
    _collect()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn(*inputs).backward()
    seconds = time.perf_counter() - start
    step.zero_grad(set_to_none=True)
    return seconds


def compare(work: Workload, repeat: int) -> list[Row]:
    """Every contender on one workload, in one process; rows in ``CONTENDERS`` order."""
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

    step, inputs, name = work.step, work.inputs, work.name
    _warm(step, step, inputs)
    rows = [Row(name, "eager", None, None, measured_peak(step, step, inputs), None,
                step_seconds(step, step, inputs, repeat))]
    for label, fn in (("pytorch default", default_partition),
                      ("pytorch min-cut", min_cut_rematerialization_partition)):
        compiled, stats = pytorch_compiled(step, fn)
        _warm(compiled, step, inputs)
        rows.append(Row(name, label, stats["saved_bytes"], None, measured_peak(step, compiled, inputs),
                        stats["seconds"], step_seconds(step, compiled, inputs, repeat), stats["joint_nodes"]))
    for partitioner in ("default", "mincut"):
        compiled = jointgraph.aot_module(step, partitioner=partitioner)
        _warm(compiled, step, inputs)
        plan = _plan_of(compiled)
        rows.append(Row(name, f"jointgraph {partitioner}", plan.saved_bytes, plan.peak_bytes,
                        measured_peak(step, compiled, inputs), plan.timings["partition"],
                        step_seconds(step, compiled, inputs, repeat)))
    return rows


def _collect() -> None:
    """A full garbage collection before each contender compiles.

    A generation-2 collection over a process holding several models and their graphs takes
    ~0.3 s here; when one lands inside a partitioner call it dwarfs the partition itself
    (seen on Llama: 0.41 s instead of 0.06 s). Collecting first, for PyTorch's contenders
    and ours alike, makes that unlikely.
    """
    gc.collect()


### Depth scaling

class _TimedCut:
    """Time our cut alone (the ``PARTITIONERS["mincut"]`` call), apart from the passes and split."""

    def __init__(self):
        self.table = importlib.import_module("jointgraph.api").PARTITIONERS
        self.stats: dict = {}

    def __enter__(self):
        cut = self.cut = self.table["mincut"]

        def timed(graph):
            start = time.perf_counter()
            choices = cut(graph)
            self.stats["cut_seconds"] = time.perf_counter() - start
            self.stats["joint_nodes"] = len(graph.nodes)
            return choices

        self.table["mincut"] = timed
        return self.stats

    def __exit__(self, *exc):
        self.table["mincut"] = self.cut


@dataclasses.dataclass
class ScaleRow:
    layers: int
    joint_nodes: int
    partition_seconds: float     # ours: plan.timings["partition"]
    cut_seconds: float           # ours: the min-cut call alone
    pytorch_joint_nodes: int
    pytorch_seconds: float       # PyTorch's min_cut_rematerialization_partition


def scaling(depths: tuple[int, ...], width: int) -> list[ScaleRow]:
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    rows = []
    for layers in depths:
        work = build_workload("gpt", ZooShape(layers=layers, width=width, batch=2, seq=32))
        _collect()
        with _TimedCut() as ours:
            plan = jointgraph.plan(work.step, *work.inputs, partitioner="mincut")
        compiled, stats = pytorch_compiled(work.step, min_cut_rematerialization_partition)
        _collect()
        compiled(*work.inputs)
        rows.append(ScaleRow(layers, ours["joint_nodes"], plan.timings["partition"], ours["cut_seconds"],
                             stats["joint_nodes"], stats["seconds"]))
    return rows


### Report

def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:,.1f}"


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a is not None and b else "-"


def model_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    eager = {r.model: r.measured_peak for r in rows if r.contender == "eager"}
    head = ["model", "contender", "saved MiB", "simulated peak MiB", "measured peak MiB", "sim / measured",
            "peak / eager", "partition s", "step s"]
    body = [[r.model, r.contender, _mib(r.saved_bytes), _mib(r.simulated_peak), _mib(r.measured_peak),
             _ratio(r.simulated_peak, r.measured_peak), _ratio(r.measured_peak, eager[r.model]),
             _secs(r.partition_seconds), _secs(r.step_seconds)] for r in rows]
    return head, body


def ratio_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    by = {(r.model, r.contender): r for r in rows}
    head = ["model", "ours vs PyTorch", "saved", "measured peak", "partition time", "step time"]
    body = []
    for model in dict.fromkeys(r.model for r in rows):
        for ours, theirs in OURS_VS_THEIRS:
            a, b = by[model, ours], by[model, theirs]
            body.append([model, f"{ours.split()[1]} / {theirs.split(' ', 1)[1]}",
                         _ratio(a.saved_bytes, b.saved_bytes), _ratio(a.measured_peak, b.measured_peak),
                         _ratio(a.partition_seconds, b.partition_seconds), _ratio(a.step_seconds, b.step_seconds)])
    return head, body


def scale_table(scale: list[ScaleRow]) -> tuple[list[str], list[list[str]]]:
    head = ["layers", "joint nodes (ours / PyTorch)", "ours: partition s", "ours: cut only s", "PyTorch min-cut s",
            "ours / PyTorch", "ours s per 1k nodes", "PyTorch s per 1k nodes"]
    body = [[str(r.layers), f"{r.joint_nodes:,} / {r.pytorch_joint_nodes:,}", f"{r.partition_seconds:.3f}",
             f"{r.cut_seconds:.3f}", f"{r.pytorch_seconds:.3f}", _ratio(r.partition_seconds, r.pytorch_seconds),
             f"{1000 * r.partition_seconds / r.joint_nodes:.3f}",
             f"{1000 * r.pytorch_seconds / r.pytorch_joint_nodes:.3f}"] for r in scale]
    return head, body


def machine() -> dict:
    return {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "cpus": os.cpu_count(), "threads": torch.get_num_threads(),
            "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None}


def report(rows: list[Row], scale: list[ScaleRow], run: Setup, models: list[str], seconds: float) -> None:
    shapes = "; ".join(f"{m}: layers={s.layers} width={s.width} batch={s.batch} seq={s.seq}"
                       for m, s in run.shapes.items() if m in models)
    tables = []
    if rows:
        tables += [(f"Training step per partitioner (CPU, fp32; {shapes}); MiB = 2**20 bytes", *model_table(rows)),
                   ("Ours / PyTorch's, same kind of partitioner (below 1.00x: ours smaller or faster)",
                    *ratio_table(rows))]
    if scale:
        tables.append((f"Min-cut partition time vs depth (GPT, width {run.scaling_width}, batch 2, seq 32)",
                       *scale_table(scale)))
    print_tables(tables, seconds)


def print_tables(tables: list[tuple[str, list[str], list[list[str]]]], seconds: float, width: int = 160) -> None:
    """Rich tables (title, header, rows), then the machine and the run's total seconds."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=width)
    for title, head, body in tables:
        table = Table(title=title)
        for column in head:
            table.add_column(column, justify="left" if column in ("model", "contender") else "right")
        for line in body:
            table.add_row(*line)
        console.print(table)
    info = machine()
    print(f"{info['cpus']} CPUs, {info['threads']} torch threads, torch {info['torch']}, "
          f"load average {info['load_average']}; total {seconds:.0f} s")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, from {', '.join(MODELS)}; empty for the depth table only")
    parser.add_argument("--quick", action="store_true", help="CI-sized: tiny models, depths 6 and 12")
    parser.add_argument("--depths", help="comma-separated GPT depths for the scaling table; 0 to skip it")
    parser.add_argument("--repeat", type=int, help="timed steps per contender (median)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    run = setup(args.quick, args.depths, args.repeat)
    start = time.perf_counter()
    rows = []
    for model in models:
        print(f"{model}: {CONTENDERS} ...", file=sys.stderr, flush=True)
        rows += compare(build_workload(model, run.shapes[model]), run.repeat)
    if run.depths and any(d > 0 for d in run.depths):
        print(f"depth scaling: GPT with {run.depths} layers ...", file=sys.stderr, flush=True)
    scale = scaling(tuple(d for d in run.depths if d > 0), run.scaling_width)
    seconds = time.perf_counter() - start
    report(rows, scale, run, models, seconds)
    result = {"machine": machine(), "seconds": seconds,
              "shapes": {m: {k: v for k, v in dataclasses.asdict(s).items() if k in ("layers", "width", "batch", "seq")}
                         for m, s in run.shapes.items() if m in models},
              "rows": [dataclasses.asdict(r) for r in rows],
              "scaling": {"width": run.scaling_width, "batch": 2, "seq": 32,
                          "rows": [dataclasses.asdict(r) for r in scale]}}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
