"""The "budget" partitioner: peak within the budget, verified by simulation and measurement."""

from __future__ import annotations

import warnings

import pytest
import torch

import jointgraph
from jointgraph.bench.gpt import GPT, GPTConfig
from jointgraph.bench.measure import memtracker_peak
from jointgraph.bench.zoo import TrainStep, lm_loss
from jointgraph.hooks import SavedTensorPolicy
from jointgraph.ir import Decision
from jointgraph.pareto import pareto
from jointgraph.planner.costs import DEVICES, node_flops

CONFIG = GPTConfig(layers=4, d_model=32, heads=2, vocab=64, seq=32)
FRACTIONS = (1.0, 0.8, 0.6, 0.45)
POLICY = SavedTensorPolicy(compress="bf16", offload=True)


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    step = TrainStep(GPT(CONFIG), lm_loss)
    idx = torch.randint(0, CONFIG.vocab, (4, CONFIG.seq))
    return step, idx, torch.randint(0, CONFIG.vocab, (4, CONFIG.seq))


@pytest.fixture(scope="module")
def default_peak(gpt):
    return jointgraph.plan(*gpt, partitioner="default").peak_bytes


@pytest.fixture(scope="module")
def plans(gpt):
    """Budget plans by fraction, each with the budget warnings it raised."""
    return {fraction: _plan(gpt, fraction) for fraction in FRACTIONS}


def _plan(gpt, budget, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = jointgraph.plan(*gpt, partitioner="budget", memory_budget=budget, **options)
    return result, [w for w in caught if "memory budget" in str(w.message)]


def _measured_peak(step, fn, *args) -> int:
    return memtracker_peak(step, fn, *args)


def _grads(step, fn, *args) -> list[torch.Tensor]:
    step.zero_grad(set_to_none=True)
    fn(*args).backward()
    grads = [p.grad.clone() for p in step.parameters()]
    step.zero_grad(set_to_none=True)
    return grads


def test_budgets_are_honoured_and_peaks_decrease(plans, default_peak):
    peaks = []
    for fraction in FRACTIONS:
        result, warned = plans[fraction]
        assert not warned, fraction
        assert result.peak_bytes <= fraction * default_peak, fraction
        peaks.append(result.peak_bytes)
    assert peaks == sorted(peaks, reverse=True) and peaks[-1] < peaks[0]


def test_tight_budget_checkpoints_blocks(plans):
    result, _ = plans[0.45]
    matmuls = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default)

    def backward_matmuls(plan) -> int:
        return sum(n.target in matmuls for n in plan.backward.graph.nodes)

    assert backward_matmuls(result) > backward_matmuls(plans[1.0][0])   # matmuls recomputed inside blocks
    assert any("boundary of region" in v.reason for v in result.saved if v.decision is Decision.SAVE)


def test_absolute_budget_in_bytes(gpt, default_peak):
    budget = int(0.7 * default_peak)
    result, warned = _plan(gpt, budget)
    assert not warned and result.peak_bytes <= budget


def test_infeasible_budget_warns_and_returns_lowest_peak(gpt, default_peak, plans):
    result, warned = _plan(gpt, 0.05)
    assert len(warned) == 1 and "minimum achievable peak" in str(warned[0].message)
    assert result.peak_bytes <= plans[0.45][0].peak_bytes


def test_reasons_explain_decisions(plans):
    result, _ = plans[0.8]
    recomputed = [v for v in result.saved if v.decision is Decision.RECOMPUTE]
    assert recomputed and all(v.reason for v in result.saved)
    assert any(v.reason.startswith("recomputed: frees") for v in recomputed)


def test_measured_peak_gradients_and_halving(gpt, plans):
    step, idx, targets = gpt
    expected = _grads(step, step, idx, targets)
    measured = {}
    for fraction in (1.0, 0.45):
        compiled = jointgraph.aot_module(step, partitioner="budget", memory_budget=fraction)
        for grad, want in zip(_grads(step, compiled, idx, targets), expected, strict=True):
            assert torch.equal(grad, want)
        measured[fraction] = _measured_peak(step, compiled, idx, targets)
        simulated = plans[fraction][0].peak_bytes
        assert abs(measured[fraction] - simulated) <= 1024, fraction   # the issue asks 10%; it is bytes
    assert measured[0.45] <= 0.6 * measured[1.0]


