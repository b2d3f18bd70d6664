"""The ``jointgraph`` command: ``bench``, ``report`` and ``explain``.

    jointgraph bench gpt --layers 2 --batch 4 --seq 128 --json bench.json --report report.html
    jointgraph bench gpt --budget 0.6 --saved-tensors bf16
    jointgraph report gpt2 --budget 0.6 --pareto -o report.html
    jointgraph explain mymodels:build_model

MODEL is a zoo name (``jointgraph.bench.zoo.ZOO``) or ``module:function`` returning
``(model, example_inputs)`` or ``(model, example_inputs, loss_fn)``. Bad arguments exit with code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

DTYPES = ("float32", "bfloat16", "float16", "float64")


class UsageError(Exception):
    """A bad argument found after parsing (unknown model, invalid option); exit code 2."""


### Arguments

def _budget(text: str) -> float | int:
    """``0.6`` is a fraction of the default plan's peak; ``2000000000`` (or ``2e9``) is a peak in bytes."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid budget {text!r}: a float in (0, 1] or a number of bytes") from None
    return int(value) if value > 1 and value.is_integer() else value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _add_model_args(parser: argparse.ArgumentParser) -> None:
    from .bench.runner import SAVED_TENSORS
    from .bench.zoo import ZOO

    parser.add_argument("model", metavar="MODEL",
                        help=f"one of {', '.join(ZOO)}, or module:function returning (model, inputs[, loss_fn])")
    shape = parser.add_argument_group("model size")
    shape.add_argument("--layers", type=_positive, default=2, help="transformer / MLP / conv layers (default 2)")
    shape.add_argument("--width", type=_positive, default=128, help="hidden size (default 128)")
    shape.add_argument("--batch", type=_positive, default=4, help="batch size (default 4)")
    shape.add_argument("--seq", type=_positive, default=128, help="sequence length; image side for convnet")
    shape.add_argument("--dtype", choices=DTYPES, default="float32")
    shape.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available, else cpu)")
    opts = parser.add_argument_group("jointgraph options")
    opts.add_argument("--partitioner", choices=("default", "mincut", "budget"), default=None,
                      help='default "mincut"; "budget" when --budget is given')
    opts.add_argument("--compiler", choices=("eager", "inductor"), default="eager",
                      help="jointgraph's graph compiler for both graphs (default eager: the FX graphs as they are; "
                      "inductor: fused generated kernels, see the README)")
    opts.add_argument("--budget", type=_budget, default=None,
                      help="peak-memory budget: a fraction in (0, 1] of the default plan's peak, or bytes")
    opts.add_argument("--saved-tensors", choices=SAVED_TENSORS, default=None,
                      help="compress and/or offload saved tensors (jointgraph.hooks.SavedTensorPolicy); with "
                      "--budget: what the planner may use")


def _add_pareto_arg(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--pareto", action="store_true",
                        help=f"add the budget/step-time Pareto curve (jointgraph.pareto) to {what}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jointgraph", description="Compile PyTorch training steps ahead of "
                                     "time and see where their memory goes.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{bench,report,explain}")
    bench = sub.add_parser("bench", help="eager vs torch.compile vs jointgraph on one training step")
    _add_model_args(bench)
    bench.add_argument("--repeat", type=_positive, default=5, help="timed steps after warm-up (median is shown)")
    bench.add_argument("--warmup", type=int, default=1, help="untimed steps after the first (compiling) call")
    bench.add_argument("--json", metavar="PATH", help="write every figure, the machine and the options as JSON")
    bench.add_argument("--report", metavar="PATH", help="also write jointgraph's plan as an HTML report")
    _add_pareto_arg(bench, "the --report")
    report = sub.add_parser("report", help="write the HTML report of jointgraph's plan")
    _add_model_args(report)
    report.add_argument("-o", "--output", metavar="PATH", default="report.html")
    _add_pareto_arg(report, "the report")
    explain = sub.add_parser("explain", help="print what jointgraph saves for the backward, and why")
    _add_model_args(explain)
    return parser


