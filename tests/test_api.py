"""The public API contract (docs/API.md), checked name by name."""

import copy
import warnings

import pytest
import torch
import torch.nn as nn

import jointgraph


def test_public_names():
    for name in ("aot_function", "aot_module", "backend", "plan", "pareto", "Plan", "SavedValue", "Decision",
                 "UnsupportedError", "hooks", "ParetoPoint"):
        assert hasattr(jointgraph, name), name
    assert {d.name for d in jointgraph.Decision} == {"SAVE", "RECOMPUTE", "OFFLOAD", "COMPRESS"}
    assert issubclass(jointgraph.UnsupportedError, RuntimeError)
    assert hasattr(jointgraph.hooks, "SavedTensorPolicy")


def test_plan_fields_are_consistent():
    def fn(x, w1, w2):
        return (torch.relu(x @ w1) @ w2).sum()

    x, w1, w2 = torch.randn(32, 64), torch.randn(64, 64, requires_grad=True), torch.randn(64, 8, requires_grad=True)
    plan = jointgraph.plan(fn, x, w1, w2, partitioner="default")
    assert isinstance(plan.forward, torch.fx.GraphModule) and isinstance(plan.backward, torch.fx.GraphModule)
    assert plan.saved_bytes == sum(s.nbytes for s in plan.saved)
    for s in plan.saved:
        assert s.name and s.reason and isinstance(s.decision, jointgraph.Decision)
    # the peak covers at least the inputs, the parameters and their gradients
    inputs = sum(t.numel() * t.element_size() for t in (x, w1, w2))
    assert plan.peak_bytes >= inputs + (w1.numel() + w2.numel()) * 4
    assert {phase for phase, _, _ in plan.timeline} == {"forward", "backward"}
    # after the step: the inputs are still live, every gradient has been produced, nothing is saved
    end = plan.timeline_by_kind[-1]
    assert end["inputs"] == inputs and end["saved"] == 0
    assert end["gradients"] == (w1.numel() + w2.numel()) * 4
    assert {"trace", "partition"} <= set(plan.timings)


def test_aot_module_follows_to_train_eval_and_optimizers():
    model = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 2))
    compiled = jointgraph.aot_module(model)
    x = torch.randn(4, 8)
    compiled.eval()
    torch.testing.assert_close(compiled(x), model(x))       # eval: dropout off
    compiled.train()
    opt = torch.optim.Adam(compiled.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in model.parameters()]
    compiled(x).sum().backward()
    opt.step()
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters(), strict=True))
    compiled.to(torch.float64)
    compiled.eval()
    out = compiled(x.double())
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, model(x.double()))


def test_backend_with_budget_options_as_documented():
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 1))
    twin = copy.deepcopy(model)
    compiled = torch.compile(twin, backend=jointgraph.backend(partitioner="budget", memory_budget=0.9))
    x = torch.randn(2048, 32)   # activations dominate the weights: 0.9 of the peak is within reach (min ~0.82)
    model(x).sum().backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled(x).sum().backward()
    assert not [w for w in caught if "memory budget" in str(w.message)]
    for p_e, p_c in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p_c.grad, p_e.grad)


def test_invalid_budget_values_raise_value_error():
    for bad in (0.0, 1.5, -3, "half", True):
        with pytest.raises(ValueError, match="memory_budget"):
            jointgraph.aot_function(lambda x: x, partitioner="budget", memory_budget=bad)
