"""OpInfo sweep: jointgraph.aot_function against eager and PyTorch's own aot_function.

For every OpInfo in ``op_db`` that supports autograd in float32 on CPU, the
first samples of ``op.sample_inputs`` run three ways on fresh copies of the same
inputs: eager (the oracle), ``jointgraph.aot_function`` (default options) and
``torch._functorch.aot_autograd.aot_function`` with no-op compilers. Outputs,
gradients of ``sum(output * fixed weights)`` with respect to every input that
requires grad, and the inputs after the call (mutations) are compared with
eager's. Each result is one of:

- ``pass``         matches eager;
- ``unsupported``  raised ``jointgraph.UnsupportedError`` (never wrong);
- ``wrong``        ran and returned a different value, gradient, mutation or
                   ``requires_grad`` flag (must be zero for jointgraph);
- ``error``        any other exception.

Random ops run with the same seed before every run; a sample whose eager result
is not reproducible under the same seed is skipped for both compilers. OpInfo
wraps random ops in ``wrapper_set_seed`` (``torch.manual_seed(42)`` inside the
op), and the sweep keeps it: the seed is inside the compiled function, which
jointgraph records as an effect run on every call (Note [Seeding inside the
function]). Each compiled function runs twice, so a seed that ran only at trace
time (PyTorch's aot_function) shows on the second call. ``--unseeded`` replaces
the wrapper with a plain call (the caller's seed only).

    python benchmarks/opinfo.py                       # full sweep
    python benchmarks/opinfo.py --ops sin,cumsum,nn.functional.conv2d
    python benchmarks/opinfo.py --limit 50 --json /tmp/opinfo.json
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import multiprocessing
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

import jointgraph

ATOL = RTOL = 1e-4
SEED = 1234
COMPILERS = ("jointgraph", "pytorch")


@dataclasses.dataclass
class Result:
    """The outcome of one (op, sample) under one compiler."""

    status: str            # pass | unsupported | wrong | error | skip
    cause: str = ""        # exception type and first line, or what differed


@dataclasses.dataclass
class PairRecord:
    op: str
    sample: int
    results: dict[str, Result]
    seconds: float


### Selecting ops and samples


def _call_unseeded(op, *args, **kwargs):
    return op(*args, **kwargs)


_SET_SEED: list = []   # OpInfo's own wrapper_set_seed, kept for --unseeded runs in the same process


def autograd_ops(names: set[str] | None = None, limit: int | None = None, *, seed_inside: bool = True) -> list:
    """OpInfos that support autograd in float32 on CPU, in op_db order."""
    from torch.testing._internal import common_methods_invocations
    from torch.testing._internal.common_methods_invocations import op_db

    if not _SET_SEED:
        _SET_SEED.append(common_methods_invocations.wrapper_set_seed)
    # see the module docstring
    common_methods_invocations.wrapper_set_seed = _SET_SEED[0] if seed_inside else _call_unseeded

    ops = [op for op in op_db if op.supports_autograd and torch.float32 in op.supported_dtypes("cpu")]
    if names:
        ops = [op for op in ops if op.name in names or op_label(op) in names]
    return ops[:limit] if limit else ops


def op_label(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def first_samples(op, count: int) -> list:
    samples = []
    torch.manual_seed(0)
    for sample in op.sample_inputs("cpu", torch.float32, requires_grad=True):
        samples.append(sample)
        if len(samples) == count:
            break
    return samples


### One sample as a function of its tensors


def sample_function(op, sample) -> tuple[Callable, list]:
    """``fn(*tensors)`` calling the op on the sample; non-tensor leaves are closed over."""
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    tensor_positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i] for i in tensor_positions]

    def fn(*args):
        filled = list(leaves)
        for i, t in zip(tensor_positions, args, strict=True):
            filled[i] = t
        inp, pos, kw = pytree.tree_unflatten(filled, spec)
        return op.op(inp, *pos, **kw)

    return fn, tensors


def fresh_copies(tensors: list) -> list:
    """Leaf copies with the same strides and requires_grad; repeated tensors stay repeated."""
    copies: dict[int, torch.Tensor] = {}
    out = []
    for t in tensors:
        if id(t) not in copies:
            if t.layout == torch.strided:
                c = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
                with torch.no_grad():
                    c.copy_(t)
            else:
                c = t.detach().clone()
            copies[id(t)] = c.requires_grad_(t.requires_grad)
        out.append(copies[id(t)])
    return out


def _grad_inputs(tensors: list) -> list:
    seen, out = set(), []
    for t in tensors:
        if t.requires_grad and id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


@dataclasses.dataclass
class RunOutput:
    outputs: list                 # flat outputs, detached
    requires_grad: list           # per flat output
    spec: Any
    grads: list                   # per grad input (zeros for unused)
    inputs_after: list            # the inputs after the call (mutations)


def run_once(fn: Callable, tensors: list, weights: dict[int, torch.Tensor] | None) -> tuple[RunOutput, dict]:
    """Call ``fn`` under a fixed seed, backpropagate ``sum(out * w)``; return detached results."""
    torch.manual_seed(SEED)
    result = fn(*tensors)
    flat, spec = pytree.tree_flatten(result)
    if weights is None:
        gen = torch.Generator().manual_seed(0)
        weights = {}
        for k, o in enumerate(flat):
            if isinstance(o, torch.Tensor) and o.requires_grad and (o.is_floating_point() or o.is_complex()):
                weights[k] = torch.randn(o.shape, dtype=o.dtype, generator=gen)
    wrt = _grad_inputs(tensors)
    loss_terms = [(flat[k] * w).real.sum() if flat[k].is_complex() else (flat[k] * w).sum()
                  for k, w in weights.items()
                  if k < len(flat) and isinstance(flat[k], torch.Tensor) and flat[k].requires_grad]
    grads: list = []
    if wrt and loss_terms:
        got = torch.autograd.grad(sum(loss_terms), wrt, allow_unused=True)
        grads = [torch.zeros_like(t) if g is None else g.detach() for g, t in zip(got, wrt, strict=True)]
    else:
        grads = [torch.zeros_like(t) for t in wrt]
    outputs = [o.detach() if isinstance(o, torch.Tensor) else o for o in flat]
    flags = [bool(o.requires_grad) if isinstance(o, torch.Tensor) else None for o in flat]
    inputs_after = [t.detach().clone() for t in tensors]
    return RunOutput(outputs, flags, spec, grads, inputs_after), weights


### Comparing with eager


def _compare_values(kind: str, expected: list, actual: list) -> str | None:
    if len(expected) != len(actual):
        return f"{kind}: {len(actual)} values, eager has {len(expected)}"
    for k, (e, a) in enumerate(zip(expected, actual, strict=True)):
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return f"{kind} {k}: {type(a).__name__}, eager has {type(e).__name__}"
        if isinstance(e, torch.Tensor):
            try:
                torch.testing.assert_close(a, e, atol=ATOL, rtol=RTOL, equal_nan=True, check_stride=False)
            except AssertionError as exc:
                first = str(exc).strip().splitlines()[0]
                return f"{kind} {k}: {first}"
        elif e != a and not (isinstance(e, float) and e != e and a != a):
            return f"{kind} {k}: {a!r}, eager has {e!r}"
    return None


def compare(expected: RunOutput, actual: RunOutput) -> str | None:
    """What differs between a compiled run and eager, or None."""
    if expected.spec.num_leaves != actual.spec.num_leaves:  # a list for a tuple is fine
        return f"{actual.spec.num_leaves} output leaves, eager has {expected.spec.num_leaves}"
    for kind, e, a in (("output", expected.outputs, actual.outputs), ("gradient", expected.grads, actual.grads),
                       ("input after call", expected.inputs_after, actual.inputs_after)):
        problem = _compare_values(kind, e, a)
        if problem:
            return problem
    if expected.requires_grad != actual.requires_grad:
        return f"requires_grad of outputs {actual.requires_grad}, eager has {expected.requires_grad}"
    return None


def _cause(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    return f"{type(exc).__name__}: {first[:160]}"


### Compilers under test


JOINTGRAPH_OPTIONS: dict[str, Any] = {}   # --partitioner; set in each worker by sweep_ops


def compile_jointgraph(fn: Callable) -> Callable:
    return jointgraph.aot_function(fn, **JOINTGRAPH_OPTIONS)


def compile_pytorch(fn: Callable) -> Callable:
    from torch._functorch.aot_autograd import aot_function
    from torch._functorch.compilers import nop

    return aot_function(fn, fw_compiler=nop, bw_compiler=nop)


COMPILE: dict[str, Callable[[Callable], Callable]] = {"jointgraph": compile_jointgraph, "pytorch": compile_pytorch}


def run_compiled(name: str, fn: Callable, tensors: list, expected: RunOutput, weights: dict) -> Result:
    """Compile ``fn``, call it twice (compile, then the cached entry); compare both with eager."""
    try:
        compiled = COMPILE[name](fn)
        for _ in range(2):
            actual, _ = run_once(compiled, fresh_copies(tensors), weights)
            problem = compare(expected, actual)
            if problem:
                return Result("wrong", problem)
    except jointgraph.UnsupportedError as exc:
        return Result("unsupported", _cause(exc))
    except Exception as exc:  # noqa: BLE001 - every failure is classified
        return Result("error", _cause(exc))
    return Result("pass")


def run_pair(op, sample, index: int, compilers: tuple[str, ...] = COMPILERS) -> PairRecord:
    start = time.perf_counter()
    fn, tensors = sample_function(op, sample)
    try:
        expected, weights = run_once(fn, fresh_copies(tensors), None)
        again, _ = run_once(fn, fresh_copies(tensors), weights)
    except Exception as exc:  # noqa: BLE001
        skip = Result("skip", f"eager raises {_cause(exc)}")
        return PairRecord(op_label(op), index, {c: skip for c in compilers}, time.perf_counter() - start)
    if compare(expected, again):
        skip = Result("skip", "eager result not reproducible under a fixed seed")
        return PairRecord(op_label(op), index, {c: skip for c in compilers}, time.perf_counter() - start)
    results = {c: run_compiled(c, fn, tensors, expected, weights) for c in compilers}
    return PairRecord(op_label(op), index, results, time.perf_counter() - start)


def sweep_ops(labels: list[str], samples_per_op: int, options: dict | None = None,
              seed_inside: bool = True) -> list[PairRecord]:
    """Run every sample of the named ops (a worker's share of the sweep)."""
    warnings.filterwarnings("ignore")
    JOINTGRAPH_OPTIONS.update(options or {})
    torch.set_num_threads(1)
    wanted = set(labels)
    records = []
    for op in autograd_ops(seed_inside=seed_inside):
        if op_label(op) not in wanted:
            continue
        try:
            samples = first_samples(op, samples_per_op)
        except Exception as exc:  # noqa: BLE001
            records.append(PairRecord(op_label(op), 0, {c: Result("skip", f"sample_inputs raises {_cause(exc)}")
                                                         for c in COMPILERS}, 0.0))
            continue
        for i, sample in enumerate(samples):
            records.append(run_pair(op, sample, i))
    return records


### Report


def summarize(records: list[PairRecord]) -> dict:
    counted = [r for r in records if r.results["jointgraph"].status != "skip"]
    summary: dict = {"pairs": len(counted), "ops": len({r.op for r in counted}),
                     "skipped": [(r.op, r.sample, r.results["jointgraph"].cause) for r in records
                                 if r.results["jointgraph"].status == "skip"]}
    for name in COMPILERS:
        statuses = collections.Counter(r.results[name].status for r in counted)
        groups = collections.Counter((r.results[name].status, r.results[name].cause) for r in counted
                                     if r.results[name].status != "pass")
        summary[name] = {"counts": dict(statuses), "groups": groups}
    summary["pytorch_only"] = [(r.op, r.sample, r.results["jointgraph"].status, r.results["jointgraph"].cause)
                               for r in counted if r.results["pytorch"].status == "pass"
                               and r.results["jointgraph"].status != "pass"]
    summary["jointgraph_only"] = [(r.op, r.sample, r.results["pytorch"].status, r.results["pytorch"].cause)
                                  for r in counted if r.results["jointgraph"].status == "pass"
                                  and r.results["pytorch"].status != "pass"]
    return summary


def bar_met(summary: dict) -> bool:
    """The bar: no wrong value from jointgraph, and every pair PyTorch passes jointgraph passes."""
    return not summary["jointgraph"]["counts"].get("wrong", 0) and not summary["pytorch_only"]


def _print_pairs_by_cause(pairs: list) -> None:
    by_cause: dict = collections.defaultdict(lambda: collections.defaultdict(list))
    for op, sample, status, cause in pairs:
        by_cause[(status, cause)][op].append(sample)
    for (status, cause), ops in sorted(by_cause.items(), key=lambda item: -sum(map(len, item[1].values()))):
        shown = ", ".join(f"{op}{samples}" if len(samples) <= 6 else f"{op} x{len(samples)}"
                          for op, samples in ops.items())
        print(f"  {sum(map(len, ops.values())):4}  [{status}] {cause}\n        {shown}")


def print_report(summary: dict, records: list[PairRecord], seconds: float) -> None:
    n = summary["pairs"]
    print(f"\n{n} (op, sample) pairs over {summary['ops']} OpInfos, {seconds:.0f} s\n")
    print(f"{'':14}{'jointgraph':>12}{'pytorch':>12}")
    for status in ("pass", "unsupported", "wrong", "error"):
        row = [summary[c]["counts"].get(status, 0) for c in COMPILERS]
        print(f"{status:14}" + "".join(f"{v:>12}" for v in row))
    rates = [100.0 * summary[c]["counts"].get("pass", 0) / max(n, 1) for c in COMPILERS]
    print(f"{'pass rate':14}" + "".join(f"{r:>11.1f}%" for r in rates))
    for name in COMPILERS:
        print(f"\n{name}: failures by cause")
        for (status, cause), count in summary[name]["groups"].most_common():
            ops = sorted({r.op for r in records if r.results[name].status == status
                          and r.results[name].cause == cause})
            shown = ", ".join(ops[:8]) + (", ..." if len(ops) > 8 else "")
            print(f"  {count:4}  [{status}] {cause}\n        {shown}")
    print(f"\npytorch passes, jointgraph does not ({len(summary['pytorch_only'])}, must be 0):")
    _print_pairs_by_cause(summary["pytorch_only"])
    print(f"\njointgraph passes, pytorch does not ({len(summary['jointgraph_only'])}), pytorch's result:")
    _print_pairs_by_cause(summary["jointgraph_only"])
    if summary["skipped"]:
        print(f"\nskipped for both ({len(summary['skipped'])}):")
        for op, sample, cause in summary["skipped"]:
            print(f"  {op}[{sample}]  {cause}")
    slow = sorted(records, key=lambda r: -r.seconds)[:5]
    print("\nslowest pairs: " + ", ".join(f"{r.op}[{r.sample}] {r.seconds:.1f}s" for r in slow))
    wrong = summary["jointgraph"]["counts"].get("wrong", 0)
    print(f"\nbar (jointgraph wrong: {wrong}; pytorch passes, jointgraph does not: "
          f"{len(summary['pytorch_only'])}): {'met' if bar_met(summary) else 'NOT met'}")


def load_records(paths: list[str]) -> tuple[list[PairRecord], float]:
    """The records of earlier ``--json`` files (a sweep run in chunks), and their seconds in all."""
    records, seconds = [], 0.0
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        seconds += data["seconds"]
        records += [PairRecord(r["op"], r["sample"], {c: Result(**res) for c, res in r["results"].items()},
                               r["seconds"]) for r in data["records"]]
    return records, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="first N OpInfos only")
    parser.add_argument("--ops", default="", help="comma-separated op names (name or name.variant)")
    parser.add_argument("--samples", type=int, default=2, help="samples per op")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--json", default=None, help="write every result to this path")
    parser.add_argument("--partitioner", default=None, help="jointgraph partitioner (default: its default)")
    parser.add_argument("--unseeded", action="store_true",
                        help="replace OpInfo's in-op torch.manual_seed with a plain call")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="run nothing: report on the --json files of earlier runs (a sweep run in chunks)")
    args = parser.parse_args(argv)
    if args.merge:
        records, seconds = load_records(args.merge)
        return _report(records, seconds, args.json)
    options = {"partitioner": args.partitioner} if args.partitioner else {}

    start = time.perf_counter()
    names = {s.strip() for s in args.ops.split(",") if s.strip()} or None
    seed_inside = not args.unseeded
    labels = [op_label(op) for op in autograd_ops(names, args.limit, seed_inside=seed_inside)]
    if args.jobs > 1 and len(labels) > 1:
        shares = [labels[k::args.jobs] for k in range(args.jobs)]
        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            parts = pool.starmap(sweep_ops, [(share, args.samples, options, seed_inside) for share in shares])
        order = {label: k for k, label in enumerate(labels)}
        records = sorted((r for part in parts for r in part), key=lambda r: (order[r.op], r.sample))
    else:
        records = sweep_ops(labels, args.samples, options, seed_inside)
    return _report(records, time.perf_counter() - start, args.json)


def _report(records: list[PairRecord], seconds: float, json_path: str | None) -> int:
    summary = summarize(records)
    print_report(summary, records, seconds)
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"records": [dataclasses.asdict(r) for r in records],
                       "counts": {c: summary[c]["counts"] for c in COMPILERS},
                       "pytorch_only": summary["pytorch_only"], "jointgraph_only": summary["jointgraph_only"],
                       "bar_met": bar_met(summary), "seconds": seconds}, f, indent=1)
    return 0 if bar_met(summary) else 1


if __name__ == "__main__":
    sys.exit(main())