def test_policy_lets_the_planner_compress(gpt, default_peak):
    step, idx, targets = gpt
    result, warned = _plan(gpt, 0.45, saved_tensors=POLICY)
    assert not warned and result.peak_bytes <= 0.45 * default_peak
    assert any(v.decision in (Decision.COMPRESS, Decision.OFFLOAD) for v in result.saved)
    # Loose budget: the policy is only what the planner may use, nothing is compressed.
    loose, _ = _plan(gpt, 1.0, saved_tensors=POLICY)
    assert not any(v.decision in (Decision.COMPRESS, Decision.OFFLOAD) for v in loose.saved)
    compiled = jointgraph.aot_module(step, partitioner="budget", memory_budget=0.45, saved_tensors=POLICY)
    expected = _grads(step, step, idx, targets)
    for grad, want in zip(_grads(step, compiled, idx, targets), expected, strict=True):
        torch.testing.assert_close(grad, want, rtol=5e-2, atol=5e-3)


def test_regions_follow_layers(gpt):
    result, _ = _plan(gpt, 0.45)
    boundaries = [v for v in result.saved if "boundary of region" in v.reason]
    assert len(boundaries) >= CONFIG.layers


def test_pareto_time_does_not_increase_with_peak(gpt):
    points = pareto(*gpt, fractions=(1.0, 0.8, 0.5))
    assert len(points) >= 2
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


