"""Inductor as the graph compiler (Note [Inductor as the graph compiler]): gradients equal eager's,
saved values freed as the backward consumes them, measured peak within 10% of the simulated one.

Each Inductor compile of a tiny model costs seconds of C++ compilation on a CPU: the module keeps
to two compiles (marked slow) and a trace-only check."""

from __future__ import annotations

import shutil

import pytest
import torch

import jointgraph
from jointgraph.bench.gpt import GPT, GPTConfig
from jointgraph.bench.runner import _measure_memory, live_bytes_at_start
from jointgraph.bench.zoo import TrainStep, Workload, lm_loss
from jointgraph.ir import Role
from jointgraph.ir.graph import output_node
from jointgraph.options import CompileOptions
from tests.conftest import assert_same_grads

INDUCTOR = {"fw_compiler": "inductor", "bw_compiler": "inductor"}
needs_cxx = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                               reason="Inductor's CPU backend needs a C++ compiler")


def _mlp() -> Workload:
    width = 384
    layers = [m for _ in range(6) for m in (torch.nn.Linear(width, width), torch.nn.Tanh())]
    layers.append(torch.nn.Linear(width, 16))
    step = TrainStep(torch.nn.Sequential(*layers), lm_loss)
    return Workload("mlp", "tanh MLP", step, (torch.randn(width, width), torch.randint(0, 16, (width,))))


def _gpt() -> Workload:
    config = GPTConfig(layers=2, d_model=64, heads=2, vocab=128, seq=64)
    step = TrainStep(GPT(config), lm_loss)
    return Workload("gpt", "tiny GPT", step, (torch.randint(0, 128, (4, 64)), torch.randint(0, 128, (4, 64))))


def _eager_grads(work: Workload) -> list:
    work.step.zero_grad(set_to_none=True)
    work.step(*work.inputs).backward()
    grads = [p.grad.clone() for p in work.step.parameters()]
    work.step.zero_grad(set_to_none=True)
    return grads


def test_inductor_options_trace_with_its_decompositions():
    assert CompileOptions(**INDUCTOR).decompositions == "inductor"
    assert CompileOptions(bw_compiler="inductor").decompositions == "inductor"
    assert CompileOptions().decompositions is None
    assert CompileOptions(**INDUCTOR) != CompileOptions()   # so any key over the options tells them apart
    work = _gpt()
    eager = jointgraph.plan(work.step, *work.inputs)
    inductor = jointgraph.plan(work.step, *work.inputs, **INDUCTOR)

    aten = torch.ops.aten
    # Row-wise ops Inductor wants as loops: in the plain trace, decomposed in the Inductor trace.
    rowwise = {aten._softmax.default, aten._softmax_backward_data.default, aten.native_layer_norm.default,
               aten.native_layer_norm_backward.default, aten.nll_loss_forward.default}
    assert rowwise <= _plan_targets(eager)
    assert not rowwise & _plan_targets(inductor)
    torch.testing.assert_close(inductor.peak_bytes, eager.peak_bytes, rtol=0.5, atol=0)   # same model, other ops


def _targets(graph: torch.fx.GraphModule) -> set:
    return {n.target for n in graph.graph.nodes if n.op == "call_function"}


def _plan_targets(plan) -> set:
    """The ops of the plan's forward and backward graphs."""
    return _targets(plan.forward) | _targets(plan.backward)


def _run_plan_graphs(plan, args: tuple) -> list:
    """The plan's forward then backward graphs run as FX code on ``args`` (loss gradient 1): the gradients."""
    outputs = plan.forward(*args)
    roles = output_node(plan.forward.graph).meta["roles"]
    saved = {role: iter([v for v, r in zip(outputs, roles, strict=True) if r is role])
             for role in (Role.SAVED_TENSOR, Role.SAVED_SIZE)}
    bw_args = [next(saved[n.meta["role"]]) if n.meta["role"] in saved else torch.ones(())
               for n in plan.backward.graph.nodes if n.op == "placeholder"]
    return list(plan.backward(*bw_args))


@pytest.mark.parametrize("case", ["ignored", "weighted-sum", "spatial", "dynamic"])
def test_inductor_loss_backward_selects_instead_of_scattering(case):
    # Note [Pointwise scatter]: the one-hot gradient of nll_loss is a pointwise select, not zeros plus
    # a scatter (two logits-sized buffers); its values are eager's.
    aten = torch.ops.aten
    weight = torch.rand(10)
    shape, target = ((6, 10, 5), torch.randint(0, 10, (6, 5))) if case == "spatial" else \
        ((64, 10), torch.randint(0, 10, (64,)))
    target[0] = 3

    def loss(logits, target, weight):
        if case == "weighted-sum":
            return torch.nn.functional.cross_entropy(logits.tanh(), target, weight=weight, reduction="sum")
        return torch.nn.functional.cross_entropy(logits.tanh(), target, ignore_index=3)

    logits = torch.randn(shape, requires_grad=True)
    plan = jointgraph.plan(loss, logits, target, weight, **INDUCTOR, dynamic=case == "dynamic")
    assert aten.scatter.value not in _targets(plan.backward) and aten.full.default not in _targets(plan.backward)
    assert aten.where.self in _targets(plan.backward)
    loss(logits, target, weight).backward()
    grad = _run_plan_graphs(plan, (logits.detach(), target, weight))[0]
    torch.testing.assert_close(grad, logits.grad)


