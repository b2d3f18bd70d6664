"""Training on torch.distributed: DDP and FSDP2 with jointgraph, each rank checked against eager.

Note [Distributed runs]
-----------------------
``spawn`` starts ``nproc`` processes (the ``spawn`` start method), joins them into one
process group through a file store in a temporary directory (gloo on CPU, bound to the
loopback interface) and runs a picklable function on every
rank; it returns each rank's result, or raises with the failing rank's traceback, and kills
the ranks still running once ``timeout`` seconds have passed (a rank stuck in a collective
whose peer died never returns on its own).

``run_scenarios`` trains each named scenario for ``steps`` optimizer steps twice on every
rank: with the eager wrapper (DDP or FSDP2 without compile) and with the compiled one,
from the same initial weights and the same per-rank batches; the losses of every step and
the final parameters (the full tensors, for FSDP2) must be equal. It then measures one more
step of each with the CPU profiler's allocation events (peak bytes above what was live when
the step began: activations, gradients, FSDP's all-gathered parameters) and returns the
figures per rank. A scenario that fails reports its error instead of stopping the others.

Note [FSDP2 under Dynamo]
-------------------------
torch 2.13 wraps FSDP2's hooks in ``torch._dynamo.disable`` unconditionally
(``torch.distributed.fsdp._fully_shard._fsdp_common._dynamo_disable``) and no longer has
``torch._dynamo.config.skip_fsdp_hooks``: traceable FSDP2 is gone. A whole-model
``torch.compile`` graph-breaks at each FSDP module's hooks, which run eagerly (all-gather,
storage resize, copy into the unsharded parameters, reduce-scatter); jointgraph compiles the
computation between them. FSDP2's storage patterns therefore never reach a backend from a real
``fully_shard`` model; tests run them on a real module's unsharded parameters through
``aot_function`` / ``torch.compile`` of the pattern itself (tests/test_distributed.py).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import traceback
from collections.abc import Callable

import torch
import torch.nn as nn

from .curve import running_bytes

STEPS = 3


@dataclasses.dataclass
class ScenarioResult:
    """One scenario on one rank: its losses, the peak bytes per contender, the graphs jointgraph compiled."""

    name: str
    ok: bool
    error: str | None = None
    losses: list[float] = dataclasses.field(default_factory=list)
    peak_bytes: dict[str, int] = dataclasses.field(default_factory=dict)
    graphs: int = 0


def spawn(fn: Callable, args: tuple = (), *, nproc: int = 2, timeout: float = 300.0) -> list:
    """Run ``fn(rank, world_size, *args)`` on ``nproc`` ranks of one process group (Note [Distributed runs])."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory(prefix="jointgraph-dist-") as tmp:
        init = f"file://{os.path.join(tmp, 'store')}"
        procs = [ctx.Process(target=_rank_main, args=(rank, nproc, init, fn, args, queue), daemon=True)
                 for rank in range(nproc)]
        for p in procs:
            p.start()
        results, deadline = {}, time.monotonic() + timeout
        try:
            while len(results) < nproc:
                if not queue.empty():
                    rank, ok, value = queue.get()
                    if not ok:
                        raise RuntimeError(f"rank {rank} failed:\n{value}")
                    results[rank] = value
                elif time.monotonic() > deadline:
                    raise TimeoutError(f"ranks {sorted(set(range(nproc)) - set(results))} did not finish "
                                       f"within {timeout:.0f}s")
                elif any(p.exitcode not in (None, 0) for p in procs) and queue.empty():
                    codes = {r: p.exitcode for r, p in enumerate(procs)}
                    raise RuntimeError(f"a rank exited without a result (exit codes {codes})")
                else:
                    time.sleep(0.05)
        finally:
            for p in procs:
                p.join(timeout=10 if len(results) == nproc else 0.5)
                if p.is_alive():
                    p.kill()
                    p.join()
    return [results[r] for r in range(nproc)]