def _joint_graph(monkeypatch, layers: int, model: str = "gpt") -> torch.fx.Graph:
    """The joint graph the budget planner receives for a zoo model of ``layers`` layers."""
    from jointgraph import planning as pareto_module
    from jointgraph.bench.zoo import ZooShape, build_workload

    seen = {}
    real = pareto_module.plan_budget

    def spy(graph, budget, verify, **options):
        seen["graph"] = graph
        return real(graph, budget, verify, **options)

    monkeypatch.setattr(pareto_module, "plan_budget", spy)
    work = build_workload(model, ZooShape(layers=layers, width=32, batch=2, seq=64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jointgraph.plan(work.step, *work.inputs, partitioner="budget", memory_budget=0.5)
    return seen["graph"]


def test_repeated_layers_share_classes(monkeypatch):
    from jointgraph.planner.regions import Regions

    shallow, deep = Regions(_joint_graph(monkeypatch, 2)), Regions(_joint_graph(monkeypatch, 6))
    assert len(deep.order) > len(shallow.order)
    assert len(set(deep.class_of)) == len(set(shallow.class_of)) < len(deep.order)
    for r in deep.order:   # equal classes: one ladder, equal scores
        for q in deep.order:
            if r < q and deep.class_of[r] == deep.class_of[q]:
                assert deep.ladders[r] is deep.ladders[q]
                assert [deep.scores[(r, o)] for o in deep.ladders[r]] == [deep.scores[(q, o)] for o in deep.ladders[q]]


def test_masks_do_not_hide_the_layers(monkeypatch):
    """Hugging Face GPT-2's attention mask (batch x 1 x seq x seq, larger than the residual stream
    here) is read by every layer; it is a side value, so the layers still become regions."""
    from jointgraph.planner.regions import Regions

    layers = 3
    regions = Regions(_joint_graph(monkeypatch, layers, "gpt2"))
    side = regions._side_values()
    masks = [n for n in side if isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].dim() == 4
             and n.meta["val"].shape[-1] == n.meta["val"].shape[-2] == 64]
    assert masks
    assert len(regions.order) >= 2 * layers
    repeated = [c for c in set(regions.class_of) if regions.class_of.count(c) >= 2]
    assert repeated


def _region_milp_seconds(regions, limit: float) -> float | None:
    """The per-region formulation (one binary per region and option, no symmetry handling)."""
    import numpy as np
    from scipy.optimize import Bounds, LinearConstraint, milp

    variables = [(r, o) for r in regions.order for o in regions.ladders[r]]
    seconds = np.array([regions.scores[v][0] for v in variables])
    nbytes = np.array([regions.scores[v][1] for v in variables]) / 2**20
    working = [max(regions.scores[(r, o)][1] for o in regions.ladders[r]) / 2**20 for r in regions.order]
    one_each = LinearConstraint(np.array([[1.0 if v[0] == r else 0.0 for v in variables] for r in regions.order]), 1, 1)
    prefix = np.array([[nbytes[i] if v[0] < q else 0.0 for i, v in enumerate(variables)] for q in regions.order]
                      + [nbytes.tolist()])
    upper = np.array([limit / 2**20 - working[q] for q in regions.order] + [limit / 2**20])
    result = milp(seconds, constraints=[one_each, LinearConstraint(prefix, -np.inf, upper)],
                  integrality=np.ones(len(variables)), bounds=Bounds(0, 1),
                  options={"time_limit": 20.0, "mip_rel_gap": 1e-6})
    return None if result.x is None else float(result.fun)


def test_class_milp_finds_the_per_region_optimum(monkeypatch):
    from jointgraph.planner.milp import ClassMILP
    from jointgraph.planner.regions import Regions

    regions = Regions(_joint_graph(monkeypatch, 4))
    model = ClassMILP(regions)
    save_all = model.model_peak
    solved = 0
    for fraction in (0.9, 0.7, 0.5, 0.35):
        limit = fraction * save_all
        options = model.solve(limit)
        expected = _region_milp_seconds(regions, limit)
        assert (options is None) == (expected is None)
        if options is None:
            continue
        solved += 1
        assert regions.model_seconds(options.__getitem__) == pytest.approx(expected, rel=2e-3, abs=1e-9)
        kept = [regions.scores[(r, options[r])][1] for r in regions.order]
        working = [max(regions.scores[(r, o)][1] for o in regions.ladders[r]) for r in regions.order]
        assert all(sum(kept[:q]) + working[q] <= limit * (1 + 1e-6) for q in regions.order)
    assert solved >= 2


def test_stored_estimates_equal_the_cost_model(plans):
    from jointgraph.planner.costs import _node_seconds, device_for, node_seconds

    result, _ = plans[0.45]
    device = device_for(result.forward.graph)
    for graph in (result.forward.graph, result.backward.graph):
        stored = [n for n in graph.nodes if n.op == "call_function" and "est_seconds" in n.meta]
        assert stored
        for node in stored:   # the stored number itself, for this device, is the model's
            spec, seconds = node.meta["est_seconds"]
            assert spec == (device, "eager") and seconds == pytest.approx(_node_seconds(node, device))
        for node in graph.nodes:
            assert node_seconds(node, device) == pytest.approx(_node_seconds(node, device) if
                                                                node.op == "call_function" else 0.0)


def _residual_mlp(layers: int = 6, width: int = 64, rows: int = 1024):
    def block(x, w1, w2):
        h = torch.nn.functional.layer_norm(x, (width,))
        return x + torch.nn.functional.gelu(h @ w1).tanh() @ w2

    def fn(x, *weights):
        for i in range(layers):
            x = block(x, weights[2 * i], weights[2 * i + 1])
        return x.pow(2).mean()

    torch.manual_seed(0)
    args = [torch.randn(rows, width, requires_grad=True)]
    args += [(torch.randn(*shape) * 0.1).requires_grad_() for _ in range(layers)
             for shape in ((width, 4 * width), (4 * width, width))]
    return fn, args


def test_pruned_staircase_finds_what_the_full_search_finds(monkeypatch):
    """Skipping staircase steps by estimated time must not lose a faster plan that fits: the
    estimate from region scores is off by a few percent either way (found in review: at 0.5 the
    pruned search returned a plan 2% slower than the full one)."""
    from jointgraph.planner import regions as budget_module
    from jointgraph.planning import estimated_seconds

    fn, args = _residual_mlp()
    fractions = (0.8, 0.7, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pruned = [jointgraph.plan(fn, *args, partitioner="budget", memory_budget=f) for f in fractions]
        monkeypatch.setattr(budget_module.Regions, "model_seconds", lambda self, option_of: float("-inf"))
        full = [jointgraph.plan(fn, *args, partitioner="budget", memory_budget=f) for f in fractions]
    for fraction, p, f in zip(fractions, pruned, full, strict=True):
        assert estimated_seconds(p) <= estimated_seconds(f) * (1 + 1e-9), fraction
