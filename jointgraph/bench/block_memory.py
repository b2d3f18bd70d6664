"""One FSDP2 block compiled with jointgraph: its plan's simulated peak against the peak measured per rank.

Note [Simulated and measured per rank]
--------------------------------------
``block_memory`` runs on every rank of a process group (``spawn``, Note [Distributed runs]): a GPT
block under ``fully_shard`` (it reshards after the forward) inside a root that holds no parameters
and turns the block's output into a loss, the block compiled with ``jointgraph.backend(**options)``.
After a warm-up step it measures one step's peak bytes above what was live when the step began
(``step_peak_bytes``: the CPU profiler's allocation events; FSDP's all-gathered parameters,
activations, gradients, FSDP's reduce-scatter buffers) and reads the block's plan: its simulated
peak less ``entry_bytes`` (what the plan counts live before the step: the block's input, its
buffers) is the same quantity. The plan counts the unsharded parameters as gathered at the
forward's entry, freed after it and gathered again for the backward (Note [Inputs the caller
reshards]); counted as held all step, as before, they would fall in ``entry_bytes`` and the
simulated figure would miss them. FSDP's flat all-gather output, live next to the copied-out
parameters through the forward, is counted too (``gather_bytes``, the ``communication`` kind).
What the measured figure holds and the plan still does not model lies outside the block's
graphs: the root's loss (its square, mean and their gradients) and the reduce-scatter's input
(the block's gradients copied flat). In the README's run the two figures agree (simulated /
measured 1.00); tests/test_fsdp_memory.py allows a tolerance of 10% for what is not modelled.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn


@dataclasses.dataclass
class BlockMemory:
    """One rank's figures: measured and simulated bytes, and the plan's timeline (phase, node, live bytes)."""

    rank: int
    measured_bytes: int          # one step's peak above its start, measured (the lower of two steps)
    peak_bytes: int              # the plan's simulated peak (entry included)
    entry_bytes: int             # what the plan counts live before the step
    resharded_bytes: int         # the unsharded parameters FSDP frees after the forward
    gather_bytes: int            # FSDP's flat all-gather output
    held_bytes: int              # the simulated peak above entry with the parameters held all step
    budget_bytes: int | None     # with partitioner="budget": the budget in bytes
    timeline: list = dataclasses.field(default_factory=list)
    timeline_by_kind: list = dataclasses.field(default_factory=list)
    loss_error: float = 0.0      # |compiled loss - eager loss| of the measured step

    @property
    def simulated_bytes(self) -> int:
        """The simulated peak above the step's start: comparable with ``measured_bytes``."""
        return self.peak_bytes - self.entry_bytes


class BlockStep(nn.Module):
    """A root without parameters: the block's output as a loss."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x).square().mean()


def block_memory(rank: int, world: int, options: dict, width: int = 128, seq: int = 64, batch: int = 2,
                 report: str | None = None) -> BlockMemory:
    """Note [Simulated and measured per rank] on this rank, the block compiled with ``options``;
    ``report``: a path (``{rank}`` in it is the rank) for the block plan's HTML report."""
    from torch.distributed.fsdp import fully_shard

    import jointgraph

    from ..planner.simulate import simulate
    from ..planning import cost_compilers
    from .distributed import step_peak_bytes
    from .gpt import Block, GPTConfig

    torch._dynamo.reset()
    steps = []
    for compiled in (False, True):
        torch.manual_seed(0)
        step = BlockStep(Block(GPTConfig(layers=1, d_model=width, heads=max(1, width // 32), vocab=8, seq=seq)))
        fully_shard(step.block)
        fully_shard(step)
        if compiled:
            step.block.compile(backend=jointgraph.backend(**options))
        steps.append(step)
    x = torch.randn(batch, seq, width, generator=torch.Generator().manual_seed(rank))
    losses = []
    for step in steps:   # compiles, FSDP's lazy init; then the losses of a second step
        step(x).backward()
        step.zero_grad(set_to_none=True)
        losses.append(step(x).detach())
    # A stray allocation (gloo, the profiler) only adds: the lower of two steps is the step's own.
    measured = min(step_peak_bytes(steps[1], (x,)) for _ in range(2))
    plan = jointgraph.plans(steps[1].block)[-1]
    held = simulate(plan.forward, plan.backward, cost_compilers(plan.options))
    budget = options.get("memory_budget")   # an int is bytes (a float is a fraction: no byte figure)
    if report is not None:
        plan.to_html(report.format(rank=rank))
    return BlockMemory(rank, measured, plan.peak_bytes, plan.entry_bytes, plan.resharded_bytes, plan.gather_bytes,
                       held.peak_bytes - held.entry_bytes, budget if isinstance(budget, int) else None,
                       list(plan.timeline), list(plan.timeline_by_kind),
                       float((losses[1] - losses[0]).abs()))


BUDGET_BELOW_MINCUT = 0.97   # the budget of block_checks: this fraction of the mincut plan's simulated peak


def block_checks(rank: int, world: int, width: int = 128, seq: int = 64, report: str | None = None) -> list:
    """``block_memory`` under ``"mincut"``, then under ``"budget"`` with a budget in bytes below the
    mincut plan's simulated peak (``BUDGET_BELOW_MINCUT``): the planner must recompute to meet it."""
    mincut = block_memory(rank, world, {"partitioner": "mincut"}, width, seq, report=report)
    budget = int(BUDGET_BELOW_MINCUT * mincut.peak_bytes)
    return [mincut, block_memory(rank, world, {"partitioner": "budget", "memory_budget": budget}, width, seq)]


def block_table(ranks: list[list[BlockMemory]], title: str):
    """A rich Table: per rank and plan, measured and simulated peak above the step's start."""
    from rich.table import Table

    table = Table(title=title)
    for name in ("plan", "rank", "measured", "simulated", "sim / measured", "params held all step",
                 "resharded params", "all-gather buffer", "budget"):
        table.add_column(name, justify="left" if name == "plan" else "right")
    for results in ranks:
        for r in results:
            table.add_row("budget" if r.budget_bytes else "mincut", str(r.rank), _mib(r.measured_bytes),
                          _mib(r.simulated_bytes), f"{r.simulated_bytes / max(r.measured_bytes, 1):.2f}",
                          _mib(r.held_bytes), _mib(r.resharded_bytes), _mib(r.gather_bytes),
                          f"{_mib(r.budget_bytes - r.entry_bytes)} above start" if r.budget_bytes else "")
    return table


def _mib(nbytes: int) -> str:
    """``units.fmt_bytes`` in one fixed unit, so that the table's columns align."""
    return f"{nbytes / 2**20:.2f} MiB"