def _resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Fill defaults that depend on other arguments and check what argparse cannot."""
    import torch

    if args.partitioner is None:
        args.partitioner = "budget" if args.budget is not None else "mincut"
    if args.budget is not None and args.partitioner != "budget":
        raise UsageError(f"--budget needs --partitioner budget (got --partitioner {args.partitioner})")
    if args.partitioner == "budget" and args.budget is None:
        raise UsageError("--partitioner budget needs --budget (a fraction in (0, 1] or bytes)")
    if getattr(args, "pareto", False) and args.command == "bench" and not args.report:
        raise UsageError("--pareto adds a section to the HTML report: give --report PATH too")
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available")
    if not (args.device == "cpu" or args.device.startswith("cuda")):
        raise UsageError(f"--device {args.device!r}: use cpu or cuda")
    try:
        from .options import make_options

        make_options(**_options(args))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except ImportError as exc:
        raise UsageError(f"--saved-tensors needs jointgraph.hooks, which this installation lacks ({exc})") from exc
    return args


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return _bench_options(args).jointgraph_options()


def _bench_options(args: argparse.Namespace):
    from .bench import BenchOptions

    return BenchOptions(model=args.model, layers=args.layers, width=args.width, batch=args.batch, seq=args.seq,
                        dtype=args.dtype, device=args.device, partitioner=args.partitioner,
                        compiler=args.compiler, budget=args.budget, saved_tensors=args.saved_tensors,
                        repeat=getattr(args, "repeat", 1),
                        warmup=getattr(args, "warmup", 1))


def _workload(args: argparse.Namespace):
    import torch

    from .bench import ZooShape, build_workload

    shape = ZooShape(layers=args.layers, width=args.width, batch=args.batch, seq=args.seq,
                     dtype=getattr(torch, args.dtype), device=args.device)
    return build_workload(args.model, shape)


### Commands

def cmd_bench(args: argparse.Namespace, console) -> int:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .bench import run_bench

    options = _bench_options(args)
    work = _workload(args)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_stderr_console(), transient=True) as progress:
        task = progress.add_task(f"{work.name}: planning", total=1.0)

        def tell(message: str, done: float) -> None:
            progress.update(task, description=f"{work.name}: {message}", completed=done)

        notes: list[str] = []
        with _warnings_once(notes):
            result = run_bench(work, options, tell)
    console.print(bench_table(result))
    for r in result.results:
        if r.error:
            console.print(f"[red]{r.name} failed:[/red] {r.error}", highlight=False)
    for line in ratio_lines(result):
        console.print(line)
    _print_notes(console, notes)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_json(), f, indent=2, default=str)
        console.print(f"figures written to {args.json}")
    if args.report:
        if result.plan is None:
            console.print("[red]no report: jointgraph could not plan this model[/red]")
            return 1
        from .report.html import write_plan_html

        points = _pareto(work, args, console) if args.pareto else None
        write_plan_html(result.plan, args.report, title=f"jointgraph bench {work.name}", bench=result, pareto=points)
        console.print(f"report written to {args.report}")
    return 1 if any(r.error for r in result.results if r.kind == "jointgraph") else 0


def cmd_report(args: argparse.Namespace, console) -> int:
    from .bench import budget_bytes
    from .report.html import write_plan_html

    plan, work = _plan(args, console)
    budget = budget_bytes(work, args.budget, args.compiler)
    points = _pareto(work, args, console) if args.pareto else None
    write_plan_html(plan, args.output, title=f"jointgraph report {work.name}", budget_bytes=budget, pareto=points)
    console.print(f"report written to {args.output}")
    return 0


def cmd_explain(args: argparse.Namespace, console) -> int:
    plan, work = _plan(args, console)
    console.print(saved_table(plan, title=f"{work.name}: values saved for the backward"))
    return 0


def _plan(args: argparse.Namespace, console):
    import jointgraph

    work = _workload(args)
    notes: list[str] = []
    with _warnings_once(notes):
        plan = jointgraph.plan(work.step, *work.inputs, **_options(args))
    _print_notes(console, notes)
    return plan, work


def _pareto(work, args: argparse.Namespace, console) -> list:
    """``jointgraph.pareto`` of the workload with the command's other options (saved tensors)."""
    import jointgraph

    options = {k: v for k, v in _options(args).items() if k not in ("partitioner", "memory_budget")}
    with _stderr_console().status(f"{work.name}: planning at 10 budgets for the Pareto curve"):
        return jointgraph.pareto(work.step, *work.inputs, **options)


