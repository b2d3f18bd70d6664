"""The ``jointgraph`` command: ``bench``, ``report``, ``explain`` and ``cache``.

    jointgraph bench gpt --layers 2 --batch 4 --seq 128 --json bench.json --report report.html
    jointgraph bench gpt --budget 0.6 --saved-tensors bf16
    jointgraph report gpt2 --budget 0.6 --pareto -o report.html
    jointgraph explain mymodels:build_model
    jointgraph cache info

MODEL is a zoo name (``jointgraph.bench.zoo.ZOO``) or ``module:function`` returning
``(model, example_inputs)`` or ``(model, example_inputs, loss_fn)``.

Exit codes: 0 success; 2 bad arguments (unknown model or flag, invalid option, an output path
that cannot be written: checked before anything runs); 1 a model that cannot run, cannot be
compiled (``UnsupportedError``), does not train, or whose budget is below the reachable floor.
Failures print one message; ``--debug`` shows the traceback. Also ``python -m jointgraph``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

DTYPES = ("float32", "bfloat16", "float16", "float64")


class UsageError(Exception):
    """A bad argument found after parsing (unknown model, invalid option); exit code 2."""


class CommandFailure(Exception):
    """The model cannot run, be compiled or be planned as asked; exit code 1, one message."""


class Parser(argparse.ArgumentParser):
    """argparse with suggestions for mistyped flags, commands and choices (difflib)."""

    def error(self, message: str):
        hint = _suggestion(self, message)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}{hint}\n")


def _suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        options = [c.strip(" '\"") for c in choice.group(2).split(",")]
        close = difflib.get_close_matches(choice.group(1), options, n=1, cutoff=0.6)
        return f" (did you mean {close[0]!r}?)" if close else ""
    unknown = re.match(r"unrecognized arguments: (.*)", message)
    if unknown:
        flags = _all_flags(parser)
        hints = [f"{arg} -> {close[0]}" for arg in unknown.group(1).split() if arg.startswith("-")
                 for close in [difflib.get_close_matches(arg.split("=")[0], flags, n=1, cutoff=0.6)] if close]
        return f" (did you mean: {', '.join(hints)}?)" if hints else ""
    return ""


def _all_flags(parser: argparse.ArgumentParser) -> list[str]:
    flags = []
    for action in parser._actions:
        flags += [f for f in action.option_strings if f.startswith("--")]
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                flags += _all_flags(sub)
    return sorted(set(flags))


class _Version(argparse.Action):
    """``--version``: jointgraph's and torch's versions (torch imported only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        import torch

        from . import __version__

        sys.stdout.write(f"jointgraph {__version__} (torch {torch.__version__})\n")
        parser.exit(0)


### Arguments

def _budget(text: str) -> float | int:
    """``0.6`` is a fraction of the default plan's peak; ``2GiB``, ``1500MiB``, ``1500MB`` (10**6),
    ``2000000000`` or ``2e9`` a peak in bytes."""
    from .units import parse_bytes

    try:
        value = parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return int(value) if isinstance(value, float) and value > 1 and value.is_integer() else value


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
                      help="peak-memory budget: a fraction in (0, 1] of the default plan's peak (0.6), or a "
                      "size (2GiB, 1500MiB, 1500MB, bytes); implies --partitioner budget")
    opts.add_argument("--saved-tensors", choices=SAVED_TENSORS, default=None,
                      help="compress and/or offload saved tensors (jointgraph.hooks.SavedTensorPolicy); with "
                      "--budget: what the planner may use")


