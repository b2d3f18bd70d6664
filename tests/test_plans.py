"""jointgraph.plans: the Plans of what ran, under aot_function, aot_module and torch.compile; reprs."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import jointgraph


def _batch_sizes(plan) -> set[int]:
    return {s.shape[0] for s in plan.saved if len(s.shape) == 2}


def test_plans_of_aot_function_one_per_entry():
    f = jointgraph.aot_function(lambda x, w: (x @ w).tanh().sum())
    w = torch.randn(8, 8, requires_grad=True)
    assert jointgraph.plans(f) == []
    f(torch.randn(4, 8), w).backward()
    f(torch.randn(6, 8), w).backward()
    plans = jointgraph.plans(f)
    assert [type(p) for p in plans] == [jointgraph.Plan, jointgraph.Plan]
    assert 4 in _batch_sizes(plans[0]) and 6 in _batch_sizes(plans[1])   # oldest first
    assert plans[0].options.partitioner == "mincut"
    assert repr(f) == "<jointgraph compiled <lambda>: 2 entries, partitioner='mincut'>"


def test_plans_of_aot_module_follow_the_budget_option():
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 1))
    compiled = jointgraph.aot_module(copy.deepcopy(model), memory_budget=0.9)
    x = torch.randn(64, 16)
    torch.testing.assert_close(compiled(x), model(x))
    (plan,) = jointgraph.plans(compiled)
    assert plan.options.partitioner == "budget"
    assert plan.peak_bytes > 0 and plan.saved
    assert repr(compiled).startswith("<jointgraph compiled Sequential: 1 entry")


@pytest.mark.parametrize("make_backend", [lambda: "jointgraph", lambda: jointgraph.backend(partitioner="default")])
def test_plans_under_torch_compile(make_backend):
    torch._dynamo.reset()
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    compiled = torch.compile(copy.deepcopy(model), backend=make_backend())
    assert jointgraph.plans(compiled) == []
    x = torch.randn(4, 8)
    out = compiled(x)
    torch.testing.assert_close(out, model(x))
    out.sum().backward()
    (plan,) = jointgraph.plans(compiled)
    assert isinstance(plan, jointgraph.Plan) and plan.backward is not None
    expected = "default" if not isinstance(make_backend(), str) else "mincut"
    assert plan.options.partitioner == expected


def test_plans_of_a_torch_compiled_function():
    torch._dynamo.reset()

    def step(x, w):
        return (x @ w).sin().sum()

    compiled = torch.compile(step, backend="jointgraph")
    w = torch.randn(4, 3, requires_grad=True)
    compiled(torch.randn(5, 4), w).backward()
    (plan,) = jointgraph.plans(compiled)
    assert plan.saved and plan.forward is not None


def test_plans_rejects_other_objects():
    with pytest.raises(TypeError, match="jointgraph.plans expects"):
        jointgraph.plans(lambda x: x)


def test_plan_repr_is_short_and_says_what_matters():
    plan = jointgraph.plan(lambda x, w: (x @ w).relu().sum(), torch.randn(4, 8), torch.randn(8, 8, requires_grad=True))
    text = repr(plan)
    assert text.startswith("<Plan mincut: ") and "simulated peak" in text and "\n" not in text
    assert f"{len(plan.saved)} saved values" in text and len(text) < 200
