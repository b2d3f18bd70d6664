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

    def targets(plan):
        return {n.target for g in (plan.forward, plan.backward) for n in g.graph.nodes if n.op == "call_function"}

    aten = torch.ops.aten
    # Row-wise ops Inductor wants as loops: in the plain trace, decomposed in the Inductor trace.
    rowwise = {aten._softmax.default, aten._softmax_backward_data.default, aten.native_layer_norm.default,
               aten.native_layer_norm_backward.default, aten.nll_loss_forward.default}
    assert rowwise <= targets(eager)
    assert not rowwise & targets(inductor)
    torch.testing.assert_close(inductor.peak_bytes, eager.peak_bytes, rtol=0.5, atol=0)   # same model, other ops


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