def _add_pareto_arg(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--pareto", action="store_true",
                        help=f"add the budget/step-time Pareto curve (jointgraph.pareto) to {what}")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="jointgraph", description="Compile PyTorch training steps ahead of "
                    "time and see where their memory goes.")
    parser.add_argument("--version", action=_Version, help="print jointgraph's and torch's versions")
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the traceback of a failure")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{bench,report,explain,cache}",
                                parser_class=Parser)
    bench = sub.add_parser("bench", help="eager vs torch.compile vs jointgraph on one training step",
                           parents=[common])
    _add_model_args(bench)
    bench.add_argument("--repeat", type=_positive, default=5, help="timed steps after warm-up (median is shown)")
    bench.add_argument("--warmup", type=int, default=1, help="untimed steps after the first (compiling) call")
    bench.add_argument("--json", metavar="PATH", help="write every figure, the machine and the options as JSON")
    bench.add_argument("--report", metavar="PATH", help="also write jointgraph's plan as an HTML report")
    bench.add_argument("--nproc", type=_positive, default=1,
                       help="ranks: with 2 or more, DDP and FSDP2 scenarios per rank (gloo on CPU), "
                            "eager vs jointgraph vs aot_eager peak memory")
    _add_pareto_arg(bench, "the --report")
    report = sub.add_parser("report", help="write the HTML report of jointgraph's plan", parents=[common])
    _add_model_args(report)
    report.add_argument("-o", "--output", metavar="PATH", default="report.html")
    _add_pareto_arg(report, "the report")
    explain = sub.add_parser("explain", help="print what jointgraph saves for the backward, and why",
                             parents=[common])
    _add_model_args(explain)
    explain.add_argument("--all", action="store_true",
                         help="list parameters and inputs one by one (folded into one line by default)")
    cache = sub.add_parser("cache", help="the on-disk compile cache: info (entries, bytes, hits) or clear",
                           parents=[common])
    cache.add_argument("action", choices=("info", "clear"))
    cache.add_argument("--dir", metavar="PATH", help="the cache directory (default: $JOINTGRAPH_CACHE_DIR, else "
                       "the per-user cache directory)")
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
    for flag, path in (("--json", getattr(args, "json", None)), ("--report", getattr(args, "report", None)),
                       ("--output", getattr(args, "output", None))):
        if path:
            _check_writable(flag, path)
    try:
        from .options import make_options

        make_options(**_options(args))
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    except ImportError as exc:
        raise UsageError(f"--saved-tensors needs jointgraph.hooks, which this installation lacks ({exc})") from exc
    return args


def _check_writable(flag: str, path: str) -> None:
    """Fail before a long run, not after it, on an output path that cannot be written: the file is
    opened for appending (and removed again when it did not exist), which is the only check that
    holds for root, read-only mounts and pseudo file systems alike (``os.access`` says yes to root)."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory; give a file path")
    if not os.path.isdir(folder):
        raise UsageError(f"{flag} {path}: the folder {folder} does not exist")
    existed = os.path.exists(path)
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot be written ({exc.strerror or exc})") from exc
    if not existed:
        with contextlib.suppress(OSError):
            os.remove(path)


def _write_output(flag: str, path: str, write) -> None:
    """``write(path)``; an OSError (disk full, folder removed meanwhile) is the output's failure, not the model's."""
    try:
        write(path)
    except OSError as exc:
        raise CommandFailure(f"{flag} {path}: could not write it ({exc.strerror or exc})") from exc


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
    from .bench.zoo import ModelSpecError

    shape = ZooShape(layers=args.layers, width=args.width, batch=args.batch, seq=args.seq,
                     dtype=getattr(torch, args.dtype), device=args.device)
    try:
        return build_workload(args.model, shape)
    except ModelSpecError:
        raise
    except Exception as exc:   # the user's model function raised: the model cannot run (exit 1)
        raise CommandFailure(f"building the model {args.model} failed: {type(exc).__name__}: {exc}") from exc


### Commands

def cmd_bench_distributed(args: argparse.Namespace, console) -> int:
    """``bench --nproc N``: every DDP / FSDP2 scenario on N spawned ranks (Note [Distributed runs])."""
    from .bench.distributed import SCENARIOS, peak_table, run_scenarios, spawn

    if args.model not in ("gpt", "llama"):
        raise UsageError(f"--nproc runs the language models gpt and llama, not {args.model!r}")
    names = [n for n, s in SCENARIOS.items() if s.model == "gpt"]
    contenders = ("eager", "jointgraph", "aot_eager")
    ranks = spawn(run_scenarios, (names, args.width, args.seq, args.layers, contenders, args.model),
                  nproc=args.nproc, timeout=1800)
    console.print(peak_table(names, ranks, contenders, f"{args.model} on {args.nproc} ranks: peak bytes of one "
                             f"training step (layers={args.layers} width={args.width} seq={args.seq}), each "
                             "scenario checked against eager first"))
    blocks = _block_plans(args, console)
    if args.json:
        _write_output("--json", args.json, lambda path: _dump_json(path, {
            "scenarios": [[r.__dict__ for r in results] for results in ranks],
            "block_plans": [[r.__dict__ for r in results] for results in blocks]}))
    return 1 if any(not r.ok for results in ranks for r in results) else 0


def _block_plans(args: argparse.Namespace, console) -> list:
    """One FSDP2 GPT block's plan against its measured peak per rank (Note [Simulated and measured per
    rank]); with ``--report PATH`` each rank writes the block plan's report (``-rank{N}`` before the suffix)."""
    from .bench.block_memory import block_checks, block_table
    from .bench.distributed import spawn

    report = None
    if args.report:
        stem, dot, suffix = args.report.rpartition(".")
        report = f"{stem}-rank{{rank}}.{suffix}" if dot else f"{args.report}-rank{{rank}}"
    blocks = spawn(block_checks, (args.width, args.seq, report), nproc=args.nproc, timeout=1800)
    console.print(block_table(blocks, f"one FSDP2 GPT block (width={args.width} seq={args.seq}) on {args.nproc} "
                              "ranks: peak above the step's start, measured and simulated by its plan"))
    if report:
        console.print(f"block plan reports written to {report.format(rank='N')}")
    return blocks