@contextlib.contextmanager
def _warnings_once(notes: list[str]) -> Iterator[None]:
    """Collect jointgraph's warning messages in the block into ``notes``, each once (the plan and every
    compile may repeat one), to print with ``_print_notes``; other warnings are shown as usual."""
    with warnings.catch_warnings(record=True) as caught:   # the filters stay; only the display is caught
        warnings.filterwarnings("always", module=r"jointgraph(\.|$)")
        try:
            yield
        finally:
            ours = [w for w in caught if os.sep + "jointgraph" + os.sep in w.filename]
            notes.extend(m for m in dict.fromkeys(str(w.message) for w in ours) if m not in notes)
    for w in caught:
        if w not in ours:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _print_notes(console, notes: list[str]) -> None:
    for message in notes:
        console.print(f"[yellow]note:[/yellow] {message}", highlight=False)


### Tables

def bench_table(result):
    from rich.table import Table

    o = result.options
    table = Table(title=f"{result.workload}: {result.parameters:,} parameters, layers={o.layers} width={o.width} "
                  f"batch={o.batch} seq={o.seq} {o.dtype} on {o.device}")
    from .bench.runner import BENCH_COLUMNS
    from .report.html import bench_cells

    for name in BENCH_COLUMNS:
        table.add_column(name, justify="left" if name == "contender" else "right", no_wrap=True)
    for r in result.results:
        if r.error:
            table.add_row(r.name, "[red]failed[/red]", *["" for _ in BENCH_COLUMNS[2:]])
            continue
        table.add_row(r.name, *bench_cells(r))
    return table


def ratio_lines(result) -> list[str]:
    ratios = result.ratios()
    if not ratios:
        return ["no ratios: a torch.compile or jointgraph contender failed"]
    names = {"measured_peak_bytes": "peak", "saved_bytes_measured": "saved", "step_seconds": "step time",
             "compile_seconds": "compile time"}
    return [f"{pair}: " + ", ".join(f"{names[k]} x{v:.2f}" for k, v in figures.items() if v is not None)
            + "  (below 1 is better)" for pair, figures in ratios.items()]


def saved_table(plan, title: str = "saved for the backward"):
    from rich.table import Table

    from .report.html import fmt_bytes, saved_rows

    table = Table(title=title, caption=f"saved {fmt_bytes(plan.saved_bytes)} in {len(plan.saved)} values; "
                  f"simulated peak {fmt_bytes(plan.peak_bytes)}")
    for name in ("name", "shape", "dtype", "bytes", "decision", "reason"):
        table.add_column(name, justify="right" if name == "bytes" else "left", overflow="fold")
    for row in saved_rows(plan):
        table.add_row(*row)
    return table


### Entry point

def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


COMMANDS = {"bench": cmd_bench, "report": cmd_report, "explain": cmd_explain}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``jointgraph`` command; returns (and, as a script, exits with) its status code."""
    from rich.console import Console

    from .bench.zoo import ModelSpecError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args = _resolve(args)
        console = Console()
        if not console.is_terminal:
            console = Console(width=150)  # piped or captured: keep the table on one line per row
        return COMMANDS[args.command](args, console)
    except (UsageError, ModelSpecError) as exc:
        parser.exit(2, f"jointgraph {args.command}: error: {exc}\n")


if __name__ == "__main__":
    sys.exit(main())
