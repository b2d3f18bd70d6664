"""The "budget" partitioner: peak within the budget, verified by simulation and measurement."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.distributed._tools.mem_tracker import MemTracker

import jointgraph
from jointgraph.bench.gpt import GPT, GPTConfig
from jointgraph.ir import Decision
from jointgraph.pareto import pareto
from jointgraph.planner.costs import DEVICES, node_flops

CONFIG = GPTConfig(layers=2, d_model=64, heads=2, vocab=128, seq=64)


class Step(torch.nn.Module):
    def __init__(self, model: GPT):
        super().__init__()
        self.model = model

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.model(idx).flatten(0, 1), targets.flatten())


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    step = Step(GPT(CONFIG))
    idx = torch.randint(0, CONFIG.vocab, (8, CONFIG.seq))
    return step, idx, torch.randint(0, CONFIG.vocab, (8, CONFIG.seq))


@pytest.fixture(scope="module")
def default_peak(gpt):
    return jointgraph.plan(*gpt, partitioner="default").peak_bytes


def _plan(gpt, budget):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = jointgraph.plan(*gpt, partitioner="budget", memory_budget=budget)
    return result, [w for w in caught if "memory budget" in str(w.message)]


def _measured_peak(step, fn, *args) -> int:
    step.zero_grad(set_to_none=True)
    tracker = MemTracker()
    tracker.track_external(step, *args)
    with tracker:
        fn(*args).backward()
    step.zero_grad(set_to_none=True)
    return tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]


def test_budgets_are_honoured_and_peaks_decrease(gpt, default_peak):
    peaks = []
    for fraction in (1.0, 0.8):
        result, warned = _plan(gpt, fraction)
        assert not warned
        assert result.peak_bytes <= fraction * default_peak
        peaks.append(result.peak_bytes)
    assert peaks[1] < peaks[0]


@pytest.mark.xfail(reason="open problem: the planner's lowest peak on GPT is ~0.74x default (issue 5)", strict=False)
@pytest.mark.parametrize("fraction", [0.6, 0.45])
def test_tight_budgets(gpt, default_peak, fraction):
    result, _ = _plan(gpt, fraction)
    assert result.peak_bytes <= fraction * default_peak


def test_absolute_budget_in_bytes(gpt, default_peak):
    budget = int(0.85 * default_peak)
    result, warned = _plan(gpt, budget)
    assert not warned and result.peak_bytes <= budget


def test_infeasible_budget_warns_and_returns_lowest_peak(gpt, default_peak):
    result, warned = _plan(gpt, 0.05)
    assert len(warned) == 1 and "minimum achievable peak" in str(warned[0].message)
    assert result.peak_bytes < default_peak


def test_reasons_explain_decisions(gpt):
    result, _ = _plan(gpt, 0.8)
    recomputed = [v for v in result.saved if v.decision is Decision.RECOMPUTE]
    assert recomputed and all(v.reason for v in result.saved)
    assert any(v.reason.startswith("recomputed: frees") for v in recomputed)


def test_gradients_equal_eager_and_measured_peak_matches(gpt, default_peak):
    step, idx, targets = gpt
    result, _ = _plan(gpt, 0.8)
    compiled = jointgraph.aot_module(step, partitioner="budget", memory_budget=0.8)
    step.zero_grad(set_to_none=True)
    step(idx, targets).backward()
    expected = [p.grad.clone() for p in step.parameters()]
    step.zero_grad(set_to_none=True)
    compiled(idx, targets).backward()
    for p, grad in zip(step.parameters(), expected, strict=True):
        assert torch.equal(p.grad, grad)
    measured = _measured_peak(step, compiled, idx, targets)
    assert abs(measured - result.peak_bytes) <= 0.10 * result.peak_bytes


def test_pareto_time_does_not_increase_with_peak(gpt):
    points = pareto(*gpt, fractions=(1.0, 0.8, 0.5))
    assert points
    for lower, higher in zip(points, points[1:]):
        assert lower.peak_bytes < higher.peak_bytes and higher.est_seconds <= lower.est_seconds


def test_cost_model_counts_matmul_flops():
    graph = torch.fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    a.meta["val"], b.meta["val"] = torch.empty(64, 32, device="meta"), torch.empty(32, 16, device="meta")
    mm = graph.call_function(torch.ops.aten.mm.default, (a, b))
    mm.meta["val"] = torch.empty(64, 16, device="meta")
    assert node_flops(mm) == 2 * 64 * 32 * 16
    assert set(DEVICES) == {"cpu", "h100"}