def cmd_bench(args: argparse.Namespace, console) -> int:
    if args.nproc > 1:
        return cmd_bench_distributed(args, console)
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .bench import run_bench

    options = _bench_options(args)
    work = _workload(args)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=_stderr_console(), transient=True) as progress:
        task = progress.add_task(f"{work.name}: planning", total=1.0)

        def tell(message: str, done: float) -> None:
            progress.update(task, description=f"{work.name}: {message}", completed=done)

        notes: list[Warning] = []
        with _warnings_once(notes):
            result = run_bench(work, options, tell)
    eager = next((r for r in result.results if r.kind == "eager"), None)
    if eager is not None and eager.error:
        raise CommandFailure(f"{work.name} does not run eagerly: {eager.error}")
    if result.plan is not None:
        _check_trains(result.plan, work.name)
    console.print(bench_table(result))
    for r in result.results:
        if r.error:
            console.print(f"[red]{r.name} failed:[/red] {r.error}", highlight=False)
    for line in ratio_lines(result) + budget_lines(result):
        console.print(line)
    _print_notes(console, notes)
    if args.json:
        _write_output("--json", args.json, lambda path: _dump_json(path, result.to_json()))
        console.print(f"figures written to {args.json}")
    if args.report:
        if result.plan is None:
            console.print("[red]no report: jointgraph could not plan this model[/red]")
            return 1
        from .report.html import write_plan_html

        points = _pareto(work, args, console) if args.pareto else None
        _write_output("--report", args.report, lambda path: write_plan_html(
            result.plan, path, title=f"jointgraph bench {work.name}", bench=result, pareto=points))
        console.print(f"report written to {args.report}")
    if any(_below_floor(n) for n in notes):
        return 1
    return 1 if any(r.error for r in result.results if r.kind == "jointgraph") else 0


def cmd_report(args: argparse.Namespace, console) -> int:
    from .bench import budget_bytes
    from .report.html import write_plan_html

    plan, work = _plan(args, console)
    budget = budget_bytes(work, args.budget, args.compiler)
    points = _pareto(work, args, console) if args.pareto else None
    _write_output("--output", args.output, lambda path: write_plan_html(
        plan, path, title=f"jointgraph report {work.name}", budget_bytes=budget, pareto=points))
    console.print(f"report written to {args.output}")
    return 0