def _rank_main(rank: int, world: int, init: str, fn: Callable, args: tuple, queue) -> None:
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    try:   # the scenarios build their models on the CPU: gloo (NCCL on GPUs is not wired yet)
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
        result = fn(rank, world, *args)
        queue.put((rank, True, result))
    except BaseException:  # noqa: BLE001  the parent reports it with the rank
        queue.put((rank, False, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# --- scenarios -------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Scenario:
    """``wrapper``: "ddp" | "fsdp"; ``compile``: how jointgraph (or ``backend``) is applied."""

    name: str
    model: str = "gpt"
    wrapper: str = "fsdp"
    compile: str = "per_block"        # per_block | whole | inner (DDP(compile(m))) | outer (compile(DDP(m)))
    checkpoint: bool = False
    options: tuple = ()               # jointgraph.backend(**dict(options))
    backend: str = "jointgraph"       # or "aot_eager" (a contender for the memory table)


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario("ddp_outer", wrapper="ddp", compile="outer"),
    Scenario("ddp_inner", wrapper="ddp", compile="inner"),
    Scenario("fsdp_per_block_mincut", compile="per_block"),
    Scenario("fsdp_per_block_ac_budget", compile="per_block", checkpoint=True,
             options=(("partitioner", "budget"), ("memory_budget", 0.7))),
    Scenario("fsdp_per_block_ac_mincut", compile="per_block", checkpoint=True),
    Scenario("fsdp_per_block_budget", compile="per_block", options=(("partitioner", "budget"), ("memory_budget", 0.7))),
    Scenario("fsdp_whole", compile="whole"),
    Scenario("ddp_outer_llama", model="llama", wrapper="ddp", compile="outer"),
    Scenario("ddp_inner_llama", model="llama", wrapper="ddp", compile="inner"),
]}


