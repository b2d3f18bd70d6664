"""Random programs that mutate and alias their inputs, compiled and checked against eager PyTorch.

Each program (``jointgraph.bench.fuzz.generate(seed)``) is checked under every contender:
``jointgraph.aot_function`` with ``partitioner="default"``, ``"mincut"`` and ``"budget"``
(``memory_budget=0.5``), and ``torch.compile(fn, backend="jointgraph")`` (``--dynamo-every K`` checks
it on every K-th program only). Each compiled function is called twice on fresh inputs. What is compared
is Note [Fuzz oracle] in ``jointgraph/bench/fuzz.py``. Prints ``P pass, R refused, W wrong, C crash`` per
contender, every refusal / wrong / crash grouped by message with counts, and the first K failing
programs in full (``--show K``), shortened by removing statements that do not matter (``--minimize``).

    python benchmarks/fuzz.py --n 1000 --seed 0
    python benchmarks/fuzz.py --n 200 --seed 5 --contenders default,dynamo --show 3 --minimize
    python benchmarks/fuzz.py --n 1 --seed 1234 --show 1        # one program, to reproduce a failure
    python benchmarks/fuzz.py --n 300 --contenders default,dynamo --semantics12 --show 8 --minimize
    python benchmarks/fuzz.py --subclass --n 200 --contenders default,mincut,dynamo   # TwoTensor arguments
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import warnings

import torch

from jointgraph.bench import fuzz

STATUS_TITLES = {"refused": "Refusals", "wrong": "Wrong results", "crash": "Crashes"}


def group_rows(summary: fuzz.Summary, status: str, names: list[str]) -> list[list[str]]:
    """One row per distinct message: the message, then its count under each contender."""
    counts: dict[str, dict[str, int]] = {}
    for group in summary.sorted_groups(status):
        counts.setdefault(group.key, {})[group.contender] = group.count
    rows = sorted(counts.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    return [[key, *(str(per.get(name, 0)) for name in names)] for key, per in rows]


def print_table(title: str, head: list[str], rows: list[list[str]], rich: bool) -> None:
    """A rich table on a terminal, plain aligned text otherwise."""
    if rich:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title, show_lines=False)
        for i, column in enumerate(head):
            table.add_column(column, justify="left" if i == 0 else "right", overflow="fold")
        for row in rows:
            table.add_row(*row)
        Console().print(table)
        return
    print(f"\n{title}")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(1, len(head))]
    for row in [head, *rows]:
        counts = "  ".join(cell.rjust(width) for cell, width in zip(row[1:], widths, strict=True))
        print(f"  {counts}  {row[0]}")


def print_failures(failures: list[fuzz.Failure], show: int, minimize: bool,
                   contenders: dict[str, fuzz.Contender]) -> None:
    """The first ``show`` failing programs in full, each with what every contender got wrong."""
    by_program: dict[int, list[fuzz.Failure]] = {}
    for failure in failures:
        if failure.program.seed in by_program or len(by_program) < show:
            by_program.setdefault(failure.program.seed, []).append(failure)
    for seed, found in by_program.items():
        program = found[0].program
        if minimize:
            program = fuzz.minimize(program, contenders[found[0].contender], found[0].outcome)
        print(f"\n--- program {seed}" + (" (minimized for the first contender)" if minimize else ""))
        for failure in found:
            outcome = fuzz.check(program, contenders[failure.contender]) if minimize else failure.outcome
            print(f"  {failure.contender}: {outcome.status}: {outcome.message}")
        print(program.inputs)
        print(program.source)
        if program.mutate_outputs:
            print("# then: every float output o.mul_(2), before backward")
        if program.assign_data:
            print("# then: every float output sharing no input's memory: o.data = its values doubled (fuzz._doubled)")
        if program.guard is not None:
            print(f"# then: a third call under the guard change {program.guard!r} (Note [Fuzz guards])")


def report(summary: fuzz.Summary, names: list[str], show: int, minimize: bool,
           contenders: dict[str, fuzz.Contender]) -> None:
    rich = sys.stdout.isatty()
    print(f"{summary.n} programs from seed {summary.seed} in {summary.seconds:.0f} s "
          f"({summary.eager_raised} raise in eager, which the contenders must match)")
    for name in names:
        every = contenders[name].every
        sampled = f" (every {every}th program)" if every > 1 else ""
        print(f"  {name:8} {summary.line(name)}{sampled}")
    for status, title in STATUS_TITLES.items():
        rows = group_rows(summary, status, names)
        if rows:
            print_table(f"{title}, by message", ["message", *names], rows, rich)
    print_failures(summary.failures, show, minimize, contenders)


def as_json(summary: fuzz.Summary) -> dict:
    return {
        "n": summary.n, "seed": summary.seed, "seconds": summary.seconds, "counts": summary.counts,
        "eager_raised": summary.eager_raised,
        "groups": [{"contender": g.contender, "status": g.status, "key": g.key, "count": g.count,
                    "programs": [f.program.seed for f in g.examples]} for g in summary.groups.values()],
    }


def run_subclass(n: int, seed: int, chosen: list, show: int) -> dict:
    """The TwoTensor programs (Note [Tensor subclasses]): counts per contender, then each failure."""
    from jointgraph.bench import fuzz_subclass
    from jointgraph.planner.budget import BudgetBelowFloor

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetBelowFloor)
        summary = fuzz_subclass.run(n, seed, chosen)
    for name, counts in summary.counts.items():
        print(f"{name:8} " + ", ".join(f"{counts[s]} {s}" for s in fuzz.STATUSES))
    for name, program_seed, status, message in summary.failures:
        print(f"{name} seed {program_seed}: {status}: {message}")
    for _, program_seed, _, _ in summary.failures[:show]:
        print(f"--- seed {program_seed}\n{fuzz_subclass.generate(program_seed).render()}")
    return {"counts": summary.counts, "failures": summary.failures}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="number of programs")
    parser.add_argument("--seed", type=int, default=0, help="programs seed .. seed + n - 1")
    parser.add_argument("--contenders", default="default,mincut,budget,dynamo",
                        help="comma-separated, from default, mincut, budget, dynamo, dynamic (aot_function with "
                        "dynamic=True; opt-in)")
    parser.add_argument("--dynamo-every", type=int, default=1, help="check dynamo on every K-th program only")
    parser.add_argument("--show", type=int, default=5, help="print the first K failing programs in full")
    parser.add_argument("--minimize", action="store_true", help="shorten the failing programs shown")
    parser.add_argument("--json", metavar="PATH", help="also write counts and groups as JSON")
    parser.add_argument("--storage", action="store_true",
                        help="also write FSDP2's storage free / re-fill (resize_storage_bytes_, fsdp.copy_)")
    parser.add_argument("--semantics12", action="store_true",
                        help="issue 12's writers and oracle steps: requires_grad_ / detach, leaves made inside, "
                        "non-tensor outputs, autocast, globals, programs that raise, outputs modified in place, "
                        "and a guard change (SCALE, autocast, default dtype, no_grad) before a third call")
    parser.add_argument("--checkpoint", action="store_true",
                        help="also write torch.utils.checkpoint regions (mostly non-reentrant), recomputed in the "
                        "backward after the program may have written what they read")
    parser.add_argument("--no-grad-views", action="store_true",
                        help="also make some view arguments under torch.no_grad() (eager refuses writing them with "
                        "grad mode on, and reading them so after a write into their base)")
    parser.add_argument("--subclass", action="store_true",
                        help="programs over TwoTensor arguments instead (jointgraph/bench/fuzz_subclass.py)")
    args = parser.parse_args(argv)
    known = fuzz.contenders(dynamo_every=args.dynamo_every, opt_in=True)
    names = [n for n in args.contenders.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown contender(s) {', '.join(unknown)}; allowed: {', '.join(known)}")
    if args.subclass:
        return run_subclass(args.n, args.seed, [known[n] for n in names], args.show)
    writers = None
    if args.storage:
        import torch.distributed.fsdp  # noqa: F401  registers torch.ops.fsdp.copy_

        writers = fuzz.STORAGE_WRITERS
    if args.semantics12:
        from jointgraph.bench import fuzz_semantics

        writers = fuzz.Writers({**(writers or {}), **fuzz_semantics.SEMANTICS12_WRITERS},
                               fuzz_semantics.SEMANTICS12_WRITERS.steps)
    if args.checkpoint:
        from jointgraph.bench import fuzz_semantics

        writers = writers or fuzz.WRITERS
        writers = fuzz.Writers({**writers, **fuzz_semantics.CHECKPOINT_WRITERS}, getattr(writers, "steps", ()))
    if args.no_grad_views:   # opt-in, as --checkpoint: a new draw would change the programs the seeds above give
        writers = writers or fuzz.WRITERS
        writers = fuzz.Writers(writers, (*getattr(writers, "steps", ()), "no_grad_views"))
    summary = fuzz.run(args.n, args.seed, [known[n] for n in names], progress=True, writers=writers)
    report(summary, names, args.show, args.minimize, known)
    result = as_json(summary)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    torch._logging.set_logs(all=logging.CRITICAL)    # Dynamo logs every kernel that fails on fake tensors
    main()