def cmd_explain(args: argparse.Namespace, console) -> int:
    plan, work = _plan(args, console)
    console.print(saved_table(plan, title=f"{work.name}: values saved for the backward", show_all=args.all))
    return 0


def _plan(args: argparse.Namespace, console):
    import jointgraph

    with _stderr_console().status(f"{args.model}: building the model"):
        work = _workload(args)
    notes: list[Warning] = []
    with _warnings_once(notes), _stderr_console().status(f"{work.name}: tracing and planning"):
        plan = jointgraph.plan(work.step, *work.inputs, **_options(args))
    _check_trains(plan, work.name)
    floor = next((n for n in notes if _below_floor(n)), None)
    if floor is not None:
        raise CommandFailure(f"--budget {args.budget}: {floor.requirement}; give at least that")
    _print_notes(console, notes)
    return plan, work


def _check_trains(plan, name: str) -> None:
    if plan.backward is None:
        raise CommandFailure(f"{name} does not train: no gradient flows from its loss to a parameter or input "
                             "(does anything require grad? is the loss computed from the output?), so there is "
                             "no backward to plan")


def _below_floor(note: Warning) -> bool:
    from .planner.budget import BudgetBelowFloor

    return isinstance(note, BudgetBelowFloor)


def _pareto(work, args: argparse.Namespace, console) -> list:
    """``jointgraph.pareto`` of the workload with the command's other options (saved tensors)."""
    import jointgraph

    options = {k: v for k, v in _options(args).items() if k not in ("partitioner", "memory_budget")}
    with _stderr_console().status(f"{work.name}: planning at 10 budgets for the Pareto curve"):
        return jointgraph.pareto(work.step, *work.inputs, **options)


@contextlib.contextmanager
def _warnings_once(notes: list[Warning]) -> Iterator[None]:
    """Collect jointgraph's warning messages in the block into ``notes``, each once (the plan and every
    compile may repeat one), to print with ``_print_notes``; other warnings are shown as usual."""
    with warnings.catch_warnings(record=True) as caught:   # the filters stay; only the display is caught
        warnings.filterwarnings("always", module=r"jointgraph(\.|$)")
        try:
            yield
        finally:
            ours = [w for w in caught if os.sep + "jointgraph" + os.sep in w.filename]
            seen = {str(n) for n in notes}
            for w in ours:
                if str(w.message) not in seen:
                    seen.add(str(w.message))
                    notes.append(w.message)
    for w in caught:
        if w not in ours:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _print_notes(console, notes: list[Warning]) -> None:
    for message in notes:
        console.print(f"[yellow]note:[/yellow] {message}", highlight=False)


def _dump_json(path: str, data: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)


### Tables

def bench_table(result):
    from rich.table import Table

    o = result.options
    table = Table(title=f"{result.workload}: {result.parameters:,} parameters, layers={o.layers} width={o.width} "
                  f"batch={o.batch} seq={o.seq} {o.dtype} on {o.device}")
    from .report.columns import BENCH_COLUMNS, bench_cells

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


def budget_lines(result) -> list[str]:
    """With --budget: each jointgraph contender's simulated and measured peak against the budget."""
    from .units import fmt_bytes

    budget = result.budget_bytes
    if budget is None:
        return []
    lines = []
    for row in result.results:
        if row.kind != "jointgraph":
            continue
        verdicts = [f"{label} peak {fmt_bytes(value)} " + ("within it" if value <= budget else
                                                           f"over it by {fmt_bytes(value - budget)}")
                    for label, value in (("simulated", row.simulated_peak_bytes), ("measured", row.measured_peak_bytes))
                    if value is not None]
        lines.append(f"budget {fmt_bytes(budget)}: {row.name}: " + ", ".join(verdicts or ["not measured"]))
    return lines