class Checkpointed(nn.Module):
    """A block whose forward is recomputed in the backward (``torch.utils.checkpoint``, non-reentrant)."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        return torch.utils.checkpoint.checkpoint(self.inner, *args, use_reentrant=False, **kwargs)


def _build(scenario: Scenario, rank: int, *, width: int, seq: int, layers: int):
    from .zoo import ZooShape, build_workload

    work = build_workload(scenario.model, ZooShape(layers=layers, width=width, batch=2, seq=seq), seed=0)
    generator = torch.Generator().manual_seed(1000 + rank)   # each rank its own batch
    ids = torch.randint(0, 512, work.inputs[0].shape, generator=generator)
    inputs = (ids, ids.roll(-1, dims=1))
    return work.step, inputs


def _blocks(step: nn.Module) -> nn.ModuleList:
    model = step.model
    return model.blocks if hasattr(model, "blocks") else model.model.layers


def _wrap(step: nn.Module, scenario: Scenario, backend: Callable | None) -> Callable:
    """Apply DDP / FSDP2 and (when ``backend``) compile as the scenario says; return the step to call."""
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    blocks = _blocks(step)
    if scenario.checkpoint:
        for i in range(len(blocks)):
            blocks[i] = Checkpointed(blocks[i])
    if scenario.wrapper == "ddp":
        if backend is None:
            return DDP(step)
        if scenario.compile == "inner":
            return DDP(torch.compile(step, backend=backend))
        return torch.compile(DDP(step, bucket_cap_mb=1), backend=backend)   # DDPOptimizer splits at buckets
    for block in blocks:
        fully_shard(block)
    fully_shard(step)
    if backend is None:
        return step
    if scenario.compile == "per_block":
        for block in blocks:
            block.compile(backend=backend)
        return step
    return torch.compile(step, backend=backend)   # FSDP2's hooks are graph breaks (Note [FSDP2 under Dynamo])


def _counting(backend: Callable, counter: list) -> Callable:
    def counted(gm, example_inputs):
        counter.append(len(gm.graph.nodes))
        return backend(gm, example_inputs)

    return counted


def _full(p: torch.Tensor) -> torch.Tensor:
    return p.full_tensor() if hasattr(p, "full_tensor") else p


def train(run: Callable, params: list, inputs: tuple, steps: int = STEPS) -> list[torch.Tensor]:
    optimizer = torch.optim.SGD(params, lr=0.05)
    losses = []
    for _ in range(steps):
        loss = run(*inputs)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.detach())
    return losses


def step_peak_bytes(run: Callable, inputs: tuple) -> int:
    """Peak bytes allocated above the start of one step (forward + backward), from the profiler's events.
    Garbage is collected first: a reference cycle of the previous step (FSDP2's all-gather state) would
    otherwise be freed at a moment the collector chooses, inside the measured step or not."""
    import gc

    from torch.profiler import ProfilerActivity, profile

    gc.collect()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run(*inputs).backward()
    return max([0, *(running for _, running in running_bytes(prof.profiler.kineto_results.events()))])


def run_scenarios(rank: int, world: int, names: list[str], width: int = 64, seq: int = 16, layers: int = 2,
                  measure: tuple[str, ...] = (), model: str | None = None) -> list[ScenarioResult]:
    """Every scenario in ``names`` on this rank (Note [Distributed runs]); ``measure`` names the contenders
    ("eager", "jointgraph", "aot_eager") whose peak bytes of one step are measured after the check;
    ``model`` (a zoo language model) replaces the scenarios' own."""
    import torch._dynamo

    results = []
    for name in names:
        scenario = SCENARIOS[name] if model is None else dataclasses.replace(SCENARIOS[name], model=model)
        torch._dynamo.reset()
        try:
            results.append(_run_one(scenario, rank, width=width, seq=seq, layers=layers, measure=measure))
        except Exception:  # noqa: BLE001  reported per scenario
            results.append(ScenarioResult(name, ok=False, error=traceback.format_exc()))
    return results


def _backend(scenario: Scenario, name: str) -> Callable:
    from torch._dynamo.backends.registry import lookup_backend

    import jointgraph

    return jointgraph.backend(**dict(scenario.options)) if name == "jointgraph" else lookup_backend(name)


def _run_one(scenario: Scenario, rank: int, *, width: int, seq: int, layers: int,
             measure: tuple[str, ...]) -> ScenarioResult:
    graphs: list = []
    shape = {"width": width, "seq": seq, "layers": layers}
    step, inputs = _build(scenario, rank, **shape)
    reference, _ = _build(scenario, rank, **shape)
    run_ref = _wrap(reference, scenario, None)
    run = _wrap(step, scenario, _counting(_backend(scenario, scenario.backend), graphs))
    expected = train(run_ref, list(reference.parameters()), inputs)
    got = train(run, list(step.parameters()), inputs)
    if not graphs:
        raise AssertionError(f"{scenario.name}: no graph reached the backend")
    torch.testing.assert_close(torch.stack(got), torch.stack(expected), rtol=1e-4, atol=1e-5)
    for (name, p), e in zip(step.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(_full(p), _full(e), rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    peaks = {}
    for contender in measure:
        if contender == "eager":
            peaks[contender] = step_peak_bytes(run_ref, inputs)
        elif contender == scenario.backend:
            peaks[contender] = step_peak_bytes(run, inputs)
        else:
            other, _ = _build(scenario, rank, **shape)
            run_other = _wrap(other, scenario, _backend(scenario, contender))
            run_other(*inputs).backward()   # compiles
            peaks[contender] = step_peak_bytes(run_other, inputs)
    return ScenarioResult(scenario.name, ok=True, losses=[float(x) for x in got], peak_bytes=peaks,
                          graphs=len(graphs))


def peak_table(names: list[str], ranks: list[list[ScenarioResult]], contenders: tuple[str, ...], title: str):
    """A rich Table: per scenario and rank, the peak bytes of each contender and jointgraph's ratios."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("scenario", no_wrap=True)
    table.add_column("rank", justify="right")
    for c in contenders:
        table.add_column(f"{c} peak", justify="right")
    others = [c for c in contenders if c != "jointgraph"]
    for c in others:
        table.add_column(f"jointgraph / {c}", justify="right")
    for i, name in enumerate(names):
        for rank, results in enumerate(ranks):
            r = results[i]
            if not r.ok:
                table.add_row(name, str(rank), f"[red]failed: {r.error.strip().splitlines()[-1]}[/red]")
                continue
            cells = [f"{r.peak_bytes[c] / 2**20:.2f} MiB" for c in contenders]
            cells += [f"{r.peak_bytes['jointgraph'] / max(r.peak_bytes[c], 1):.2f}" for c in others]
            table.add_row(name, str(rank), *cells)
    return table