def test_a_scatter_the_user_wrote_is_left_alone():
    # An out-of-range index is eager's error in user code; only backward formulas are rewritten.
    def one_hot_loss(x, index):
        return (torch.zeros(8, 5).scatter(1, index, 1.0) * x).sum()

    plan = jointgraph.plan(one_hot_loss, torch.randn(8, 5, requires_grad=True), torch.randint(0, 5, (8, 1)),
                           **INDUCTOR)
    assert torch.ops.aten.scatter.value in _plan_targets(plan)


def _compiled_and_measured(work: Workload):
    """Compile with Inductor, check gradients against eager's, and return (plan, measured peak, saved)."""
    expected = _eager_grads(work)
    compiled = jointgraph.aot_module(work.step, **INDUCTOR)
    compiled(*work.inputs).backward()   # compile outside the measurement
    assert_same_grads(expected, [p.grad for p in work.step.parameters()], atol=1e-4, rtol=1e-4)
    peak, saved = _measure_memory(compiled, work, "cpu", 0)
    assert_same_grads(expected, [p.grad for p in work.step.parameters()], atol=1e-4, rtol=1e-4)
    plan = jointgraph.plan(work.step, *work.inputs, **INDUCTOR)
    assert abs(peak - plan.peak_bytes) <= 0.10 * peak, (peak, plan.peak_bytes)
    assert abs(saved - plan.saved_bytes) <= 0.10 * saved + 1024, (saved, plan.saved_bytes)
    return plan, peak, saved, expected


@pytest.mark.slow
@needs_cxx
def test_inductor_backward_frees_saved_values_as_it_consumes_them():
    work = _mlp()
    plan, peak, saved, grads = _compiled_and_measured(work)
    # Held until the backward returned (unboxed), every saved value and every gradient would be live
    # together at its end; freed as consumed, each layer's saved activation goes as its gradient comes.
    grad_bytes = sum(g.numel() * g.element_size() for g in grads)
    held_to_the_end = live_bytes_at_start(work) + saved + grad_bytes
    assert saved > 0.5 * grad_bytes
    assert peak < held_to_the_end - 0.5 * min(saved, grad_bytes), (peak, held_to_the_end)


@pytest.mark.slow
@needs_cxx
def test_inductor_gpt_matches_eager_and_the_simulator():
    plan, peak, _, _ = _compiled_and_measured(_gpt())
    assert plan.peak_bytes > 1_000_000


def _attention_stack(x, *weights):
    for w in weights:
        q, k, v = (x @ w).chunk(3, dim=-1)
        x = x + ((q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5).softmax(-1) @ v
    return x.square().mean()


def test_mincut_prices_attention_recompute_for_inductor(monkeypatch):
    # Note [Recompute allowance]: the attention scores (a product, and a softmax that fuses into no
    # library kernel) are recomputed in forward order while their estimated time fits the allowance.
    import re

    import jointgraph.planner.mincut as mincut

    layers, seq = 4, 64
    args = (torch.randn(4, seq, 16, requires_grad=True),
            *((torch.randn(16, 48) * 0.3).requires_grad_() for _ in range(layers)))

    def plan_with(allowance):
        monkeypatch.setattr(mincut, "RECOMPUTE_ALLOWANCE", allowance)
        plan = jointgraph.plan(_attention_stack, *args, partitioner="mincut", cache=False, **INDUCTOR)
        scores = [s for s in plan.saved if s.decision is jointgraph.Decision.SAVE and s.shape == (4, seq, seq)]
        return plan, scores

    everything, none_saved = plan_with(1.0)
    nothing, all_saved = plan_with(0.0)
    assert none_saved == [] and len(all_saved) == layers
    assert all("allowance" in s.reason for s in all_saved), [s.reason for s in all_saved]
    def bmm_count(plan):
        return [n.target for n in plan.backward.graph.nodes].count(torch.ops.aten.bmm.default)

    figures = re.search(r"add ([\d.e+-]+) ms to an estimated ([\d.e+-]+) ms", all_saved[0].reason)
    added, step = float(figures[1]), float(figures[2])
    bmms = bmm_count(everything)
    assert bmm_count(nothing) == bmms - layers
    two, saved = plan_with(2.5 * added / step)   # room for the first two layers' scores
    assert len(saved) == 2 and bmm_count(two) == bmms - 2
    assert nothing.saved_bytes > two.saved_bytes > everything.saved_bytes
    eager = torch.autograd.grad(_attention_stack(*args), args)
    assert_same_grads(list(eager), _run_plan_graphs(two, tuple(a.detach() for a in args)))