def saved_table(plan, title: str = "saved for the backward", *, show_all: bool = False):
    """The explain table (``jointgraph.report.explain``): groups by layer with subtotals, largest first."""
    from rich.table import Table

    from .report.explain import explain, folded_line, held_anyway_lines
    from .units import fmt_bytes

    explanation = explain(plan)
    table = Table(title=title, caption=explanation.footer())
    for name in ("bytes", "value", "shape", "dtype", "decision and reason", "module (line)"):
        table.add_column(name, justify="right" if name == "bytes" else "left", overflow="fold")
    for group in explanation.groups:
        table.add_row(f"[bold]{fmt_bytes(group.nbytes)}[/bold]", f"[bold]{group.module or '(top level)'}[/bold]",
                      "", "", "", "", end_section=False)
        shown, folded = group.split(show_all=show_all)
        for r in shown:
            table.add_row(fmt_bytes(r.nbytes), r.name, str(r.shape), r.dtype, r.reason,
                          r.where)
        if folded:
            table.add_row("", "", "", "", folded_line(folded), "")
        table.add_section()
    if show_all:
        for r in explanation.held_anyway:
            table.add_row(fmt_bytes(r.nbytes), r.name, str(r.shape), r.dtype, r.reason, "")
    else:
        for line in held_anyway_lines(explanation.held_anyway, show_all=False):
            table.add_row("", "", "", "", line, "")
    return table


### Entry point

def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def cmd_cache(args: argparse.Namespace, console) -> int:
    from .cache import DiskStore, cache_option_from_env, default_dir, open_store
    from .cache.info import cache_info, info_lines

    # JOINTGRAPH_CACHE_DIR=off still names the default directory here: there is a cache to inspect.
    store = open_store(args.dir or cache_option_from_env(True)) or DiskStore(default_dir())
    if store.root.exists() and not store.root.is_dir():
        raise UsageError(f"{store.root} is a file, not a cache directory")
    if not store.root.exists():
        if args.dir:   # named on the command line: most likely a typo
            raise UsageError(f"--dir {args.dir}: no such directory")
        console.print(f"no cache yet: {store.root} does not exist (nothing has been compiled with the cache on)",
                      highlight=False)
        return 0
    if args.action == "clear":
        console.print(f"removed {store.clear()} entries from {store.root}", highlight=False)
    else:
        for line in info_lines(cache_info(store)):
            console.print(line, highlight=False)
    return 0


COMMANDS = {"bench": cmd_bench, "report": cmd_report, "explain": cmd_explain, "cache": cmd_cache}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``jointgraph`` command; returns (and, as a script, exits with) its status code."""
    from rich.console import Console

    from .bench.zoo import ModelSpecError
    from .logs import configure_from_env

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        configure_from_env()
        if args.command != "cache":
            args = _resolve(args)
        console = Console()
        if not console.is_terminal:
            console = Console(width=150)  # piped or captured: keep the table on one line per row
        _offload_note(args)
        return COMMANDS[args.command](args, console)
    except (UsageError, ModelSpecError) as exc:
        if args.debug:
            raise
        parser.exit(2, f"jointgraph {args.command}: error: {exc}\n")
    except KeyboardInterrupt:
        if args.debug:
            raise
        sys.stderr.write(f"jointgraph {args.command}: interrupted\n")
        return 130
    except Exception as exc:   # the model's failures (CommandFailure, UnsupportedError, its own errors): exit 1
        if args.debug:
            raise
        sys.stderr.write(f"jointgraph {args.command}: error: {_describe(exc)}\n"
                         "(run again with --debug for the traceback)\n")
        return 1


def _describe(exc: BaseException) -> str:
    from .errors import UnsupportedError

    if isinstance(exc, (CommandFailure, UnsupportedError)):
        return str(exc)
    return f"the model failed: {type(exc).__name__}: {exc}"


def _offload_note(args: argparse.Namespace) -> None:
    policy = getattr(args, "saved_tensors", None)   # absent for `jointgraph cache`
    if getattr(args, "device", None) == "cpu" and policy and "offload" in policy:
        _stderr_console().print(
            "[yellow]note:[/yellow] --saved-tensors offload on cpu: host memory is the same memory as the device's. "
            "The simulated peak counts offloaded values as gone from the device; the measured peak does not drop "
            "(and the budget planner never offloads on cpu).", highlight=False)


if __name__ == "__main__":
    sys.exit(main())
