"""Cold versus warm compile in two fresh processes, through the on-disk cache (jointgraph/cache).

For each model and partitioner, a first process compiles into an empty cache directory (cold)
and a second one, started afresh, compiles the same step from it (warm). Each process times
its first call's compile without the graph compiler's part (``plan.timings["compile"]``, the
same in both): the *planning part*, that is tracing, passes, planning, splitting and
simulation when cold, and fingerprinting plus loading when warm (cache overhead counted on
both sides: the cold run pays the fingerprint and the store). Both processes import
torch._dynamo before timing (FakeTensorMode imports it, at about 3 s on this CPU). The warm
run's loss and gradients must equal the cold run's bit for bit.

    python benchmarks/cache.py                      # GPT 6 and 48 layers, Llama, BERT; mincut and budget
    python benchmarks/cache.py --models gpt:6 --partitioners mincut
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ("gpt:6", "gpt:48", "llama:4", "bert:4")
BUDGET = 0.6


def child(model: str, layers: int, partitioner: str, cache_dir: str, out: str) -> None:
    """One fresh process: compile the zoo step, run forward and backward, save loss, grads and timings."""
    import torch
    import torch._dynamo  # noqa: F401 - imported by FakeTensorMode on first use; excluded from both timings

    import jointgraph
    import jointgraph.compiled as compiled
    from jointgraph.bench import ZooShape, build_workload

    work = build_workload(model, ZooShape(layers=layers, width=128, batch=2, seq=128), seed=0)
    options = {"partitioner": partitioner, "cache": cache_dir}
    if partitioner == "budget":
        options["memory_budget"] = BUDGET
    step = jointgraph.aot_module(work.step, **options)
    build = compiled.CompiledFunction._build
    seconds: list[float] = []

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return build(self, *args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - start)

    compiled.CompiledFunction._build = timed
    loss = step(*work.inputs)
    loss.backward()
    plan = step._compiled.entries[0].plan
    grads = [p.grad for p in work.step.parameters()]
    torch.save({"loss": loss.detach(), "grads": grads}, out + ".pt")
    Path(out + ".json").write_text(json.dumps({
        "build_seconds": seconds[0], "compile_seconds": plan.timings.get("compile", 0.0),
        "timings": plan.timings, "planning_seconds": seconds[0] - plan.timings.get("compile", 0.0)}))


def run_pair(model: str, layers: int, partitioner: str) -> dict:
    import torch

    with tempfile.TemporaryDirectory(prefix="jointgraph-cache-bench-") as tmp:
        cache_dir = os.path.join(tmp, "cache")
        results = {}
        for phase in ("cold", "warm"):
            out = os.path.join(tmp, phase)
            env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            proc = subprocess.run([sys.executable, __file__, "--child", model, str(layers), partitioner, cache_dir,
                                   out], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"{phase} process failed for {model}:{layers} {partitioner}:\n{proc.stderr[-3000:]}")
            results[phase] = json.loads(Path(out + ".json").read_text())
            results[phase]["tensors"] = torch.load(out + ".pt")
        cold, warm = results["cold"]["tensors"], results["warm"]["tensors"]
        same = torch.equal(cold["loss"], warm["loss"]) and all(
            (a is None and b is None) or (a is not None and b is not None and torch.equal(a, b))
            for a, b in zip(cold["grads"], warm["grads"], strict=True))
        warm_timings = results["warm"]["timings"]
        if "cache_load" not in warm_timings:
            raise RuntimeError(f"the warm process did not hit the cache: {warm_timings}")
        return {"model": f"{model}:{layers}", "partitioner": partitioner,
                "cold_s": results["cold"]["planning_seconds"], "warm_s": results["warm"]["planning_seconds"],
                "cold_total_s": results["cold"]["build_seconds"], "warm_total_s": results["warm"]["build_seconds"],
                "cold_trace_s": results["cold"]["timings"].get("trace", 0.0),
                "cold_partition_s": results["cold"]["timings"].get("partition", 0.0),
                "warm_load_s": warm_timings["cache_load"], "bit_for_bit": same}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS), help="zoo name:layers")
    parser.add_argument("--partitioners", nargs="+", default=["mincut", "budget"], choices=["mincut", "budget"])
    parser.add_argument("--json", metavar="PATH", help="write the rows as JSON")
    args = parser.parse_args(argv)
    rows = []
    print(f"{'model':<10} {'partitioner':<11} {'cold s':>8} {'warm s':>8} {'speedup':>8}  bit-for-bit  "
          f"{'total cold s':>12} {'total warm s':>12} {'total':>7}"
          "   (planning part: first call's compile less the graph compiler; total: with it)")
    for spec in args.models:
        model, _, layers = spec.partition(":")
        for partitioner in args.partitioners:
            row = run_pair(model, int(layers or 2), partitioner)
            row["speedup"] = row["cold_s"] / row["warm_s"]
            rows.append(row)
            print(f"{row['model']:<10} {partitioner:<11} {row['cold_s']:>8.3f} {row['warm_s']:>8.3f} "
                  f"{row['speedup']:>7.1f}x  {'equal' if row['bit_for_bit'] else 'DIFFERENT':<11}  "
                  f"{row['cold_total_s']:>12.3f} {row['warm_total_s']:>12.3f} "
                  f"{row['cold_total_s'] / row['warm_total_s']:>6.1f}x", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    worst = min(r["speedup"] for r in rows)
    print(f"lowest speedup {worst:.1f}x (target >= 10x); outputs and gradients "
          f"{'all equal bit for bit' if all(r['bit_for_bit'] for r in rows) else 'DIFFER'}")
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        main()
